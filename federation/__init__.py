"""A whole federation in one process: the composition root that builds N real sites and a gateway,
each served over loopback HTTP (`local.LocalFederation`).

Why a room of its own: it is the one place that wires the site adapter (`plugin`) and the gateway
together, so it sits above both and below its users (`hansa demo`, `hansa eval`, scripts, tests).
It imports plugin, gateway, sync, adapters and core; never cli or evaluation (what those need from
a build, e.g. the site cache or a progress callback, is passed in).
"""
