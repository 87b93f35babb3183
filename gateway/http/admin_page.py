"""The gateway's read-only admin page, and its JSON twin, behind the admin key.

Routes (a Flask blueprint the HTTP adapter registers; gateway/http/app.py):
  GET  /admin              the page (HTML); without a credential, the login form with a 401
  GET  /admin/login        the login form
  POST /admin/login        form field `key`: a session cookie and a redirect to /admin, or a 401
                           (429 past LOGIN_BURST attempts from one address)
  POST /admin/logout       drops the session cookie
  GET  /admin/api/state    the document the page is rendered from (gateway.http.admin_state), as JSON;
                           `Authorization: Bearer <admin key>` or the session cookie

Why server-rendered HTML with no script and no external asset: the page must work where the
gateway runs (no CDN), and everything it shows — site ids, URLs, questions, answers, traces — comes
from sites and clients, so it is untrusted. Jinja autoescapes every value in these .html templates,
and the Content-Security-Policy forbids scripts, frames and any other origin, so even a value the
escaping missed could not run. Without `[gateway] admin_key` the routes answer 404.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from flask import Blueprint, Response, make_response, redirect, render_template, request, url_for

from hansa.core.errors import HansaError, NotFoundError
from hansa.core.jsonsafe import dumps
from hansa.gateway.http.admin_auth import (LOGIN_BURST, LOGIN_REFILL_PER_S, SESSION_COOKIE, SESSION_TTL_S, AdminKey,
                                      AdminUnauthenticated)
from hansa.gateway.trust.ratelimit import RateLimited, TokenBucketLimiter
from hansa.gateway.trust.registry import Clock, utc_now

# No script may run and nothing may load from elsewhere; the one inline <style> is the page's only style.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def duration(seconds: Any) -> str:
    """A span in seconds as an operator reads it: "3d 4h", "12m", "45s"."""
    if not isinstance(seconds, (int, float)):
        return "—"
    s = int(abs(seconds))
    sign = "-" if seconds < 0 else ""
    for unit, size, sub_unit, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            rest = (s % size) // sub_size
            return f"{sign}{s // size}{unit}" + (f" {rest}{sub_unit}" if rest else "")
    return f"{sign}{s}s"


def pretty(value: Any) -> str:
    """Indented JSON for the trace's <pre>; Jinja escapes the text it returns."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _refusal(exc: HansaError) -> Response:
    """The JSON error every gateway route answers with ({"error", "kind"}), made here so the
    blueprint needs no handler of the app's to refuse correctly."""
    resp = Response(dumps({"error": str(exc), "kind": type(exc).__name__}), status=exc.http_status,
                    mimetype="application/json")
    resp.headers.update(getattr(exc, "http_headers", {}))
    return resp


def create_admin_blueprint(admin_key: str, state: Callable[[], dict[str, Any]],
                           login_limits: TokenBucketLimiter | None = None, clock: Clock = utc_now) -> Blueprint:
    """The admin routes. `admin_key`: `[gateway] admin_key` ("" turns the page off); `state`:
    builds the admin document (gateway.http.admin_state.admin_state over the service); `login_limits`:
    the login attempts' buckets (default: this process's, LOGIN_BURST per client address); `clock`:
    what sessions are dated and aged by."""
    key = AdminKey(admin_key, clock) if admin_key else None
    limits = login_limits or TokenBucketLimiter("admin-login", LOGIN_BURST, LOGIN_REFILL_PER_S)
    admin = Blueprint("admin", __name__, template_folder="templates")

    @admin.before_request
    def _enabled() -> Response | None:
        if key is None:
            return _refusal(NotFoundError("the admin page is off: set [gateway] admin_key (HANSA_GATEWAY_ADMIN_KEY)"))
        return None

    @admin.after_request
    def _hardened(resp: Response) -> Response:
        resp.headers.update(SECURITY_HEADERS)
        return resp

    def authenticated() -> bool:
        assert key is not None
        return key.bearer_matches(request.headers.get("Authorization")) or \
            key.session_valid(request.cookies.get(SESSION_COOKIE))

    def login_form(error: str | None, status: int, headers: dict[str, str] | None = None) -> Response:
        resp = make_response(render_template("admin_login.html", error=error), status)
        if status == 401:
            resp.headers["WWW-Authenticate"] = AdminUnauthenticated.http_headers["WWW-Authenticate"]
        resp.headers.update(headers or {})
        return resp

    @admin.get("/admin")
    def page() -> Response:
        if not authenticated():
            return login_form(None, 401)
        return make_response(render_template("admin.html", state=state(), duration=duration, pretty=pretty))

    @admin.get("/admin/login")
    def login_page() -> Response:
        return login_form(None, 200)

    @admin.post("/admin/login")
    def login() -> Response:
        assert key is not None
        try:
            limits.charge(request.remote_addr or "unknown", 1)
        except RateLimited as exc:
            return login_form(f"Too many attempts: try again in {exc.retry_after} s.", 429, exc.http_headers)
        if not key.matches(request.form.get("key")):
            return login_form("That is not the admin key.", 401)
        resp = redirect(url_for("admin.page"), code=303)
        resp.set_cookie(SESSION_COOKIE, key.new_session(), max_age=SESSION_TTL_S, path="/admin",
                        secure=request.is_secure, httponly=True, samesite="Strict")
        return resp

    @admin.post("/admin/logout")
    def logout() -> Response:
        resp = redirect(url_for("admin.login_page"), code=303)
        resp.delete_cookie(SESSION_COOKIE, path="/admin", secure=request.is_secure, httponly=True, samesite="Strict")
        return resp

    @admin.get("/admin/api/state")
    def state_json() -> Response:
        if not authenticated():
            return _refusal(AdminUnauthenticated(
                "the admin API needs `Authorization: Bearer <admin key>` or an admin session"))
        return Response(dumps(state()), mimetype="application/json")

    return admin
