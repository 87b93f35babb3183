"""`hansa query`: ask the federation's gateway a question over HTTP, as any client would.

Why a client here and not a call into the Gateway service: a user's machine holds an API key and
a URL, not the gateway's stores; this command must see what a real client sees (401, 429, 502, a
gateway that is down) and say what to do about each. The request is built with the gateway's own
`QueryRequest`, so a bad option is refused here with the gateway's message before anything is sent.
"""
from __future__ import annotations

from typing import Any, Mapping

import click

from hansa.cli.context import root_config
from hansa.cli.options import gateway_option, json_option, print_json
from hansa.core.config import Config
from hansa.core.errors import HansaError

QUERY_PATH = "/v1/query"
API_KEY_HELP = "create one with `hansa gateway api-key create NAME` on the gateway"


def resolve_gateway_url(cfg: Config, given: str | None) -> str:
    """--gateway, else [client] gateway_url, else [site] gateway_url, else this machine's gateway."""
    url = given or cfg.client.gateway_url or cfg.site.gateway_url or f"http://{cfg.gateway.host}:{cfg.gateway.port}"
    return url.rstrip("/")


def _error_text(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return (resp.text or resp.reason or "").strip()[:300]
    return str(body.get("error", body)) if isinstance(body, dict) else str(body)[:300]


def refusal(resp: Any, url: str) -> str:
    """One line per HTTP refusal: what the gateway said and what to do about it."""
    said = _error_text(resp)
    status = resp.status_code
    if status == 401:
        return (f"the gateway at {url} did not accept the API key (401: {said}): give --api-key or set "
                f"HANSA_CLIENT_API_KEY / [client] api_key; {API_KEY_HELP}")
    if status == 403:
        return (f"the gateway at {url} refused this query (403: {said}): the API key was revoked, or it may "
                "not name that --origin")
    if status == 429:
        retry = resp.headers.get("Retry-After")
        return (f"the gateway at {url} rate-limited this API key (429: {said})"
                + (f"; retry in {retry} s" if retry else "; retry later") + ", or ask fewer sites (--budget-sites)")
    if status == 502:
        return f"every site the gateway called failed (502: {said}); the per-site detail follows"
    if status == 404:
        return f"{said} (404: check --origin / --site against `hansa gateway sites`, and --gateway)"
    return f"the gateway at {url} answered {status}: {said}"


def ask(url: str, api_key: str, body: Mapping[str, Any], timeout_s: float) -> Any:
    """POST the query; a connection failure becomes a ClickException naming the URL."""
    import requests

    try:
        return requests.post(url + QUERY_PATH, json=dict(body), timeout=timeout_s,
                             headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    except requests.Timeout as exc:
        raise click.ClickException(f"the gateway at {url} did not answer within {timeout_s:g} s (--timeout)") from exc
    except requests.RequestException as exc:
        raise click.ClickException(
            f"cannot reach the gateway at {url} ({type(exc).__name__}): is `hansa gateway serve` running there? "
            "Check --gateway (or [client] gateway_url / HANSA_CLIENT_GATEWAY_URL)") from exc


def citation_line(c: Mapping[str, Any]) -> str:
    """`[n] Title, page p — source (site)`: what a reader needs to find the passage."""
    page = f", page {c['page']}" if c.get("page") else ""
    title = c.get("title") or c.get("doc_id")
    source = c.get("source") or (c.get("doc_id") if c.get("doc_id") != title else None)
    where = f" — {source}" if source else ""
    return f"[{c.get('n', '?')}] {title}{page}{where} (site {c.get('site_id', '?')})"


def conflict_line(c: Mapping[str, Any]) -> str:
    """`conflict on <subject> <predicate>: v1 (sites), v2 (sites); kept v1 (why)`."""
    claim = c.get("claim") or {}
    sides = "; ".join(f"{s.get('value')} ({', '.join(s.get('sites', []))})" for s in c.get("sides") or [])
    return (f"conflict on {claim.get('subject', '?')} {claim.get('predicate', '')}: {sides}; "
            f"kept {c.get('winner')} ({c.get('reason', '')})")


def sites_lines(sites: Mapping[str, Any]) -> list[str]:
    lines = [f"sites: {sites.get('successful', 0)} of {sites.get('total', 0)} answered, {sites.get('failed', 0)} failed, "
             f"{sites.get('timed_out', 0)} timed out, {sites.get('skipped', 0)} skipped"
             + (" (partial answer)" if sites.get("partial") else "")]
    for d in sites.get("details", []):
        error = f": {d['error']}" if d.get("error") else ""
        lines.append(f"  {d.get('site_id')}: {d.get('status')} in {d.get('latency_ms')} ms{error}")
    return lines


def render(answer: Mapping[str, Any]) -> str:
    """The answer, the citations it uses (numbered as its [n] markers), conflicts and the sites."""
    lines = [str(answer.get("answer", "")).strip() or "(no answer)"]
    citations = answer.get("citations") or []
    used = [c for c in citations if c.get("used")] or citations
    if used:
        lines.append("")
        lines.extend(citation_line(c) for c in used)
    lines.extend(conflict_line(c) for c in answer.get("conflicts") or [])
    if answer.get("sites"):
        lines.append("")
        lines.extend(sites_lines(answer["sites"]))
    return "\n".join(lines)


def build_request(question: str, conversation: tuple[str, ...], origin: str | None, sites: tuple[str, ...],
                  top_k_sites: int | None, top_k: int | None, budget: Mapping[str, int | None]) -> dict[str, Any]:
    """The request body, validated by the gateway's own QueryRequest (its message on a bad value)."""
    from hansa.gateway.query.request import Budget, QueryRequest

    try:
        request = QueryRequest(question=question, conversation=conversation, origin=origin,
                               budget=Budget(**{k: v for k, v in budget.items() if v is not None}),
                               top_k_sites=top_k_sites, top_k=top_k, sites=sites or None)
    except HansaError as exc:
        raise click.BadParameter(str(exc)) from exc
    return request.to_json()


@click.command("query")
@click.argument("question")
@gateway_option("Gateway base URL (default: [client] gateway_url, then [site] gateway_url, then http://[gateway] host:port).")
@click.option("--api-key", default=None, metavar="KEY",
              help="The client's API key (default: [client] api_key, better HANSA_CLIENT_API_KEY).")
@click.option("--origin", default=None, metavar="SITE_ID", help="The user's own site: asked first; the gate decides whether to escalate.")
@click.option("--site", "sites", multiple=True, metavar="SITE_ID", help="Ask exactly this site instead of routing (repeat).")
@click.option("--conversation", multiple=True, metavar="TURN", help="An earlier user turn, oldest first (repeat).")
@click.option("--top-k-sites", type=int, default=None, help="At most this many routed sites (default: the gateway's).")
@click.option("--top-k", type=int, default=None, help="Evidence items per site (default: each site's).")
@click.option("--budget-time-ms", type=int, default=None, help="Budget: the whole query's wall time in ms.")
@click.option("--budget-sites", type=int, default=None, help="Budget: at most this many sites called.")
@click.option("--budget-bytes", type=int, default=None, help="Budget: request+response bytes exchanged with sites.")
@click.option("--budget-tokens", type=int, default=None, help="Budget: LLM tokens.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds to wait for the gateway (default: [client] timeout_s, 120).")
@json_option("Print the gateway's raw JSON response (also for a 502 or another refusal).")
@click.pass_context
def query(ctx: click.Context, question: str, gateway_url: str | None, api_key: str | None, origin: str | None,
          sites: tuple[str, ...], conversation: tuple[str, ...], top_k_sites: int | None, top_k: int | None,
          budget_time_ms: int | None, budget_sites: int | None, budget_bytes: int | None,
          budget_tokens: int | None, timeout: float | None, as_json: bool) -> None:
    """Ask the federation QUESTION through its gateway (POST /v1/query) and print the answer with
    numbered citations (title, page, source, site) and what each site did.

    Exit code 1 when the gateway refuses (401, 403, 429, ...), every site failed (502) or the
    gateway cannot be reached."""
    cfg: Config = root_config(ctx)  # type: ignore[assignment]
    url = resolve_gateway_url(cfg, gateway_url)
    body = build_request(question, conversation, origin, sites, top_k_sites, top_k,
                         {"time_ms": budget_time_ms, "sites": budget_sites, "bytes": budget_bytes, "tokens": budget_tokens})
    key = api_key or cfg.client.api_key
    if not key:
        raise click.UsageError(f"no API key: give --api-key or set HANSA_CLIENT_API_KEY / [client] api_key ({API_KEY_HELP})")
    resp = ask(url, key, body, timeout or cfg.client.timeout_s)
    try:
        answer = resp.json()
    except ValueError:
        answer = None
    if as_json and answer is not None:
        print_json(answer)
    if resp.status_code != 200:
        if not as_json and resp.status_code == 502 and isinstance(answer, dict) and answer.get("sites"):
            click.echo("\n".join(sites_lines(answer["sites"])), err=True)
        raise click.ClickException(refusal(resp, url))
    if answer is None:
        raise click.ClickException(f"the gateway at {url} answered 200 with a body that is not JSON: is that a hansa gateway?")
    if not as_json:
        click.echo(render(answer))

