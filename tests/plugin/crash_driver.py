"""A tiny driver for the `kill -9` drills (test_crash_drills*.py): runs the real code in its own
process, so a drill can kill it (HANSA_TEST_CRASH_AT, hansa.core.crash_points) at a chosen step.

Why not only the `hansa` command: two steps need knobs the command does not expose — ingest in
batches of one document (so a crash can fall between two committed batches of a four-document
corpus), and a gateway applying a publication without an HTTP server around it.

    python crash_driver.py ingest BATCH_DOCS PATH...
    python crash_driver.py gateway-apply SITE_ID ENVELOPE.json...

Configuration (HANSA_HOME first) comes from HANSA_* like every hansa process. `gateway-apply` prints one JSON line per
envelope ({"ok": result} or {"error": kind, "current_sequence": n}) and closes the gateway, which
writes its durable copy (the write-behind flush) before the process exits.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from hansa.core.config import load_config
from hansa.core.errors import HansaError


def ingest(batch_docs: str, *paths: str) -> None:
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.site import SiteContext

    with SiteContext.open(load_config()) as ctx:
        report = ingest_paths(ctx, [Path(p) for p in paths], batch_docs=int(batch_docs))
    print(json.dumps({"new": report.documents_new, "changed": report.documents_changed, "chunks": report.chunks}))


def gateway_apply(site_id: str, *envelopes: str) -> None:
    from hansa.gateway.trust.publishing import PublicationConflict
    from hansa.gateway.service import Gateway

    with Gateway.open(load_config()) as gateway:
        for path in envelopes:
            try:
                out = {"ok": gateway.publish(site_id, json.loads(Path(path).read_text(encoding="utf-8")))}
            except PublicationConflict as exc:
                out = exc.body().to_json()
            except HansaError as exc:
                out = {"error": str(exc), "kind": type(exc).__name__}
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"ingest": ingest, "gateway-apply": gateway_apply}[command](*args)
