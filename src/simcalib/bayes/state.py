"""The state of every lane of a lock-step run, as typed objects.

:class:`LaneState` is what the log target keeps for the current (or proposed) points
of all lanes: the sampling coordinates, the forward output and its sensitivities, the
covariances and the Cholesky factor of ``C_delta + sigma^2 I``, the log target and
what went wrong where.  Arrays have a leading lane axis, so accepting a proposal for
some lanes is one masked copy per field (:meth:`LaneState.take`).
:class:`LaneCounters` counts, per lane, the events a run reports (failed solves,
proposals out of the support, regularised or failed factorisations).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from simcalib.bayes.batched import MosBatch

#: the fields :meth:`LaneState.take` copies (the others describe one evaluation)
_CARRIED = ("x", "theta", "f", "c", "c_delta", "chol", "lp", "jac", "grad")


@dataclass
class LaneState:
    """All lanes' evaluated points (C lanes, d sampling coordinates, m observations).

    ``x`` (C, d): ``(u, [log sigma^2,] log gamma, log ell)``; ``theta`` (C, p);
    ``f`` (C, m) forward output; ``jac`` (C, m, p) its sensitivities (None when the
    kernel and method need none); ``c`` the KOH covariance, ``c_delta`` the
    discrepancy's (``c`` for KOH), ``mos`` the MOS factors; ``chol`` the factor of
    ``C_delta + sigma^2 I``; ``lp`` (C,) the log target (``-inf`` where rejected);
    ``grad`` (C, d) its gradient (gradient kernels only)."""

    x: np.ndarray
    theta: np.ndarray
    f: np.ndarray
    jac: np.ndarray | None
    c: np.ndarray
    c_delta: np.ndarray
    mos: MosBatch | None
    chol: np.ndarray
    lp: np.ndarray
    ok: np.ndarray
    ode_fail: np.ndarray
    out_of_support: np.ndarray
    regularised: np.ndarray
    chol_fail: np.ndarray
    grad: np.ndarray | None = None

    def take(self, new: LaneState, lanes: np.ndarray) -> None:
        """Accept ``new`` in ``lanes`` (boolean mask), in place."""
        for key in _CARRIED:
            mine = getattr(self, key)
            if mine is not None:
                mine[lanes] = getattr(new, key)[lanes]
        if self.mos is not None:
            assert new.mos is not None
            self.mos.take(lanes, new.mos)


@dataclass
class LaneCounters:
    """Per-lane event counts, reported with every chain (``ChainResult.counters``)."""

    n_lane: int
    ode_failures: np.ndarray = field(init=False)
    out_of_bounds: np.ndarray = field(init=False)
    regularised: np.ndarray = field(init=False)
    cholesky_failures: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        for f in self.names():
            setattr(self, f, np.zeros(self.n_lane, dtype=int))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name != "n_lane")

    def add(self, ev: LaneState) -> None:
        """Count what one evaluation of every lane ran into."""
        self.ode_failures += ev.ode_fail
        self.out_of_bounds += ev.out_of_support
        self.regularised += ev.regularised
        self.cholesky_failures += ev.chol_fail

    def of_lane(self, c: int) -> dict[str, int]:
        return {k: int(getattr(self, k)[c]) for k in self.names()}
