"""Measuring a federation: datasets, the fit/report split, metrics, the site cache, the runner and the
report behind `hansa eval`.

Why a package of its own: the query-engine and answer work are judged by these numbers, so the
measuring code must be small, tested modules (one job each) rather than a CLI file; `hansa eval`
(cli/evaluate.py) is a thin click command over `runner.run`.
"""
