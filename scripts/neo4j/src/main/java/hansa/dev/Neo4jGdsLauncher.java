package hansa.dev;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.graphdb.config.Setting;

import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.Result;
import org.neo4j.graphdb.Transaction;

/**
 * Starts Neo4j Community with open-source GDS in this JVM, Bolt on loopback only.
 *
 * Why a launcher and not a server tarball: this workplace reaches Maven Central but no download
 * site, so the database is assembled from Maven artifacts. It is for development and CI only:
 * authentication is off and it listens on 127.0.0.1.
 *
 * Usage: java -cp ... hansa.dev.Neo4jGdsLauncher HOME_DIR PLUGIN_DIR PORT
 * Prints exactly one line starting with "HANSA-NEO4J-READY bolt://127.0.0.1:PORT" when usable,
 * then blocks until stdin closes (or SIGTERM) and shuts down cleanly.
 */
public final class Neo4jGdsLauncher {

    private Neo4jGdsLauncher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Neo4jGdsLauncher HOME_DIR PLUGIN_DIR PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Path plugins = Path.of(args[1]).toAbsolutePath();
        int port = Integer.parseInt(args[2]);
        Files.createDirectories(home);

        // Typed settings: a misspelt or removed key fails at compile time, not at start-up.
        Map<Setting<?>, Object> settings = new HashMap<>();
        settings.put(BoltConnector.enabled, true);
        settings.put(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port));
        settings.put(BoltConnector.advertised_address, new SocketAddress("127.0.0.1", port));
        settings.put(GraphDatabaseSettings.plugin_dir, plugins);
        settings.put(GraphDatabaseSettings.procedure_unrestricted, List.of("gds.*"));
        settings.put(GraphDatabaseSettings.auth_enabled, false);
        settings.put(GraphDatabaseSettings.udc_enabled, false); // dbms.usage_report.enabled: no phoning home
        settings.put(GraphDatabaseSettings.pagecache_memory, 256L * 1024 * 1024);
        settings.put(GraphDatabaseSettings.keep_logical_logs, "1 files");
        // Netty's graceful-shutdown quiet period (default 5 s per Bolt server, two servers) would
        // make every test session wait ~10 s at the end for connections that are already gone.
        settings.put(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0);

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(settings)
                .build();
        AtomicBoolean stopped = new AtomicBoolean(false);
        Runnable shutdown = () -> {
            if (stopped.compareAndSet(false, true)) {
                dbms.shutdown();
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(shutdown, "neo4j-shutdown"));

        GraphDatabaseService db = dbms.database("neo4j");
        if (!db.isAvailable(TimeUnit.MINUTES.toMillis(5))) {
            System.err.println("HANSA-NEO4J-FAILED database 'neo4j' did not become available");
            shutdown.run();
            System.exit(1);
        }
        String gdsVersion = selfCheck(db);
        System.out.println("HANSA-NEO4J-READY bolt://127.0.0.1:" + port + " gds=" + gdsVersion);
        System.out.flush();

        // Block until our parent closes stdin: the parent's death must never leave a database behind.
        InputStream in = System.in;
        try {
            while (in.read() != -1) {
                // discard
            }
        } catch (IOException ignored) {
            // stdin broken: same as closed
        }
        shutdown.run();
        System.exit(0);
    }

    /** Refuse to report ready unless GDS is really registered, with Leiden available. */
    private static String selfCheck(GraphDatabaseService db) {
        try (Transaction tx = db.beginTx()) {
            String version;
            try (Result r = tx.execute("RETURN gds.version() AS v")) {
                version = String.valueOf(r.next().get("v"));
            }
            long leiden;
            try (Result r = tx.execute(
                    "CALL gds.list() YIELD name WHERE name STARTS WITH 'gds.leiden.' RETURN count(*) AS n")) {
                leiden = ((Number) r.next().get("n")).longValue();
            }
            tx.commit();
            if (!version.startsWith("2.13") || leiden == 0) {
                System.err.println("HANSA-NEO4J-FAILED gds.version()=" + version + " leiden procedures=" + leiden);
                System.exit(1);
            }
            return version;
        }
    }
}
