"""Start a real Neo4j 5.26 + open-source GDS 2.13 for development and CI (standard library only).

Why this exists: there is no Docker engine and no neo4j.com download here, only Maven Central, so
the database is assembled from Maven artifacts (scripts/neo4j) and run by a small Java launcher.
The launcher blocks on its stdin: when the Python side goes away for any reason (even SIGKILL),
the pipe closes and the database shuts itself down, so no test run leaves a JVM behind.

Importable (tests/conftest.py):
    dev = Neo4jDev.start(workdir)   # builds with Maven if needed, waits for the ready line
    dev.uri                         # bolt://127.0.0.1:PORT, auth disabled, loopback only
    dev.stop()

Command line (or scripts/neo4j-dev):
    python scripts/neo4j_dev.py [--workdir DIR] [--port N] [--heap 2g]
prints the launcher's ready line `HANSA-NEO4J-READY bolt://127.0.0.1:PORT gds=2.13.x` on stdout, the
`export HANSA_GRAPH_BACKEND=neo4j HANSA_NEO4J_URI=...` lines a site needs on stderr, and runs until SIGTERM/SIGINT or EOF on stdin (stdin from /dev/null is not watched, so `&` works).
"""
from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

SCRIPTS_DIR = Path(__file__).resolve().parent
REPO_DIR = SCRIPTS_DIR.parent
READY_PREFIX = "HANSA-NEO4J-READY "
FAILED_PREFIX = "HANSA-NEO4J-FAILED"
LAUNCHER_CLASS = "hansa.dev.Neo4jGdsLauncher"
START_TIMEOUT_S = 240.0
# gds.version() reads META-INF/info.properties from proc-sysinfo; it must come first on -cp.
SYSINFO_JAR_PREFIX = "proc-sysinfo-"
# Java 17 module opens that Neo4j and GDS need for off-heap memory and Netty (see notes/neo4j-gds.md).
_OPENS = (
    "java.lang",
    "java.lang.invoke",
    "java.nio",
    "java.io",
    "java.util",
    "java.util.concurrent",
    "java.util.stream",
    "sun.nio.ch",
    "sun.net.www.protocol.http",
)
_BUILD_STAMP = ".hansa-build-stamp"


def _project_dir(scripts_dir: Path) -> Path:
    return Path(scripts_dir) / "neo4j"


def _newest_input_mtime(project: Path) -> float:
    inputs = [project / "pom.xml", *(p for p in (project / "src").rglob("*") if p.is_file())]
    return max(p.stat().st_mtime for p in inputs)


def _needs_build(project: Path) -> bool:
    target = project / "target"
    stamp = target / _BUILD_STAMP
    for required in (target / "classes", target / "lib", target / "plugins", stamp):
        if not required.exists():
            return True
    return _newest_input_mtime(project) > stamp.stat().st_mtime


def build(scripts_dir: Path) -> None:
    """Compile the launcher and copy its jars with Maven, unless the last build is still current.

    Serialised with a file lock so that parallel test processes do not run Maven twice at once."""
    project = _project_dir(scripts_dir)
    if not (project / "pom.xml").is_file():
        raise RuntimeError(f"{project / 'pom.xml'} is missing: run from a full hansa checkout")
    if not _needs_build(project):
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven (mvn) is not on PATH: install Maven 3.8+ and JDK 17 to build the Neo4j launcher")
    (project / "target").mkdir(exist_ok=True)
    with open(project / "target" / ".hansa-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _needs_build(project):  # another process built it while we waited
            return
        started = time.time()
        result = subprocess.run(
            [mvn, "-q", "-B", "package", "-DskipTests"],
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"building the Neo4j launcher failed (mvn exit {result.returncode}) in {project}:\n{result.stdout}"
            )
        (project / "target" / _BUILD_STAMP).write_text(f"built in {time.time() - started:.1f}s\n")


def classpath(scripts_dir: Path) -> str:
    """The launcher's classpath, with GDS's proc-sysinfo jar first and the rest in a stable order."""
    target = _project_dir(scripts_dir) / "target"
    jars = sorted((target / "lib").glob("*.jar"))
    sysinfo = [j for j in jars if j.name.startswith(SYSINFO_JAR_PREFIX)]
    if len(sysinfo) != 1:
        raise RuntimeError(f"expected one {SYSINFO_JAR_PREFIX}*.jar in {target / 'lib'}, found {len(sysinfo)}: rebuild")
    rest = [j for j in jars if j not in sysinfo]
    return os.pathsep.join(str(p) for p in [target / "classes", *sysinfo, *rest])


def java_command(scripts_dir: Path, home: Path, port: int, heap: str) -> list[str]:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise RuntimeError("java is not on PATH (or JAVA_HOME is wrong): install JDK 17")
    return [
        java,
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:+ExitOnOutOfMemoryError",
        *(f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in _OPENS),
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dfile.encoding=UTF-8",
        "-cp",
        classpath(scripts_dir),
        LAUNCHER_CLASS,
        str(home),
        str(_project_dir(scripts_dir) / "target" / "plugins"),
        str(port),
    ]


def free_port() -> int:
    """A loopback port that was free a moment ago (the launcher fails loudly if someone took it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Neo4jDev:
    """A running launcher process; use `Neo4jDev.start(...)` and `stop()` (or `with`)."""

    def __init__(self, process: subprocess.Popen, uri: str, ready_line: str, log_path: Path, seconds: float) -> None:
        self.process = process
        self.uri = uri
        self.ready_line = ready_line
        self.log_path = log_path
        self.startup_seconds = seconds

    @classmethod
    def start(cls, workdir: Path, port: int | None = None, heap: str = "2g") -> "Neo4jDev":
        """Build if needed, launch, and return once Neo4j answers with GDS registered.

        A store already in `workdir/home` is reused (warm start); raises RuntimeError with the
        tail of `workdir/neo4j.log` if the launcher exits or is not ready within 240 s. A port we
        picked ourselves can be taken by someone else before Java binds it: then retry once."""
        build(SCRIPTS_DIR)
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        attempts = 1 if port is not None else 2
        for attempt in range(attempts):
            try:
                return cls._launch(workdir, port if port is not None else free_port(), heap)
            except _PortTaken:
                if attempt + 1 == attempts:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _launch(cls, workdir: Path, port: int, heap: str) -> "Neo4jDev":
        log_path = workdir / "neo4j.log"
        ready_before = len(_ready_lines(log_path))  # the log is appended to across runs
        command = java_command(SCRIPTS_DIR, workdir / "home", port, heap)
        started = time.monotonic()
        with open(log_path, "ab") as log_file:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir)
        try:
            ready = _wait_ready(process, log_path, ready_before, started)
        except BaseException:
            _terminate(process)
            raise
        return cls(process, ready.split()[1], ready, log_path, time.monotonic() - started)

    def stop(self, timeout: float = 60.0) -> None:
        """Close stdin (the launcher then shuts the database down cleanly); escalate if it hangs."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _terminate(self.process)

    def __enter__(self) -> "Neo4jDev":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class _PortTaken(RuntimeError):
    """The launcher could not bind the Bolt port."""


def _wait_ready(process: subprocess.Popen, log_path: Path, ready_before: int, started: float) -> str:
    """Poll the log for the launcher's ready line (printed only after its GDS self-check)."""
    while time.monotonic() - started < START_TIMEOUT_S:
        lines = _ready_lines(log_path)[ready_before:]
        if lines:
            return lines[0]
        if process.poll() is not None:
            tail = _tail(log_path)
            kind = _PortTaken if "Address already in use" in tail else RuntimeError
            raise kind(
                f"Neo4j launcher exited with code {process.returncode} before it was ready; log {log_path}:\n{tail}"
            )
        time.sleep(0.2)
    raise RuntimeError(f"Neo4j was not ready within {START_TIMEOUT_S:.0f}s; log {log_path}:\n{_tail(log_path)}")


def _ready_lines(log_path: Path) -> list[str]:
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.startswith(READY_PREFIX)]


def _terminate(process: subprocess.Popen) -> None:
    """SIGTERM (the JVM's shutdown hook stops Neo4j cleanly), then SIGKILL as the last resort."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _stdin_is_watchable() -> bool:
    """EOF on stdin means "stop" only if stdin is a real pipe or terminal, not /dev/null or closed."""
    try:
        st = os.fstat(sys.stdin.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    null = os.stat(os.devnull)
    return (st.st_dev, st.st_ino) != (null.st_dev, null.st_ino)


def admin_exports(uri: str) -> str:
    """The shell lines that point a site at this server (core/config.py's HANSA_<SECTION>_<KEY>).

    Why printed: the port is random unless --port is given, and a site left at its defaults would
    use the embedded store, not this server."""
    return "\n".join([
        f"export HANSA_GRAPH_BACKEND=neo4j HANSA_NEO4J_URI={uri}",
        "export HANSA_NEO4J_USER=neo4j HANSA_NEO4J_PASSWORD=unused HANSA_NEO4J_DATABASE=neo4j",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run Neo4j 5.26 + GDS 2.13 on loopback for development.")
    parser.add_argument("--workdir", type=Path, default=REPO_DIR / ".hansa" / "neo4j-dev",
                        help="store and log directory (reused between runs)")
    parser.add_argument("--port", type=int, default=None,
                        help="Bolt port, e.g. 7687 (default: a free one; the export lines printed on stderr name it)")
    parser.add_argument("--heap", default="2g", help="JVM heap, e.g. 2g (GDS projections live on the heap)")
    parser.add_argument("--build-only", action="store_true",
                        help="resolve the jars from Maven Central and compile the launcher, then exit "
                             "(what scripts/test does first, so a Maven failure is reported on its own)")
    args = parser.parse_args(argv)
    if args.build_only:
        try:
            build(SCRIPTS_DIR)
        except RuntimeError as exc:
            print(str(exc), file=sys.stderr)
            return 1
        print("neo4j-dev: launcher built", file=sys.stderr)
        return 0

    stop_event = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop_event.set())
    try:
        dev = Neo4jDev.start(args.workdir, port=args.port, heap=args.heap)
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    try:
        print(dev.ready_line, flush=True)
        print(f"neo4j-dev: log {dev.log_path}; started in {dev.startup_seconds:.1f}s; for a site (auth is off, "
              f"so any password works), then for the tests:\n{admin_exports(dev.uri)}\n"
              f"export HANSA_TEST_NEO4J_URI={dev.uri}", file=sys.stderr, flush=True)
        if _stdin_is_watchable():
            def watch_stdin() -> None:
                # os.read, not sys.stdin: a daemon thread blocked inside the buffered reader
                # would abort interpreter shutdown ("could not acquire lock for <stdin>").
                while os.read(sys.stdin.fileno(), 4096):
                    pass
                stop_event.set()

            threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()
        while not stop_event.wait(0.5):
            if dev.process.poll() is not None:
                print(f"neo4j-dev: launcher exited with {dev.process.returncode}; log {dev.log_path}:\n"
                      f"{_tail(dev.log_path)}", file=sys.stderr)
                return 1
    finally:
        dev.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
