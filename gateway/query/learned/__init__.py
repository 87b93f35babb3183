"""RAGRoute's learned router for the gateway (issue 8): site-agnostic features, a numpy logistic
model versioned on disk, an outcome log written by the gateway itself, and the `Router` that ties
them together. A site that joins is routed at once: no feature names a site."""
