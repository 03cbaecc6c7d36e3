"""Limit BLAS threads to one for the sampler's many small matrices.

The sampler does thousands of 20x20 .. 100x100 factorisations per second; a
multi-threaded OpenBLAS spends far longer synchronising threads than computing
(measured: scipy's expm of a 20x20 matrix took 16 ms with the default threads and
0.1 ms with one).  Snakemake gives each chain job one core anyway.  numpy and scipy
may each bundle their own OpenBLAS, so every loaded copy is limited, via ctypes,
without needing threadpoolctl.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

_SYMBOLS = ("openblas_set_num_threads", "openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads")


def _loaded_openblas() -> list[str]:
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower()}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)


def limit_blas_threads(n: int = 1) -> int:
    """Set every loaded OpenBLAS to ``n`` threads; returns how many libraries were set."""
    import numpy  # noqa: F401  - make sure numpy's BLAS is loaded
    import scipy.linalg  # noqa: F401

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    count = 0
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in _SYMBOLS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                count += 1
                break
    log.debug("limited %d OpenBLAS copies to %d thread(s)", count, n)
    return count
