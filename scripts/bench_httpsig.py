"""hansa's hand-written RFC 9421 signatures and RFC 8941 parser against the libraries, side by side.

Why: docs/decisions/0001-http-message-signatures.md decides between hansa's own code
(sync/httpsig.py, sync/sfv.py) and `http-message-signatures` / `http-sf` / `http-sfv`; speed is one
of its inputs. Every gateway -> site retrieve call is signed by the gateway and verified by the
site, and every answer is signed by the site and verified by the gateway, so the cost that matters
is sign + verify of one typical retrieve request and one response.

Variants, interleaved round by round in one process (`--rounds` rounds of `--calls` calls each; the
median round is reported):

- `request:hansa`: `sign_request` + `verify_request` (Content-Digest, Signature-Input, Signature;
  verification includes the nonce cache, lifetime and coverage checks).
- `request:http_message_signatures`: `HTTPMessageSigner.sign(body=...)` +
  `HTTPMessageVerifier.verify(require_components=..., body=...)` over the same components and
  parameters (no nonce cache: the library leaves replay detection to its caller).
- `response:hansa` / `response:http_message_signatures`: the site's answer, bound to the request's
  signature by `"signature";req;key="hansa"`, signed and verified.
- `crypto_floor`: Ed25519 sign + verify of a signature base of the same size (OpenSSL via
  `cryptography`): what neither implementation can go below.
- `parse:<parser>`: parsing the request's `Signature-Input` header, hansa vs `http-sf` vs `http-sfv`.

    nice python scripts/bench_httpsig.py [--smoke] [--out benchmarks/httpsig.json]
"""
from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)

URL = "https://site-a.example:8443/v1/retrieve"
BODY = (b'{"question": "Which agency publishes the flood-risk maps the county uses, and how often are they '
        b'revised?", "k": 8, "deadline_ms": 2000, "query_id": "q-7f3a9c", "conversation": []}')
ANSWER = b'{"passages": [' + b", ".join(
    b'{"id": "doc-%d#%d", "score": 0.8%d, "text": "' % (i, i * 7, i) + b"x" * 600 + b'"}' for i in range(8)) + b"]}"
REQUEST_HEADERS = {"Content-Type": "application/json", "Hansa-Site": "site-a", "X-Hansa-Query-Id": "q-7f3a9c"}
RESPONSE_HEADERS = {"Content-Type": "application/json"}


def _median_rate(samples_s: list[float], calls: int) -> float:
    return benchlib.rate(calls, statistics.median(samples_s))


def build_variants() -> tuple[dict[str, Callable[[], Any]], dict[str, Any], list[str]]:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from hansa.sync import httpsig, sfv
    from hansa.sync.keys import SiteIdentity

    gateway, site = SiteIdentity.generate(), SiteIdentity.generate()
    components = httpsig.RETRIEVE_TRACED_COMPONENTS
    gateway_keys, site_keys = httpsig.keyring([gateway.public_key]), httpsig.keyring([site.public_key])
    nonces = httpsig.NonceCache(capacity=10_000_000)
    notes: list[str] = []

    def hansa_request() -> dict[str, str]:
        signed = httpsig.sign_request(gateway, "POST", URL, REQUEST_HEADERS, BODY, components=components)
        headers = {**REQUEST_HEADERS, **signed}
        httpsig.verify_request("POST", URL, headers, BODY, gateway_keys, nonces, required=components)
        return headers

    sample_request = hansa_request()
    request_message = httpsig.HttpMessage.request("POST", URL, sample_request)

    def hansa_response() -> None:
        signed = httpsig.sign_response(site, 200, RESPONSE_HEADERS, ANSWER, request_message)
        httpsig.verify_response(200, {**RESPONSE_HEADERS, **signed}, ANSWER, site_keys, request_message)

    base = httpsig.signature_base(
        sfv.parse_dictionary(sample_request["Signature-Input"])["hansa"].items,  # type: ignore[union-attr]
        sfv.parse_dictionary(sample_request["Signature-Input"])["hansa"].params,  # type: ignore[union-attr]
        request_message)
    floor_key = Ed25519PrivateKey.generate()
    floor_public = floor_key.public_key()

    def crypto_floor() -> None:
        floor_public.verify(floor_key.sign(base), base)

    signature_input = sample_request["Signature-Input"]
    variants: dict[str, Callable[[], Any]] = {
        "request:hansa": hansa_request,
        "response:hansa": hansa_response,
        "crypto_floor": crypto_floor,
        "parse:hansa": lambda: sfv.parse_dictionary(signature_input, "Signature-Input"),
    }
    facts: dict[str, Any] = {"request_body_bytes": len(BODY), "response_body_bytes": len(ANSWER),
                             "signature_base_bytes": len(base), "signature_input": signature_input,
                             "components": list(components)}

    try:
        import http_message_signatures as hms
        from http_message_signatures import algorithms
    except ImportError as exc:  # the `test` extra installs it
        notes.append(f"http-message-signatures not installed ({exc}): its variants were skipped")
    else:
        class Keys(hms.HTTPSignatureKeyResolver):
            def __init__(self, *identities: SiteIdentity) -> None:
                self.identities = {i.keyid: i for i in identities}

            def resolve_public_key(self, key_id: str) -> Any:
                return self.identities[key_id].public_key

            def resolve_private_key(self, key_id: str) -> Any:
                return self.identities[key_id]._private_key

        class Req:
            def __init__(self, headers: dict[str, str]) -> None:
                self.method, self.url, self.headers = "POST", URL, headers

        class Resp:
            def __init__(self, headers: dict[str, str], request: Req) -> None:
                self.status_code, self.headers, self.request = 200, headers, request

        keys = Keys(gateway, site)
        signer = hms.HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=keys)
        verifier = hms.HTTPMessageVerifier(signature_algorithm=algorithms.ED25519, key_resolver=keys)
        covered = [c for c in components if c != "content-digest"]  # body=... adds content-digest
        response_covered = ("@status", "content-type", '"signature";req;key="hansa"')

        def library_request() -> Req:
            now = dt.datetime.now(dt.timezone.utc)
            request = Req(dict(REQUEST_HEADERS))
            signer.sign(request, key_id=gateway.keyid, created=now, expires=now + dt.timedelta(seconds=30),
                        nonce=httpsig.new_nonce(), label="hansa", body=BODY, covered_component_ids=covered)
            verifier.verify(request, max_age=dt.timedelta(seconds=60), require_components=components, body=BODY)
            return request

        library_request()
        sample_library = Req(dict(sample_request))

        def library_response() -> None:
            now = dt.datetime.now(dt.timezone.utc)
            response = Resp(dict(RESPONSE_HEADERS), sample_library)
            signer.sign(response, key_id=site.keyid, created=now, expires=now + dt.timedelta(seconds=30),
                        label="hansa", body=ANSWER, covered_component_ids=response_covered)
            verifier.verify(response, max_age=dt.timedelta(seconds=60),
                            require_components=("content-digest", *response_covered), body=ANSWER)

        variants["request:http_message_signatures"] = library_request
        variants["response:http_message_signatures"] = library_response

    try:
        import http_sf
    except ImportError as exc:
        notes.append(f"http-sf not installed ({exc}): parse:http_sf skipped")
    else:
        raw = signature_input.encode("ascii")
        variants["parse:http_sf"] = lambda: http_sf.parse(raw, tltype="dictionary")
    try:
        import http_sfv
    except ImportError as exc:
        notes.append(f"http-sfv not installed ({exc}): parse:http_sfv skipped")
    else:
        raw_sfv = signature_input.encode("ascii")

        def parse_sfv() -> Any:
            d = http_sfv.Dictionary()
            d.parse(raw_sfv)
            return d

        variants["parse:http_sfv"] = parse_sfv
    return variants, facts, notes


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("httpsig", __doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per variant (default 7; smoke 2)")
    p.add_argument("--calls", type=int, default=None, help="calls per round (default 400; smoke 20)")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    rounds = args.rounds or (2 if args.smoke else 7)
    calls = args.calls or (20 if args.smoke else 400)
    report = benchlib.Report("httpsig", args.smoke,
                             libraries=("cryptography", "http-message-signatures", "http-sf", "http-sfv"))
    variants, facts, notes = build_variants()
    report.params = {"rounds": rounds, "calls_per_round": calls, "target_uri": URL, **facts}
    for note in notes:
        report.note(note)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for name, call in variants.items():  # warm-up: imports, caches
        for _ in range(3):
            call()
    for r in range(rounds):
        benchlib.progress(f"round {r + 1}/{rounds}")
        for name, call in variants.items():
            start = time.perf_counter()
            for _ in range(calls):
                call()
            samples[name].append(time.perf_counter() - start)
    results: dict[str, Any] = {}
    for name, secs in samples.items():
        per_s = _median_rate(secs, calls)
        results[name] = {"per_s": per_s, "us_per_call": round(1e6 / per_s, 2) if per_s else None,
                         "round_rates": [benchlib.rate(calls, s) for s in secs]}
    report.results["variants"] = results

    def rate(name: str) -> float | None:
        return results[name]["per_s"] if name in results else None

    for kind in ("request", "response"):
        report.ratios[f"{kind}:hansa_vs_library"] = benchlib.ratio(rate(f"{kind}:hansa"),
                                                                     rate(f"{kind}:http_message_signatures"))
        report.ratios[f"{kind}:hansa_vs_crypto_floor"] = benchlib.ratio(rate(f"{kind}:hansa"), rate("crypto_floor"))
    report.ratios["parse:hansa_vs_http_sf"] = benchlib.ratio(rate("parse:hansa"), rate("parse:http_sf"))
    report.ratios["parse:hansa_vs_http_sfv"] = benchlib.ratio(rate("parse:hansa"), rate("parse:http_sfv"))
    report.note("per_s: sign + verify pairs (or parses) per second on one core, the median of the interleaved rounds; "
                "request:hansa also records each nonce in its replay cache, which the library leaves to its caller")
    if args.smoke:
        report.note("smoke run: too few calls to compare speeds")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
