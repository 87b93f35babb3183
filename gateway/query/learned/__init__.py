"""RAGRoute's learned router for the gateway (issue 8): site-agnostic features, a numpy logistic
model versioned on disk, an outcome log written by the gateway itself, and the `Router` that ties
them together. A site that joins is routed at once: no feature names a site."""
from hansa.gateway.query.learned.features import FEATURE_NAMES, SiteFeatures, site_features
from hansa.gateway.query.learned.model import RouterModel, fit, load_model
from hansa.gateway.query.learned.outcomes import OutcomeLog
from hansa.gateway.query.learned.router import LearnedRouter, LearnedScore

__all__ = ["FEATURE_NAMES", "LearnedRouter", "LearnedScore", "OutcomeLog", "RouterModel", "SiteFeatures", "fit",
           "load_model", "site_features"]
