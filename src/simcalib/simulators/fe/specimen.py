"""The paper's tension specimen (§4.2): a bar with a centred elliptical hole, pulled
by the displacement ``u`` of a reference point on its top, bottom grip fixed.

Quarter model by symmetry (:mod:`.mesh`, :mod:`.solver`), plane stress
(:mod:`.material`).  Outputs at each load step: the reaction force ``F`` at the
reference point (the quarter's reaction x 2 for the width x thickness) and the
displacements ``ux, uy, uz`` of 12 points of the top-left quadrant of the front
surface, interpolated from the P2 field at the points (the paper interpolates
likewise, its meshes differing per specimen too).  Conventions: ``uy`` is measured
from the fixed bottom grip (the quarter's ``u_y`` plus ``u / 2``), ``ux`` of a point
at ``X < 0`` is minus the quarter's ``u_x`` at ``|X|``, ``uz = eps_zz T / 2`` on the
front surface with ``eps_zz`` L2-projected from the quadrature points onto P1.

Units: mm, MPa, N.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from simcalib.errors import ConfigError
from simcalib.simulators.fe.material import Material
from simcalib.simulators.fe.mesh import MeshSize, quarter_plate
from simcalib.simulators.fe.solver import Model, Solver, build


def surface_points(width: float, length: float) -> np.ndarray:
    """12 points (X, Y) of the top-left quadrant of the front surface: three columns at
    X = -0.45, -0.35, -0.25 W cycling, Y from 0 to 0.3 L."""
    y = np.linspace(0.0, 0.3 * length, 12)
    x = np.tile([-0.45, -0.35, -0.25], 4) * width
    return np.stack([x, y], axis=1)


@dataclass(frozen=True)
class Specimen:
    """Bar dimensions (mm), the 12 surface points and the mesh density."""

    width: float = 10.0
    thickness: float = 2.0
    length: float = 40.0
    mesh: MeshSize = field(default_factory=MeshSize)

    def points(self) -> np.ndarray:
        return surface_points(self.width, self.length)

    def check_hole(self, a: float, b: float) -> None:
        """A hole that leaves the 12 points in material and fits the bar."""
        if not (0 < a < 0.5 * self.width and 0 < b < 0.25 * self.length):
            raise ConfigError("hole", f"semi-axes a = {a}, b = {b} do not fit a "
                                      f"{self.width} x {self.length} mm bar")
        pts = self.points()
        inside = (pts[:, 0] / a) ** 2 + (pts[:, 1] / b) ** 2 < 1.0
        if inside.any():
            raise ConfigError("hole", f"semi-axes a = {a}, b = {b}: output point(s) "
                                      f"{pts[inside].tolist()} fall inside the hole")


def _probes(model: Model, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operators from the solution to the 12 points: (Px [12, N], Py [12, N],
    Pz [12, n_qp]); Pz maps quadrature-point eps_zz to its P1 L2 projection at the
    points."""
    from scipy.sparse.linalg import splu
    from skfem import Basis, BilinearForm, ElementTriP1, asm

    q = np.stack([np.abs(pts[:, 0]), pts[:, 1]])
    P = model.basis.probes(q).toarray()                      # [2 * 12, N]
    n = len(pts)
    # the vector basis' probes: rows 0..n-1 give u_x, n..2n-1 u_y (checked below)
    Px, Py = P[:n], P[n:]
    sb = Basis(model.basis.mesh, ElementTriP1(), quadrature=model.basis.quadrature)

    @BilinearForm
    def mass(u, v, _):
        return u * v

    Mlu = splu(asm(mass, sb).tocsc())
    phi = np.stack([np.asarray(sb.basis[i][0]) for i in range(sb.Nbfun)])   # [3, nel, nqp]
    rows = np.repeat(sb.element_dofs[:, :, None], phi.shape[2], axis=2)  # [3, nel, nqp]
    cols = np.broadcast_to(np.arange(model.n_qp).reshape(phi.shape[1:]), phi.shape)
    import scipy.sparse as sp

    R = sp.coo_matrix(((phi * sb.dx[None]).ravel(), (rows.ravel(), cols.ravel())),
                      shape=(sb.N, model.n_qp)).tocsr()
    P1 = sb.probes(q).toarray()                              # [12, N1]
    Pz = (R.T @ Mlu.solve(P1.T)).T                           # [12, n_qp]
    return Px, Py, Pz


@dataclass
class Run:
    """One specimen's responses: u (mm) [steps], F (N) [steps], ux, uy, uz (mm)
    [steps, 12], plus solver diagnostics."""

    u: np.ndarray
    F: np.ndarray
    ux: np.ndarray
    uy: np.ndarray
    uz: np.ndarray
    newton_iterations: int
    cuts: int
    residuals: list[list[float]]
    n_dofs: int
    seconds: float
    alpha_max: np.ndarray


def simulate(mat: Material, a: float, b: float, u_steps: np.ndarray,
             spec: Specimen = Specimen(), tol: float = 1e-9) -> Run:
    """Run one specimen through the reference displacements ``u_steps`` (mm)."""
    t0 = time.process_time()
    spec.check_hole(a, b)
    p, t = quarter_plate(spec.width / 2, spec.length / 2, a, b, spec.mesh)
    model = build(p, t)
    pts = spec.points()
    Px, Py, Pz = _probes(model, pts)
    res = Solver(model, mat, tol=tol).solve(np.asarray(u_steps, float) / 2)
    U = np.stack(res.u)                                      # [steps, N]
    ezz = np.stack(res.ezz)                                  # [steps, n_qp]
    u = np.asarray(u_steps, float)
    return Run(u=u, F=2 * spec.thickness * np.asarray(res.reaction),
               ux=-(U @ Px.T), uy=U @ Py.T + u[:, None] / 2,
               uz=(ezz @ Pz.T) * spec.thickness / 2,
               newton_iterations=res.iterations, cuts=res.cuts, residuals=res.residuals,
               n_dofs=model.n_dofs, seconds=time.process_time() - t0,
               alpha_max=np.asarray(res.alpha_max))
