"""Limit BLAS threads to one for the sampler's many small matrices.

The sampler does thousands of 20x20 .. 100x100 factorisations per second; a
multi-threaded OpenBLAS spends far longer synchronising threads than computing
(measured: scipy's expm of a 20x20 matrix took 16 ms with the default threads and
0.1 ms with one).  Snakemake gives each chain job one core anyway.  numpy and scipy
may each bundle their own OpenBLAS; threadpoolctl finds and limits every loaded
copy (and MKL or BLIS where those are used), portably.
"""

from __future__ import annotations

import logging

from threadpoolctl import threadpool_info, threadpool_limits

log = logging.getLogger(__name__)


def limit_blas_threads(n: int = 1) -> int:
    """Set every loaded BLAS library to ``n`` threads for the rest of the process;
    returns how many libraries were limited."""
    threadpool_limits(limits=n, user_api="blas")
    libs = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    log.debug("BLAS threads limited to %d in %d libraries", n, len(libs))
    return len(libs)
