"""What the process has used of the machine, for reports an admin sizes machines by.

Why getrusage and not psutil: the peak resident set is kept by the kernel for the process's whole
life (a sampled reading misses short peaks), and the standard library reads it.
"""
from __future__ import annotations

import resource
import sys


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)
