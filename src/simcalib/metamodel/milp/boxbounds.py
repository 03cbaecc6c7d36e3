"""Neuron bounds over the whole search box, computed once and reused across targets.

The bounds of every pre-activation over the box (interval arithmetic, then LP-based
tightening *without* an objective cutoff) do not depend on the target: every
target of one study at one context and box shares them.  ``simcalib optimize``
solves all targets of a study in one process, and so do the calibration
strategies, so an in-process cache keyed by a fingerprint of the folded network,
the box and the domain constraints computes them once per job.

They serve three purposes:

* the start of the per-target (cutoff) tightening, whose LPs then skip every
  neuron already proven stable over the box;
* the MILP's bounds outright when the net is small (the portfolio of
  :mod:`.optimize`: when few neurons are unstable over the box, per-target
  tightening costs more than it saves);
* the stability record of a metamodel (:func:`metamodel_stability`): how many
  neurons are stable over its input box and how many binaries its MILP needs.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from simcalib.metamodel.milp.bounds import NeuronBounds, interval_bounds, tighten_bounds
from simcalib.metamodel.milp.problem import OPProblem

_CACHE: OrderedDict[str, NeuronBounds] = OrderedDict()
_CACHE_SIZE = 64


def fingerprint(problem: OPProblem) -> str:
    """Hash of everything the box bounds depend on (not the target or weights)."""
    h = hashlib.sha1()
    for W, b in problem.layers:
        h.update(np.ascontiguousarray(W, dtype=float).tobytes())
        h.update(np.ascontiguousarray(b, dtype=float).tobytes())
    for a in (problem.lo, problem.hi, problem.A, problem.rhs):
        h.update(np.ascontiguousarray(a, dtype=float).tobytes())
    h.update(np.asarray(problem.equality, dtype=bool).tobytes())
    h.update(np.asarray(problem.integer, dtype=bool).tobytes())
    return h.hexdigest()


def box_bounds(problem: OPProblem, time_limit: float = 30.0, threads: int = 1,
               use_cache: bool = True) -> tuple[NeuronBounds, bool]:
    """(bounds valid over the problem's whole box, True if taken from the cache).

    The returned object is a copy: callers may tighten it further."""
    key = f"{fingerprint(problem)}:{float(time_limit)}"
    if use_cache and key in _CACHE:
        _CACHE.move_to_end(key)
        nb = copy.deepcopy(_CACHE[key])
        return nb, True
    nb = tighten_bounds(problem, time_limit=time_limit, threads=threads, cutoff=None)
    if use_cache:
        _CACHE[key] = copy.deepcopy(nb)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return nb, False


def cached_unstable(problem: OPProblem, time_limit: float = 30.0) -> int | None:
    """Unstable neurons of the cached box bounds of :func:`box_bounds` (same key), or
    None when they are not cached: a look-up that computes nothing (the portfolio of
    :mod:`.optimize` sizes the warm start by it before it pays for the bounds)."""
    nb = _CACHE.get(f"{fingerprint(problem)}:{float(time_limit)}")
    return None if nb is None else int(nb.summary()["unstable"])


def clear_cache() -> None:
    _CACHE.clear()


def metamodel_stability(mm: Any, time_limit: float = 30.0) -> dict[str, Any]:
    """Stable and unstable neurons of a metamodel over its input box (the training
    data's range, every input free): interval arithmetic and LP-tightened counts.
    ``binaries`` is the number of binaries of its MILP without a target cutoff."""
    t0 = time.perf_counter()
    bounds = mm.info.get("input_bounds") or {}
    lo = np.array([float(bounds[n][0]) for n in mm.input_names])
    hi = np.array([float(bounds[n][1]) for n in mm.input_names])
    layers = mm.linear_layers()
    W1, b1 = layers[0]
    W1s = W1 / mm.x_std
    folded = [(W1s, b1 - W1s @ mm.x_mean), *layers[1:]]
    n = len(lo)
    prob = OPProblem(layers=folded, lo=lo, hi=hi, integer=np.zeros(n, dtype=bool),
                   A=np.zeros((0, n)), rhs=np.zeros(0), equality=np.zeros(0, dtype=bool),
                   target_scaled=np.zeros(len(mm.output_names)),
                   weights=np.ones(len(mm.output_names)), tunable_names=list(mm.input_names),
                   output_names=list(mm.output_names), context={})
    ia = NeuronBounds(pre=interval_bounds(prob)).summary()
    nb = tighten_bounds(prob, time_limit=time_limit, cutoff=None)
    lp = nb.summary()
    return {"neurons": int(lp["neurons"]),
            "interval_unstable": int(ia["unstable"]),
            "stable_active": int(lp["stable_active"]),
            "stable_inactive": int(lp["stable_inactive"]),
            "binaries": int(lp["unstable"]),
            "complete": bool(lp["complete"]),
            "seconds": round(time.perf_counter() - t0, 3)}
