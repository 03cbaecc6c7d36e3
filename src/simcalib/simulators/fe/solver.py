"""Displacement-controlled elastoplastic solution of a quarter plate with P2 triangles.

scikit-fem supplies the finite-element machinery (quadratic triangles, quadrature,
mapped basis-function gradients, element-to-dof maps, point probes); the element
stiffness and internal forces are contracted here with ``numpy.einsum`` because the
tangent differs at every quadrature point and one batched contraction is far faster
than a generic form assembly.

Boundary conditions of the quarter model: ``u_x = 0`` on ``x = 0`` and ``u_y = 0``
on ``y = 0`` (the symmetry lines; the hole edge is free), ``u_y = U`` on the top
edge ``y = h`` with ``u_x`` free there (the grip pulls the edge uniformly and lets
it contract, so far from the hole the bar is in uniaxial stress).  Each load
increment is solved by Newton's method with the consistent tangent; an increment
that does not converge is cut in half (at most ``max_cuts`` times).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from simcalib.simulators.fe.material import SQ2, Material, State, plane_stress_update

log = logging.getLogger(__name__)


class FEError(RuntimeError):
    """A run that could not be solved (the simulator turns it into a failed row)."""


@dataclass
class Model:
    """Mesh, basis and the arrays the Newton iteration reuses."""

    p: np.ndarray
    t: np.ndarray
    h: float
    basis: object = field(repr=False)
    B: np.ndarray = field(repr=False)          # [nel, nqp, 3, 12] strain operator
    dx: np.ndarray = field(repr=False)         # [nel, nqp] quadrature weights x |J|
    dofs: np.ndarray = field(repr=False)       # [12, nel]
    fixed: np.ndarray = field(repr=False)      # Dirichlet dofs
    top: np.ndarray = field(repr=False)        # u_y dofs of the top edge
    free: np.ndarray = field(repr=False)

    @property
    def n_dofs(self) -> int:
        return int(self.basis.N)

    @property
    def n_qp(self) -> int:
        return int(self.dx.size)


def build(p: np.ndarray, t: np.ndarray, intorder: int = 2) -> Model:
    """P2 vector basis on the mesh, strain operators and boundary dofs."""
    from skfem import Basis, ElementTriP2, ElementVector, MeshTri

    mesh = MeshTri(np.ascontiguousarray(p, float), np.ascontiguousarray(t, np.int64))
    basis = Basis(mesh, ElementVector(ElementTriP2()), intorder=intorder)
    nb = basis.Nbfun
    B = np.zeros((basis.nelems, basis.dx.shape[1], 3, nb))
    for i in range(nb):
        g = basis.basis[i][0].grad                     # [2 comp, 2 dir, nel, nqp]
        B[:, :, 0, i] = g[0, 0]
        B[:, :, 1, i] = g[1, 1]
        B[:, :, 2, i] = (g[0, 1] + g[1, 0]) / SQ2
    h = float(p[1].max())
    tol = 1e-9 * max(float(p[0].max()), h)
    loc = basis.doflocs                                # [2, N]: dof i is comp i % 2
    comp = np.arange(basis.N) % 2
    left = np.flatnonzero((np.abs(loc[0]) < tol) & (comp == 0))
    bottom = np.flatnonzero((np.abs(loc[1]) < tol) & (comp == 1))
    top = np.flatnonzero((np.abs(loc[1] - h) < tol) & (comp == 1))
    fixed = np.unique(np.concatenate([left, bottom, top]))
    free = np.setdiff1d(np.arange(basis.N), fixed)
    return Model(p, t, h, basis, B, basis.dx, basis.element_dofs, fixed, top, free)


@dataclass
class StepResult:
    """Converged increments: top displacement, reaction (per unit thickness, quarter
    model), displacement vector, thickness strain per quadrature point and the Newton
    residual history of each solved increment."""

    U: list[float] = field(default_factory=list)
    reaction: list[float] = field(default_factory=list)
    u: list[np.ndarray] = field(default_factory=list)
    ezz: list[np.ndarray] = field(default_factory=list)
    alpha_max: list[float] = field(default_factory=list)
    residuals: list[list[float]] = field(default_factory=list)
    iterations: int = 0
    cuts: int = 0


class Solver:
    """Incremental Newton solver for one material on one mesh."""

    def __init__(self, model: Model, mat: Material, tol: float = 1e-9, max_iter: int = 12,
                 max_cuts: int = 6) -> None:
        self.m, self.mat = model, mat
        self.tol, self.max_iter, self.max_cuts = tol, max_iter, max_cuts
        nel, nqp = model.dx.shape
        self.state = State.zeros(nel * nqp)
        self.u = np.zeros(model.n_dofs)
        self.U = 0.0
        d = model.dofs
        nb = d.shape[0]
        self._rows = np.repeat(d.T, nb, axis=1).ravel()       # [nel * nb * nb]
        self._cols = np.tile(d.T, (1, nb)).ravel()
        self._K: sp.csr_matrix | None = None

    # -- one evaluation ------------------------------------------------------------
    def evaluate(self, u: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix, State]:
        """Internal forces, consistent tangent and trial state at displacement ``u``
        (from the committed state)."""
        m = self.m
        ue = u[m.dofs].T                                       # [nel, 12]
        e2 = np.einsum("eqai,ei->eqa", m.B, ue).reshape(-1, 3)
        sig, C, st = plane_stress_update(self.mat, e2, self.state)
        nel, nqp = m.dx.shape
        sig = sig.reshape(nel, nqp, 3) * m.dx[:, :, None]
        fe = np.einsum("eqai,eqa->ei", m.B, sig)
        f = np.bincount(m.dofs.T.ravel(), weights=fe.ravel(), minlength=m.n_dofs)
        CB = np.einsum("eqab,eqbj->eqaj", C.reshape(nel, nqp, 3, 3) * m.dx[:, :, None, None],
                       m.B)
        Ke = np.einsum("eqai,eqaj->eij", m.B, CB)
        K = sp.coo_matrix((Ke.ravel(), (self._rows, self._cols)),
                          shape=(m.n_dofs, m.n_dofs)).tocsr()
        return f, K, st

    # -- one increment -----------------------------------------------------------
    def _increment(self, U: float, residuals: list[float]) -> tuple[np.ndarray, State, float]:
        m = self.m
        if self._K is None:
            _, self._K, _ = self.evaluate(self.u)
        u = self.u.copy()
        du_d = np.zeros(m.n_dofs)
        du_d[m.top] = U - self.U
        u += du_d
        # first iteration: the prescribed increment through the last converged
        # tangent (the committed state is in equilibrium to within tol)
        K = self._K
        rhs = -(K[m.free] @ du_d)
        u[m.free] += spsolve(K[m.free][:, m.free].tocsc(), rhs)
        for _ in range(self.max_iter):
            f, K, st = self.evaluate(u)
            ref = max(float(np.abs(f[m.top]).sum()), 1e-12 * self.mat.E * m.h)
            r = float(np.linalg.norm(f[m.free])) / ref
            residuals.append(r)
            if r <= self.tol:
                self._K = K
                return u, st, float(f[m.top].sum())
            u[m.free] -= spsolve(K[m.free][:, m.free].tocsc(), f[m.free])
        raise FEError(f"Newton did not converge at U = {U:.5g} (residual {r:.2e})")

    def solve(self, targets: np.ndarray) -> StepResult:
        """Drive the top edge through the displacements ``targets`` (increasing),
        cutting increments in half when Newton fails; records each target."""
        res = StepResult()
        for U_target in targets:
            pending = [float(U_target)]
            cuts = 0
            while pending:
                U = pending[-1]
                hist: list[float] = []
                try:
                    u, st, R = self._increment(U, hist)
                except (FEError, FloatingPointError, np.linalg.LinAlgError) as exc:
                    cuts += 1
                    res.cuts += 1
                    if cuts > self.max_cuts:
                        raise FEError(f"increment to U = {U:.5g} failed after {cuts - 1} "
                                      f"cuts: {exc}") from None
                    self._K = None
                    pending.append(0.5 * (self.U + U))
                    continue
                res.iterations += len(hist)
                res.residuals.append(hist)
                self.u, self.state, self.U = u, st, U
                pending.pop()
            res.U.append(self.U)
            res.reaction.append(R)
            res.u.append(self.u.copy())
            res.ezz.append(self.state.ezz.copy())
            res.alpha_max.append(float(self.state.alpha.max()))
        return res
