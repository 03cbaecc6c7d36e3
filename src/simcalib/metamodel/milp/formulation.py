"""Our MILP formulation of OP, as a solver-independent sparse model.

Variables: raw tunables ``x`` (integers where the space says so), post-activations
``h_k`` of each hidden layer, one binary ``d`` per *unstable* neuron only, the
standardised outputs ``y`` and the absolute deviations ``t``.  With pre-activation
``z = W h_{k-1} + b`` and valid bounds ``L <= z <= U`` (:mod:`.bounds`):

* ``U <= 0`` (always inactive): ``h = 0`` (column fixed, no row, no binary);
* ``L >= 0`` (always active): ``h = z`` (one equality, no binary);
* otherwise: ``h >= z``, ``h >= 0``, ``h <= z - L (1 - d)``, ``h <= U d``.

The M's are the bounds themselves, never a fixed constant.  Outputs ``y = W h + b``;
objective ``min Σ w_j t_j`` with ``t_j >= ±(y_j - ẑ_j)``.  Linear domain constraints
act on ``x`` with the contexts folded into their right-hand sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simcalib.metamodel.milp.bounds import NeuronBounds
from simcalib.metamodel.milp.problem import OPProblem

INF = np.inf


@dataclass
class MILPModel:
    """Columns (cost, bounds, integrality) and rows (lower <= a x <= upper) in COO."""

    cost: list[float] = field(default_factory=list)
    col_lo: list[float] = field(default_factory=list)
    col_hi: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    row_lo: list[float] = field(default_factory=list)
    row_hi: list[float] = field(default_factory=list)
    rows: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    # index maps
    x: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    h: list[np.ndarray] = field(default_factory=list)
    d: list[np.ndarray] = field(default_factory=list)  # -1 where the neuron is stable
    y: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    t: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_cols(self) -> int:
        return len(self.cost)

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def n_binaries(self) -> int:
        return int(sum((d >= 0).sum() for d in self.d))

    def add_cols(self, n: int, lo: np.ndarray | float, hi: np.ndarray | float,
                 cost: np.ndarray | float = 0.0, integer: np.ndarray | bool = False
                 ) -> np.ndarray:
        start = self.n_cols
        self.cost += list(np.broadcast_to(np.asarray(cost, dtype=float), (n,)))
        self.col_lo += list(np.broadcast_to(np.asarray(lo, dtype=float), (n,)))
        self.col_hi += list(np.broadcast_to(np.asarray(hi, dtype=float), (n,)))
        self.integer += list(np.broadcast_to(np.asarray(integer, dtype=bool), (n,)))
        return np.arange(start, start + n, dtype=np.int64)

    def add_row(self, idx: np.ndarray, val: np.ndarray, lo: float, hi: float) -> int:
        idx = np.asarray(idx, dtype=np.int64)
        val = np.asarray(val, dtype=float)
        keep = val != 0
        self.rows.append((idx[keep], val[keep]))
        self.row_lo.append(float(lo))
        self.row_hi.append(float(hi))
        return len(self.rows) - 1

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        starts = np.zeros(self.n_rows + 1, dtype=np.int64)
        for i, (idx, _) in enumerate(self.rows):
            starts[i + 1] = starts[i] + len(idx)
        index = np.concatenate([r[0] for r in self.rows]) if self.rows else np.zeros(0)
        value = np.concatenate([r[1] for r in self.rows]) if self.rows else np.zeros(0)
        return starts, index.astype(np.int64), value.astype(float)

    def solution_from_x(self, problem: OPProblem, x: np.ndarray) -> np.ndarray:
        """A full column vector (h, d, y, t) consistent with tunables ``x``: the
        incumbent handed to the solver as a warm start."""
        sol = np.zeros(self.n_cols)
        sol[self.x] = x
        pre = problem.forward(x)
        for k in range(len(self.h)):
            z = pre[k][0]
            sol[self.h[k]] = np.maximum(z, 0.0)
            on = self.d[k] >= 0
            sol[self.d[k][on]] = (z[on] > 0).astype(float)
        y = pre[-1][0]
        sol[self.y] = y
        sol[self.t] = np.abs(y - problem.target_scaled)
        return sol


def build_milp(problem: OPProblem, bounds: NeuronBounds) -> MILPModel:
    m = MILPModel()
    x_lo = problem.lo if bounds.x_lo is None else bounds.x_lo
    x_hi = problem.hi if bounds.x_hi is None else bounds.x_hi
    m.x = m.add_cols(problem.n_in, x_lo, x_hi, 0.0, problem.integer)
    for a, r, eq in zip(problem.A, problem.rhs, problem.equality, strict=True):
        m.add_row(m.x, a, r if eq else -INF, r)
    prev = m.x
    nl = len(problem.layers)
    for k in range(nl - 1):
        W, b = problem.layers[k]
        L, U = bounds.pre[k]
        hk = m.add_cols(W.shape[0], np.maximum(L, 0.0), np.maximum(U, 0.0))
        dk = np.full(W.shape[0], -1, dtype=np.int64)
        for i in range(W.shape[0]):
            if U[i] <= 0:
                continue
            idx = np.concatenate([[hk[i]], prev])
            coef = np.concatenate([[1.0], -W[i]])
            if L[i] >= 0:
                m.add_row(idx, coef, b[i], b[i])  # h = z
                continue
            di = int(m.add_cols(1, 0.0, 1.0, 0.0, True)[0])
            dk[i] = di
            m.add_row(idx, coef, b[i], INF)  # h - z >= 0
            # h - z - L d <= -L   (h <= z - L (1 - d))
            m.add_row(np.concatenate([idx, [di]]), np.concatenate([coef, [-L[i]]]),
                      -INF, b[i] - L[i])
            # h - U d <= 0
            m.add_row(np.array([hk[i], di]), np.array([1.0, -U[i]]), -INF, 0.0)
        m.h.append(hk)
        m.d.append(dk)
        prev = hk
    W, b = problem.layers[-1]
    Ly, Uy = bounds.pre[-1]
    pad = 1e-6 * (1.0 + np.abs(Ly)), 1e-6 * (1.0 + np.abs(Uy))
    y_lo = Ly - pad[0]
    if problem.guarded:  # constraint outputs (a success logit) have a lower bound
        y_lo = np.maximum(y_lo, np.where(np.isfinite(problem.y_lo), problem.y_lo, -INF))
    m.y = m.add_cols(W.shape[0], y_lo, Uy + pad[1])
    for j in range(W.shape[0]):
        m.add_row(np.concatenate([[m.y[j]], prev]), np.concatenate([[1.0], -W[j]]), b[j], b[j])
    tmax = np.maximum(np.abs(Uy + pad[1] - problem.target_scaled),
                      np.abs(Ly - pad[0] - problem.target_scaled))
    m.t = m.add_cols(W.shape[0], 0.0, tmax, problem.weights)
    z = problem.target_scaled
    for j in range(W.shape[0]):
        m.add_row(np.array([m.t[j], m.y[j]]), np.array([1.0, -1.0]), -z[j], INF)
        m.add_row(np.array([m.t[j], m.y[j]]), np.array([1.0, 1.0]), z[j], INF)
    return m
