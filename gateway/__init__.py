"""The federation side: site registry, summary index, routing, parallel site calls, fusion, API.

The gateway never holds raw text: it keeps signed summary embeddings and asks sites to answer.

Its rooms, lowest first (each sub-package's docstring says what lives there and what it may import;
tests/test_import_walls.py holds the walls and finds no cycle between them):

    index/   the routing index: published summaries, in memory and durable
    trust/   who the gateway believes and what each may do: signed federation documents, the
             registry, publication floors, API keys, rate limits
    query/   the query pipeline: route, gate, call, assess, refine, fuse, synthesize
    http/    the HTTP surface: Flask adapters over `Gateway`, the admin page, `gateway serve`

Left at this level, because no one room owns them:

- service.py: `Gateway`, the composition root. It wires every room below http/, and every caller
  (HTTP, the command line, evaluation, the in-process federation, tests) holds it; in a room it would
  be imported from below by nothing and from above by all, which is what this level is.
- metrics.py, recent_queries.py: what the service records of what it serves (written by
  `Gateway.query`/`publish`, shown by http/).
- client.py (with the query id every call carries), transport.py: the site transport port, how
  the gateway reaches sites. The query pipeline calls through it, the composition root picks its
  implementation, and evaluation and the in-process federation use it on their own; it imports
  no room.
"""
