"""The admin page's fast tier: authentication, escaping of untrusted values, the JSON twin, and the
ring of recent queries. The page is served by its real blueprint in a bare Flask app, over a state
document built here (the browser test, test_admin_browser.py, builds it from a real gateway)."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from hansa.core.config import as_dict, load_config
from hansa.core.errors import ConfigError
from hansa.core.shared_state import SharedState
from hansa.gateway.http.admin_auth import SESSION_COOKIE, SESSION_TTL_S, AdminKey
from hansa.gateway.http.admin_page import create_admin_blueprint, duration
from hansa.gateway.http.admin_state import key_id, recent_statuses
from hansa.gateway.recent_queries import MAX_RECORD_BYTES, RecentQueries
from hansa.sync.keys import SiteIdentity
from tests.clock import ManualClock

KEY = "admin-key-for-tests-0123456789abcdef"
HOSTILE_SITE = "evil\"><script>alert('site')</script>"
HOSTILE_QUESTION = "<img src=x onerror=alert('question')> what?"
HOSTILE_TRACE = "</pre><script>alert('trace')</script>"


def state_doc() -> dict[str, Any]:
    return {
        "generated_at": "2026-11-23T21:00:00Z",
        "health": {"status": "degraded", "sites": 1, "routable_sites": 1, "summaries": 3},
        "sites": [{
            "site_id": HOSTILE_SITE, "url": "http://127.0.0.1:1/<b>", "status": "active", "routable": True,
            "expired": False, "key_ids": ["0123456789abcdef0123456789abcdef"], "keys_version": 1,
            "published_at": "2026-11-23T20:00:00Z", "published_age_s": 3600, "last_sequence": 4,
            "expires": "2026-11-30T20:00:00Z", "expires_in_s": 7 * 86400 - 3600, "summary_count": 3,
            "last_call": {"status": "timeout", "at": "2026-11-23T20:59:00Z"},
            "reliability": {"reliability": 0.8125, "successes": 3.0, "failures": 0.5},
            "conduct": {"claim_gap": None, "calls": 0, "routing_discount": 0.0, "routing_share": 0.25,
                        "templated_sentences": 0, "quarantined": None, "broadly_disputed": True,
                        "disputed_with": ["site-b", "site-c", HOSTILE_SITE]},
            "recent_calls": [{"status": "timeout", "at": "2026-11-23T20:59:00Z", "latency_ms": 10000.0,
                              "query_id": "q2"}, {"status": "ok", "at": "2026-11-23T20:58:00Z",
                                                  "latency_ms": 42.0, "query_id": "q1"}],
        }],
        "recent_queries": [{
            "at": "2026-11-23T20:59:00Z", "query_id": "q2", "client": "front-end", "question": HOSTILE_QUESTION,
            "origin": None, "abstained": False, "answer": "An answer <i>from a site</i>.",
            "calls": [{"site_id": HOSTILE_SITE, "status": "timeout", "latency_ms": 10000.0}],
            "trace": {"stages_ms": {"route": 1.25, "call": 10000.0}, "note": HOSTILE_TRACE},
        }],
        "recent_queries_kept": 50,
        "shared": False,
    }


def client(admin_key: str = KEY, state: dict[str, Any] | None = None, clock: ManualClock | None = None) -> Any:
    app = Flask("admin-test")
    doc = state or state_doc()
    app.register_blueprint(create_admin_blueprint(admin_key, lambda: doc, **({"clock": clock} if clock else {})))
    return app.test_client()


def logged_in(c: Any, key: str = KEY) -> Any:
    resp = c.post("/admin/login", data={"key": key})
    assert resp.status_code == 303 and resp.headers["Location"].endswith("/admin")
    return resp


# -- authentication ------------------------------------------------------------------------------
def test_without_the_key_the_page_and_its_json_are_refused() -> None:
    c = client()
    page = c.get("/admin")
    assert page.status_code == 401 and b'name="key"' in page.data  # the login form
    assert HOSTILE_SITE.encode() not in page.data and b"evil" not in page.data  # nothing of the state leaks
    api = c.get("/admin/api/state")
    assert api.status_code == 401 and api.headers["WWW-Authenticate"].startswith("Bearer")
    assert api.get_json()["kind"] == "AdminUnauthenticated"


@pytest.mark.parametrize("authorization", [
    "Bearer wrong-key-wrong-key-wrong-key-0000", f"Basic {KEY}", f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", KEY, ""])
def test_a_wrong_or_malformed_credential_is_refused(authorization: str) -> None:
    assert client().get("/admin/api/state", headers={"Authorization": authorization}).status_code == 401


def test_the_key_in_the_url_is_not_a_credential() -> None:
    """A key in a query string would land in every access log: it is never read from there."""
    c = client()
    assert c.get(f"/admin/api/state?key={KEY}").status_code == 401
    assert c.get(f"/admin?key={KEY}").status_code == 401


def test_the_admin_key_as_bearer_gets_the_json_the_page_is_built_from() -> None:
    resp = client().get("/admin/api/state", headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.get_json() == state_doc()
    assert resp.headers["Cache-Control"] == "no-store"


def test_logging_in_sets_a_strict_session_cookie_that_opens_page_and_json() -> None:
    c = client()
    assert c.post("/admin/login", data={"key": "not the key"}).status_code == 401
    cookie = logged_in(c).headers["Set-Cookie"]
    assert f"{SESSION_COOKIE}=" in cookie and KEY not in cookie
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/admin", f"Max-Age={SESSION_TTL_S}"):
        assert attribute in cookie
    assert c.get("/admin").status_code == 200
    assert c.get("/admin/api/state").get_json()["sites"][0]["site_id"] == HOSTILE_SITE
    assert c.post("/admin/logout").status_code == 303
    assert c.get("/admin").status_code == 401


def test_a_session_from_another_key_a_forged_one_or_an_old_one_is_refused() -> None:
    other = AdminKey("another-admin-key-0123456789abcdef")
    c = client()
    c.set_cookie(SESSION_COOKIE, other.new_session(), path="/admin")
    assert c.get("/admin").status_code == 401
    c.set_cookie(SESSION_COOKIE, "ImFkbWluIg.forged.signature", path="/admin")
    assert c.get("/admin").status_code == 401
    start = datetime(2026, 11, 23, 12, tzinfo=timezone.utc)
    clock = ManualClock(start)
    c = client(clock=clock)
    logged_in(c)
    clock.move_to(start + timedelta(seconds=SESSION_TTL_S - 60))
    assert c.get("/admin/api/state").status_code == 200
    clock.move_to(start + timedelta(seconds=SESSION_TTL_S + 60))
    assert c.get("/admin/api/state").status_code == 401


def test_without_an_admin_key_there_is_no_admin_page() -> None:
    c = client(admin_key="")
    for path in ("/admin", "/admin/login", "/admin/api/state"):
        resp = c.get(path, headers={"Authorization": f"Bearer {KEY}"})
        assert resp.status_code == 404 and "admin_key" in resp.get_json()["error"]
    assert c.post("/admin/login", data={"key": ""}).status_code == 404


@pytest.mark.parametrize("weak", ["short", "x" * 23, "hansa_0123456789abcdef_" + "a" * 43])
def test_a_weak_admin_key_or_a_client_key_is_refused_at_start(weak: str) -> None:
    with pytest.raises(ConfigError, match="admin_key"):
        create_admin_blueprint(weak, dict)


def test_the_admin_key_comes_from_the_environment_and_is_masked(tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_ADMIN_KEY": KEY,
                           "HANSA_GATEWAY_RECENT_QUERIES": "7"})
    assert cfg.gateway.admin_key == KEY and cfg.gateway.recent_queries == 7
    assert as_dict(cfg)["gateway"]["admin_key"] == "***"
    with pytest.raises(ConfigError, match="recent_queries"):
        load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_RECENT_QUERIES": "-1"})


def test_serve_refuses_a_weak_admin_key_before_any_worker_starts(tmp_path: Path) -> None:
    from hansa.gateway.http.serving import check_serving, server_options

    weak = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_ADMIN_KEY": "short"})
    with pytest.raises(ConfigError, match="admin_key"):
        check_serving(weak, server_options(weak))
    good = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_ADMIN_KEY": KEY})
    check_serving(good, server_options(good))


# -- rendering ------------------------------------------------------------------------------------
def test_every_untrusted_value_is_escaped_and_no_script_may_run() -> None:
    c = client()
    logged_in(c)
    resp = c.get("/admin")
    html = resp.get_data(as_text=True)
    assert "<script" not in html and "<img" not in html and "<b>" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(&#39;site&#39;)&lt;/script&gt;" in html  # the site id, shown as text
    assert "&lt;img src=x onerror=alert(&#39;question&#39;)&gt; what?" in html
    assert "&lt;/pre&gt;&lt;script&gt;" in html  # inside the trace's <pre>
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # hence no script at all
    assert resp.headers["X-Frame-Options"] == "DENY"


def test_the_page_shows_sites_keys_freshness_reachability_reliability_and_queries() -> None:
    c = client()
    logged_in(c)
    html = c.get("/admin").get_data(as_text=True)
    for shown in ("0123456789abcdef0123456789abcdef",  # key id
                  "1h ago", "in 6d 23h",  # publication age, time to expiry
                  "timeout", "0.812", "degraded", "front-end", "route 1.2 ms", "call 10000.0 ms",
                  "An answer &lt;i&gt;from a site&lt;/i&gt;.", "&#34;stages_ms&#34;",
                  "routed 25% of recent questions", "contradicted 3 sites · broadly disputed"):
        assert shown in html, shown


@pytest.mark.parametrize(("seconds", "text"), [(45, "45s"), (60, "1m"), (3725, "1h 2m"), (90000, "1d 1h"),
                                               (-7200, "-2h"), (None, "—")])
def test_durations_read_as_an_operator_reads_them(seconds: Any, text: str) -> None:
    assert duration(seconds) == text


def test_key_ids_are_those_of_the_enrolled_keys() -> None:
    identity = SiteIdentity.generate()
    assert key_id(identity.public_key_b64) == identity.keyid
    assert key_id("not base64!") == "(not an Ed25519 key)"


def test_recent_statuses_are_per_site_newest_first_and_bounded() -> None:
    queries = [{"at": f"t{i}", "query_id": f"q{i}", "calls": [{"site_id": "a", "status": "ok" if i % 2 else "error",
                                                                "latency_ms": i}]} for i in range(5, 0, -1)]
    statuses = recent_statuses(queries, per_site=3)
    assert [s["query_id"] for s in statuses["a"]] == ["q5", "q4", "q3"]
    assert [s["status"] for s in statuses["a"]] == ["ok", "error", "ok"]


# -- the ring of recent queries -------------------------------------------------------------------
def record(i: int, trace: Any = None) -> dict[str, Any]:
    return {"query_id": f"q{i}", "question": f"question {i}", "calls": [], "trace": trace or {"i": i}}


def test_the_ring_keeps_the_newest_records_newest_first() -> None:
    ring = RecentQueries(3)
    for i in range(5):
        ring.add(record(i))
    assert [r["query_id"] for r in ring.newest()] == ["q4", "q3", "q2"]
    assert [r["query_id"] for r in ring.newest(1)] == ["q4"]
    off = RecentQueries(0)
    off.add(record(1))
    assert off.newest() == []


def test_workers_sharing_state_see_each_others_queries(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    one, two = RecentQueries(4, SharedState(path)), RecentQueries(4, SharedState(path))
    one.add(record(1))
    two.add(record(2))
    assert [r["query_id"] for r in one.newest()] == ["q2", "q1"] == [r["query_id"] for r in two.newest()]


def test_an_oversized_trace_is_replaced_by_a_note() -> None:
    ring = RecentQueries(2)
    ring.add(record(1, trace={"blob": "x" * (MAX_RECORD_BYTES + 1)}))
    kept = ring.newest()[0]
    assert kept["question"] == "question 1" and "omitted" in kept["trace"]
    assert len(json.dumps(kept)) < MAX_RECORD_BYTES


def test_login_attempts_from_one_address_are_limited() -> None:
    from hansa.gateway.http.admin_auth import LOGIN_BURST

    c = client()
    for _ in range(LOGIN_BURST):
        assert c.post("/admin/login", data={"key": "guess-guess-guess-guess-guess"}).status_code == 401
    refused = c.post("/admin/login", data={"key": KEY})  # even the right key waits its turn
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert b"Too many attempts" in refused.data and SESSION_COOKIE not in refused.headers.get("Set-Cookie", "")
    assert client().post("/admin/login", data={"key": KEY}).status_code == 303  # a new app: fresh buckets
