"""Neuron bounds: interval arithmetic, then optimisation-based bound tightening (OBBT).

The big-M constraints of the MILP take their M's from these bounds, so the bounds
must be *valid* (contain every pre-activation reachable from the feasible box) and
should be *tight* (small M's give a strong LP relaxation; a neuron whose bounds do
not straddle zero needs no binary at all).

* Interval arithmetic propagates the input box layer by layer: exact for the first
  layer on a box, increasingly loose deeper down.
* OBBT solves, for each neuron, min and max of its pre-activation over the LP
  relaxation of the whole network (the "triangle" relaxation of each unstable ReLU,
  equalities for the stable ones) plus the linear domain constraints.  One HiGHS LP
  per round is re-solved with a changed objective (hot-started from the previous
  basis).  With an objective *cutoff* (the warm start's objective) the LP also
  demands Σ w |y - ẑ| <= cutoff and the tunables' ranges are tightened first: the
  bounds then hold for every point at least as good as the incumbent, which is all
  the MILP needs.  A time budget stops it, and so does a count of LPs
  (``obbt.max_lps``, counted across the inputs, layers and rounds of one call: the
  same neuron on any machine, where the time budget stops at a load-dependent one);
  neurons not reached keep their interval bounds, which remain valid, only looser.
  The LPs solved and skipped are logged when either stops it.

LP optima are relaxed outward by a small tolerance before use, so solver round-off
can never cut off a reachable value.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from simcalib.metamodel.milp.highs_threads import new_highs, set_threads
from simcalib.metamodel.milp.problem import OPProblem
from simcalib.metamodel.milp.settings import ObbtSettings

INF = 1e30

log = logging.getLogger(__name__)


@dataclass
class NeuronBounds:
    """``pre[k] = (L, U)`` bounds of layer k's pre-activation; the last entry is the
    output layer (standardised outputs)."""

    pre: list[tuple[np.ndarray, np.ndarray]]
    seconds: float = 0.0
    lp_solves: int = 0
    tightened_layers: int = 0
    complete: bool = True
    #: LPs the round that was stopped would still have solved (2 per neuron or input
    #: not reached), and what stopped it ("max_lps", "time_limit"; None: nothing)
    lp_skipped: int = 0
    stopped_by: str | None = None
    stats: dict[str, int] = field(default_factory=dict)
    x_lo: np.ndarray | None = None  # tunable ranges tightened under an objective cutoff
    x_hi: np.ndarray | None = None

    @property
    def hidden(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.pre[:-1]

    def summary(self) -> dict[str, float | int]:
        act = sum(int((L >= 0).sum()) for L, _ in self.hidden)
        inact = sum(int((U <= 0).sum()) for _, U in self.hidden)
        total = sum(len(L) for L, _ in self.hidden)
        width = float(np.mean(np.concatenate([U - L for L, U in self.hidden]))) \
            if total else 0.0
        return {"neurons": total, "stable_active": act, "stable_inactive": inact,
                "unstable": total - act - inact, "mean_width": width,
                "lp_solves": self.lp_solves, "lp_skipped": self.lp_skipped,
                "seconds": round(self.seconds, 4), "complete": self.complete}


def _affine_interval(W: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    Wp, Wn = np.maximum(W, 0.0), np.minimum(W, 0.0)
    return Wp @ lo + Wn @ hi + b, Wp @ hi + Wn @ lo + b


def interval_bounds(problem: OPProblem, lo: np.ndarray | None = None,
                    hi: np.ndarray | None = None,
                    start: list[tuple[np.ndarray, np.ndarray]] | None = None
                    ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Interval-arithmetic bounds of every layer's pre-activation.  ``start`` gives
    already-known bounds for the first layers (kept, intersected)."""
    lo = problem.lo if lo is None else lo
    hi = problem.hi if hi is None else hi
    out: list[tuple[np.ndarray, np.ndarray]] = []
    a_lo, a_hi = lo.astype(float), hi.astype(float)
    for k, (W, b) in enumerate(problem.layers):
        L, U = _affine_interval(W, b, a_lo, a_hi)
        if start is not None and k < len(start):
            L, U = np.maximum(L, start[k][0]), np.minimum(U, start[k][1])
        out.append((L, U))
        a_lo, a_hi = np.maximum(L, 0.0), np.maximum(U, 0.0)
    return out


def _widen(v: np.ndarray, sign: float, abs_tol: float, rel_tol: float) -> np.ndarray:
    return v + sign * (abs_tol + rel_tol * np.abs(v))


class _LP:
    """The LP relaxation of the whole network at the current bounds: inputs, the
    triangle relaxation of each unstable ReLU (equalities for stable ones), outputs,
    and, with an objective cutoff, |y - ẑ| rows and Σ w t <= cutoff."""

    def __init__(self, problem: OPProblem, x_lo: np.ndarray, x_hi: np.ndarray,
                 pre: list[tuple[np.ndarray, np.ndarray]], cutoff: float | None,
                 threads: int) -> None:
        import highspy

        self.hs = highspy
        h = new_highs()
        h.setOptionValue("output_flag", False)
        set_threads(h, max(1, int(threads)))
        h.setOptionValue("presolve", "off")
        inf = h.getInfinity()
        self.h = h
        n = problem.n_in
        none_i, none_v = np.array([], dtype=np.int32), np.array([])
        h.addCols(n, np.zeros(n), x_lo.astype(float), x_hi.astype(float), 0, none_i, none_i,
                  none_v)
        for a, r, eq in zip(problem.A, problem.rhs, problem.equality, strict=True):
            idx = np.nonzero(a)[0].astype(np.int32)
            h.addRow(r if eq else -inf, r, len(idx), idx, a[idx].astype(float))
        self.layer_in: list[np.ndarray] = []  # columns feeding layer k
        prev = np.arange(n, dtype=np.int32)
        ncols = n
        nl = len(problem.layers)
        for k in range(nl):
            self.layer_in.append(prev)
            W, b = problem.layers[k]
            L, U = pre[k]
            m = W.shape[0]
            if k == nl - 1:
                lo, hi = L, U
            else:
                lo, hi = np.maximum(L, 0.0), np.maximum(U, 0.0)
            h.addCols(m, np.zeros(m), lo, hi, 0, none_i, none_i, none_v)
            cols = np.arange(ncols, ncols + m, dtype=np.int32)
            for i in range(m):
                wi = W[i]
                nz = np.nonzero(wi)[0]
                idx = np.concatenate([[cols[i]], prev[nz]]).astype(np.int32)
                coef = np.concatenate([[1.0], -wi[nz]])
                if k == nl - 1 or L[i] >= 0:
                    h.addRow(b[i], b[i], len(idx), idx, coef)
                elif U[i] > 0:
                    h.addRow(b[i], inf, len(idx), idx, coef)
                    s = U[i] / (U[i] - L[i])
                    h.addRow(-inf, s * (b[i] - L[i]), len(idx), idx,
                             np.concatenate([[1.0], -s * wi[nz]]))
            prev = cols
            ncols += m
        if cutoff is not None:
            p = problem.n_out
            z = problem.target_scaled
            h.addCols(p, np.zeros(p), np.zeros(p), np.full(p, inf), 0, none_i, none_i, none_v)
            tcols = np.arange(ncols, ncols + p, dtype=np.int32)
            for j in range(p):
                idx = np.array([tcols[j], prev[j]], dtype=np.int32)
                h.addRow(-z[j], inf, 2, idx, np.array([1.0, -1.0]))
                h.addRow(z[j], inf, 2, idx, np.array([1.0, 1.0]))
            h.addRow(-inf, cutoff, p, tcols, problem.weights.astype(float))
            ncols += p
        self.ncols = ncols
        self.solves = 0

    def extreme(self, cols: np.ndarray, coef: np.ndarray) -> tuple[float | None, float | None]:
        """min and max of coef @ v[cols] (None where the LP did not solve)."""
        h, hs = self.h, self.hs
        h.changeColsCost(len(cols), cols.astype(np.int32), coef.astype(float))
        out: list[float | None] = []
        for sense in (hs.ObjSense.kMinimize, hs.ObjSense.kMaximize):
            h.changeObjectiveSense(sense)
            h.run()
            self.solves += 1
            ok = h.getModelStatus() == hs.HighsModelStatus.kOptimal
            out.append(float(h.getInfo().objective_function_value) if ok else None)
        h.changeColsCost(len(cols), cols.astype(np.int32), np.zeros(len(cols)))
        return out[0], out[1]


def _unstable(pre: list[tuple[np.ndarray, np.ndarray]], k: int, i: int, last: int) -> int:
    """Unstable neurons from neuron ``i`` of layer ``k`` to the last hidden layer
    (index ``last - 1``): the neurons a stopped round did not reach."""
    n = 0
    for j in range(k, last):
        L, U = pre[j]
        n += int(((L[i if j == k else 0:] < 0) & (U[i if j == k else 0:] > 0)).sum())
    return n


def tighten_bounds(problem: OPProblem, time_limit: float = 10.0, threads: int = 1,
                   cutoff: float | None = None, rounds: int = 2, abs_tol: float = 1e-6,
                   rel_tol: float = 1e-7,
                   start: list[tuple[np.ndarray, np.ndarray]] | None = None,
                   max_lps: int | None = None) -> NeuronBounds:
    """Interval bounds, then LP-based tightening (see module doc).

    With ``cutoff`` (the objective of a known feasible point, e.g. the warm start),
    the LP also requires Σ w |y - ẑ| <= cutoff, and the tunables' own ranges are
    tightened first: the bounds are then valid for every point at least as good as
    the cutoff, which is all the MILP needs to find the optimum, and much tighter,
    because the target pins the outputs.  Each round rebuilds the LP with the bounds
    of the previous one.

    ``start``: bounds already known to be valid over the whole box (the cached
    box bounds of :func:`box_bounds`); they are intersected with interval
    arithmetic, and neurons they already prove stable get no LP (a stable neuron is
    represented exactly, its bounds cost nothing).

    ``max_lps``: the most LPs of the whole call (None: no cap); a neuron's or an
    input's two LPs (min and max) are solved both or neither."""
    t0 = time.perf_counter()
    x_lo, x_hi = problem.lo.astype(float).copy(), problem.hi.astype(float).copy()
    pre = interval_bounds(problem, x_lo, x_hi, start=start)
    nl = len(problem.layers)
    solves = 0
    complete = True
    stopped: str | None = None
    skipped = 0
    tightened = 0
    im = problem.integer
    cut = None if cutoff is None else float(cutoff) + abs_tol + 1e-6 * abs(float(cutoff))

    def stop(lp: _LP) -> str | None:
        """What stops the tightening before the next pair of LPs, if anything."""
        if max_lps is not None and solves + lp.solves + 2 > max_lps:
            return "max_lps"
        if time.perf_counter() - t0 > time_limit:
            return "time_limit"
        return None

    for _ in range(max(1, rounds)):
        before = sum(float((U - L).sum()) for L, U in pre[:-1])
        lp = _LP(problem, x_lo, x_hi, pre, cut, threads)
        first = 0 if (cut is not None or len(problem.A)) else 1
        if cut is not None or len(problem.A):
            for i in range(problem.n_in):
                if (stopped := stop(lp)) is not None:
                    complete = False
                    skipped = 2 * (problem.n_in - i + _unstable(pre, first, 0, nl - 1))
                    break
                lo_v, hi_v = lp.extreme(np.array([i]), np.array([1.0]))
                span = 1e-7 * max(1.0, abs(x_hi[i] - x_lo[i]))
                if lo_v is not None:
                    x_lo[i] = max(x_lo[i], lo_v - span)
                if hi_v is not None:
                    x_hi[i] = min(x_hi[i], hi_v + span)
            x_lo[im] = np.ceil(x_lo[im] - 1e-6)
            x_hi[im] = np.floor(x_hi[im] + 1e-6)
            x_hi = np.maximum(x_hi, x_lo)
            pre = interval_bounds(problem, x_lo, x_hi, start=pre)
        for k in range(first, nl - 1):
            if not complete:
                break
            W, b = problem.layers[k]
            L, U = pre[k][0].copy(), pre[k][1].copy()
            cols = lp.layer_in[k]
            for i in range(W.shape[0]):
                if L[i] >= 0 or U[i] <= 0:
                    continue  # already stable: exact in the MILP, no binary to save
                if (stopped := stop(lp)) is not None:
                    complete = False
                    skipped = 2 * _unstable([(L, U), *pre[k + 1:]], 0, i, nl - 1 - k)
                    break
                lo_v, hi_v = lp.extreme(cols, W[i])
                if lo_v is not None:
                    L[i] = max(L[i], float(_widen(np.array(lo_v + b[i]), -1, abs_tol, rel_tol)))
                if hi_v is not None:
                    U[i] = min(U[i], float(_widen(np.array(hi_v + b[i]), +1, abs_tol, rel_tol)))
            pre[k] = (L, np.maximum(U, L))
            tightened += 1
            pre = interval_bounds(problem, x_lo, x_hi, start=pre)
        solves += lp.solves
        after = sum(float((U - L).sum()) for L, U in pre[:-1])
        if not complete or after > 0.95 * before:
            break
    if stopped is not None:
        log.info("bound tightening stopped by %s: %d LPs solved, %d skipped (their "
                 "neurons keep their interval bounds)",
                 f"obbt.max_lps ({max_lps})" if stopped == "max_lps" else
                 f"its time limit ({time_limit:g} s)", solves, skipped)
    return NeuronBounds(pre=pre, seconds=time.perf_counter() - t0, lp_solves=solves,
                        tightened_layers=tightened, complete=complete, x_lo=x_lo, x_hi=x_hi,
                        lp_skipped=skipped, stopped_by=stopped)


def compute_bounds(problem: OPProblem, obbt: ObbtSettings, threads: int = 1,
                   cutoff: float | None = None,
                   start: list[tuple[np.ndarray, np.ndarray]] | None = None,
                   rounds: int = 2, time_limit: float | None = None) -> NeuronBounds:
    """Bounds as configured: ``obbt.enabled``, ``obbt.time_limit`` (``time_limit``
    replaces it: the OP call's budget may cap it), ``obbt.max_lps``; ``cutoff``,
    ``start`` and ``rounds`` as in :func:`tighten_bounds`."""
    if not obbt.enabled:
        t0 = time.perf_counter()
        pre = interval_bounds(problem, start=start)
        return NeuronBounds(pre=pre, seconds=time.perf_counter() - t0)
    return tighten_bounds(problem, time_limit=obbt.time_limit if time_limit is None
                          else time_limit, threads=threads, cutoff=cutoff, rounds=rounds,
                          start=start, max_lps=obbt.max_lps)
