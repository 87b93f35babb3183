"""The federation side: site registry, summary index, routing, parallel site calls, fusion, API.

The gateway never holds raw text: it keeps signed summary embeddings and asks sites to answer."""
