"""Who this gateway believes and what each may do. documents.py (the federation's signed root and
registry), state.py (`TrustedState`: the pure rules for what may replace what), registry.py (the
store on disk that keeps what was accepted), admin.py (the federation's private keys and the
documents they sign; the command line and the in-process federation only), publishing.py (each
site's publication floor and set, moved together), apikeys.py (query clients' keys) and ratelimit.py
(token buckets charged to verified identities).

API keys and rate limits live here rather than in http/ because the service applies them, not the
HTTP adapter: `Gateway.query` charges the query buckets and a key's origin allow-list, and
publishing charges each site's publications.

May import the routing index (publishing commits a site's set into it); nothing of query/, http/
or the composition root.
"""
