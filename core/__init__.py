"""Pieces every side of hansa shares: configuration, logging, errors, strict JSON."""
