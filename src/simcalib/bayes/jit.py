"""Compiled forward solves: the model's ODE (and its sensitivity system) as machine code.

Why: for the nonlinear settings (FitzHugh-Nagumo, SIRV, a user's epidemic model) the
sampler spends most of its time in scipy's LSODA calling the Python right-hand side a
few hundred times per solve (~5 us a call): FitzHugh-Nagumo with sensitivities took
~3 ms a solve, an MCMC iteration of two MOS chains ~8 ms.  Batching lanes in numpy
does not help (measured: a lane-batched Dormand-Prince in numpy was no faster than
LSODA per lane, because one stiff lane sets every lane's step).  Here the right-hand
side that :mod:`simcalib.bayes.ode` already derives symbolically (states and
sensitivities, common subexpressions shared) is printed as Python source and compiled
with numba together with an adaptive Dormand-Prince 5(4) integrator; every lane keeps
its own step-size control and all lanes are solved in one call.

The generated module is written to a cache directory keyed by the hash of its source
(``SIMCALIB_JIT_CACHE``, default ``~/.cache/simcalib/jit``), so numba's on-disk cache
makes every later process load the machine code instead of compiling it again.

A lane the explicit integrator cannot finish (more than ``mxstep`` steps: a stiff
problem; a step size that underflows; non-finite values) is reported as failed, and
:class:`simcalib.bayes.ode.ODEModel` solves it again with LSODA, so the compiled path
can cost time on a stiff user model but never correctness.  Without numba installed
everything falls back to LSODA.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

# numba is a dependency, but a missing install must not break sampling; looked up
# without importing it (0.3 s), which only the first compile pays.  A broken install
# or a right-hand side numba cannot compile is caught where the solver is built
# (ODEModel.compiled falls back to LSODA).
HAVE_NUMBA = importlib.util.find_spec("numba") is not None

_MODULES: dict[str, Any] = {}

# Dormand-Prince 5(4) tableau (Hairer, Norsett & Wanner; scipy's RK45)
_INTEGRATOR = '''
@njit(cache=True, error_model="numpy")
def _integrate(theta, x0, t0, tout, rtol, atol, mxstep, out, status):
    """Every lane from x0[l] at t0 to the times tout (increasing, >= t0)."""
    n_lane, dim = x0.shape
    n_out = tout.shape[0]
    k1 = np.empty(dim); k2 = np.empty(dim); k3 = np.empty(dim); k4 = np.empty(dim)
    k5 = np.empty(dim); k6 = np.empty(dim); k7 = np.empty(dim)
    x = np.empty(dim); xs = np.empty(dim); xn = np.empty(dim)
    for lane in range(n_lane):
        th = theta[lane]
        for i in range(dim):
            x[i] = x0[lane, i]
        t = t0
        status[lane] = 0
        steps = 0
        rhs(t, x, th, k1)
        # initial step (Hairer's heuristic)
        d0 = 0.0
        d1 = 0.0
        for i in range(dim):
            sc = atol + rtol * abs(x[i])
            d0 += (x[i] / sc) ** 2
            d1 += (k1[i] / sc) ** 2
        d0 = math.sqrt(d0 / dim)
        d1 = math.sqrt(d1 / dim)
        span = tout[n_out - 1] - t0
        if d0 < 1e-5 or d1 < 1e-5:
            h = 1e-6
        else:
            h = 0.01 * d0 / d1
        if span > 0.0:
            h = min(h, span)
        else:
            h = 1e-6
        bad = False
        for j in range(n_out):
            te = tout[j]
            while te - t > 1e-13 * max(1.0, abs(te)):
                hh = min(h, te - t)
                if hh < 1e-14 * max(1.0, abs(t)):
                    bad = True
                    break
                for i in range(dim):
                    xs[i] = x[i] + hh * (0.2 * k1[i])
                rhs(t + 0.2 * hh, xs, th, k2)
                for i in range(dim):
                    xs[i] = x[i] + hh * (3.0 / 40.0 * k1[i] + 9.0 / 40.0 * k2[i])
                rhs(t + 0.3 * hh, xs, th, k3)
                for i in range(dim):
                    xs[i] = x[i] + hh * (44.0 / 45.0 * k1[i] - 56.0 / 15.0 * k2[i]
                                         + 32.0 / 9.0 * k3[i])
                rhs(t + 0.8 * hh, xs, th, k4)
                for i in range(dim):
                    xs[i] = x[i] + hh * (19372.0 / 6561.0 * k1[i] - 25360.0 / 2187.0 * k2[i]
                                         + 64448.0 / 6561.0 * k3[i] - 212.0 / 729.0 * k4[i])
                rhs(t + 8.0 / 9.0 * hh, xs, th, k5)
                for i in range(dim):
                    xs[i] = x[i] + hh * (9017.0 / 3168.0 * k1[i] - 355.0 / 33.0 * k2[i]
                                         + 46732.0 / 5247.0 * k3[i] + 49.0 / 176.0 * k4[i]
                                         - 5103.0 / 18656.0 * k5[i])
                rhs(t + hh, xs, th, k6)
                for i in range(dim):
                    xn[i] = x[i] + hh * (35.0 / 384.0 * k1[i] + 500.0 / 1113.0 * k3[i]
                                         + 125.0 / 192.0 * k4[i] - 2187.0 / 6784.0 * k5[i]
                                         + 11.0 / 84.0 * k6[i])
                rhs(t + hh, xn, th, k7)
                err = 0.0
                for i in range(dim):
                    e = hh * (71.0 / 57600.0 * k1[i] - 71.0 / 16695.0 * k3[i]
                              + 71.0 / 1920.0 * k4[i] - 17253.0 / 339200.0 * k5[i]
                              + 22.0 / 525.0 * k6[i] - 1.0 / 40.0 * k7[i])
                    sc = atol + rtol * max(abs(x[i]), abs(xn[i]))
                    err += (e / sc) ** 2
                err = math.sqrt(err / dim)
                if not (err == err) or err > 1e300:     # NaN or overflow: shrink hard
                    h = hh * 0.1
                    steps += 1
                    if steps > mxstep:
                        bad = True
                        break
                    continue
                steps += 1
                if err <= 1.0:
                    t = t + hh
                    for i in range(dim):
                        x[i] = xn[i]
                        k1[i] = k7[i]
                    fac = 5.0 if err == 0.0 else min(5.0, 0.9 * err ** -0.2)
                    if hh == h:
                        h = h * fac
                    elif fac < 1.0:
                        h = hh * fac
                else:
                    h = hh * max(0.2, 0.9 * err ** -0.2)
                if steps > mxstep:
                    bad = True
                    break
            if bad:
                break
            for i in range(dim):
                out[lane, j, i] = x[i]
        if bad:
            status[lane] = 1
        else:
            for j in range(n_out):
                for i in range(dim):
                    v = out[lane, j, i]
                    if not (abs(v) < 1e300):
                        status[lane] = 2
'''


def _rhs_source(t: Any, xs: list[Any], th: list[Any], exprs: list[Any]) -> str:
    """``rhs(t, x, th, out)`` writing ``out[i] = exprs[i]`` (numba-compilable source)."""
    import sympy as sp
    from sympy.printing.pycode import PythonCodePrinter

    names = {s: sp.Symbol(f"x_{i}") for i, s in enumerate(xs)}
    names.update({s: sp.Symbol(f"p_{k}") for k, s in enumerate(th)})
    names[t] = sp.Symbol("t_")
    exprs = [sp.sympify(e).xreplace(names) for e in exprs]
    subs, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("c_"))
    pr = PythonCodePrinter({"fully_qualified_modules": True})
    lines = ['@njit(cache=True, error_model="numpy")', "def rhs(t_, x, th, out):"]
    lines += [f"    x_{i} = x[{i}]" for i in range(len(xs))]
    lines += [f"    p_{k} = th[{k}]" for k in range(len(th))]
    lines += [f"    {lhs} = {pr.doprint(rhs)}" for lhs, rhs in subs]
    lines += [f"    out[{i}] = {pr.doprint(e)}" for i, e in enumerate(reduced)]
    return "\n".join(lines) + "\n"


def cache_dir() -> Path:
    d = os.environ.get("SIMCALIB_JIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "simcalib", "jit")
    return Path(d)


def compile_rhs(t: Any, xs: list[Any], th: list[Any], exprs: list[Any]) -> Any:
    """The compiled ``_integrate`` for one right-hand side (from cache when possible)."""
    src = ("import math\nimport numpy as np\nfrom numba import njit\n\n"
           + _rhs_source(t, xs, th, exprs) + _INTEGRATOR)
    key = hashlib.sha256(src.encode()).hexdigest()[:20]
    if key in _MODULES:
        return _MODULES[key]._integrate
    path = cache_dir() / f"simcalib_ode_{key}.py"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != src:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(src)
            os.replace(tmp, path)
    except OSError:  # read-only home: compile in memory (no disk cache)
        import tempfile

        path = Path(tempfile.mkdtemp()) / f"simcalib_ode_{key}.py"
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"simcalib_ode_{key}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    _MODULES[key] = mod
    return mod._integrate


class CompiledSolver:
    """States (and sensitivities) of one model for a stack of parameter vectors."""

    def __init__(self, integrate: Any, dim: int) -> None:
        self.integrate, self.dim = integrate, dim

    def __call__(self, theta: np.ndarray, x0: np.ndarray, t0: float, tout: np.ndarray,
                 rtol: float, atol: float, mxstep: int) -> tuple[np.ndarray, np.ndarray]:
        """``(out[lane, time, component], ok[lane])``."""
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        x0 = np.ascontiguousarray(x0, dtype=np.float64)
        n_lane = theta.shape[0]
        out = np.empty((n_lane, len(tout), self.dim))
        status = np.zeros(n_lane, dtype=np.int64)
        self.integrate(theta, x0, float(t0), np.ascontiguousarray(tout, dtype=np.float64),
                       float(rtol), float(atol), int(mxstep), out, status)
        return out, status == 0
