"""One life of a gateway process, for tests/gateway/test_gateway_restart.py (run as a script).

    python restart_child.py HOME SPEC.json  ->  JSON on stdout

Opens the gateway on HOME's durable state (`Gateway.open(cfg)`: registry.json, Milvus Lite, the
publication heads), enrolls and publishes what SPEC lists, records the routing of SPEC's questions
(sites considered with scores and summaries, sites called), tries SPEC's `replay` publication if
any, records the routing again, and closes the gateway (what `serve` does on SIGTERM). Sites are
reached in-process with no site app registered, so every call fails fast: routing is decided before
any call, and no socket is opened.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(home: str, spec_path: str) -> None:
    from hansa.core.config import load_config
    from hansa.core.errors import HansaError
    from hansa.gateway.trust import admin
    from hansa.gateway.query.request import QueryRequest
    from hansa.gateway.service import Gateway
    from hansa.gateway.transport import InProcessSiteTransport

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    cfg = load_config(env={"HANSA_HOME": home})

    def routing(gw: Gateway) -> list[dict[str, Any]]:
        out = []
        for question in spec["questions"]:
            trace = gw.query(QueryRequest(question=question), client="restart-test").trace.to_json()
            out.append({"question": question, "considered": trace["sites_considered"],
                        "called": trace["sites_called"]})
        return out

    result: dict[str, Any] = {}
    with Gateway.open(cfg, transport=lambda identity, _cfg: InProcessSiteTransport(identity)) as gw:
        for site_id, url, key in spec.get("enroll", []):
            admin.enroll(gw.registry, site_id, url, [key])
        for site_id, envelope in spec.get("publish", []):
            gw.publish(site_id, json.loads(Path(envelope).read_text(encoding="utf-8")))
        result["routing"] = routing(gw)
        replay = spec.get("replay")
        if replay is not None:
            site_id, envelope = replay
            try:
                result["replay"] = {"accepted": gw.publish(site_id, json.loads(Path(envelope).read_text(encoding="utf-8")))}
            except HansaError as exc:
                result["replay"] = {"refused": type(exc).__name__, "status": exc.http_status, "error": str(exc)}
            result["routing_after_replay"] = routing(gw)
        result["summaries"] = gw.index.count()
        result["last_sequence"] = {s: gw.registry.last_sequence(s) for s in spec["sites"]}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
