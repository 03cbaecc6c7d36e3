"""Small-strain von Mises plasticity with isotropic hardening, plane stress.

Why this form: the specimen is a thin sheet (2 mm thick, 10 mm wide, holes of 2-4
mm), so plane stress holds away from the grips, and the thickness strain
``eps_zz`` it leaves free is what carries Poisson's ratio (elastic part
``-nu/E (s_xx + s_yy)``) and plastic incompressibility (``-(ep_xx + ep_yy)``) into
the out-of-plane displacement ``u_z = eps_zz T / 2`` of the front surface, the
response the paper reads nu from.

The update is the textbook 3-D radial return (Simo & Hughes 1998, Box 3.2) inside a
local Newton iteration on ``eps_zz`` that drives ``sigma_zz`` to zero; the plane
stress tangent is the consistent 3-D tangent statically condensed on ``zz``
(``C_ab - C_az C_zb / C_zz``), so the global Newton iteration converges
quadratically.  Tensors are Mandel 4-vectors ``[xx, yy, zz, sqrt(2) xy]`` (so dot
products are tensor contractions and the elastic tensor is a plain 4x4 matrix);
in-plane quantities drop the ``zz`` entry: ``[xx, yy, sqrt(2) xy]``.

Hardening laws (paper Eq. 13-14), ``eps_p`` the equivalent plastic strain:

* Holloman: ``sigma_y = sigma0 + K eps_p^n``
* Voce with m terms: ``sigma_y = sigma0 + R0 eps_p + sum_i Rinf_i (1 - exp(-b_i eps_p))``

Both are concave for the paper's parameters, so the scalar return equation is
convex and a bracketed Newton iteration solves it to round-off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simcalib.errors import ConfigError

SQ2 = np.sqrt(2.0)
SQ32 = np.sqrt(1.5)
M = np.array([1.0, 1.0, 1.0, 0.0])
PDEV = np.eye(4) - np.outer(M, M) / 3.0
INPLANE = [0, 1, 3]          # the in-plane entries of a Mandel 4-vector

LAWS = {"holloman": ("sigma0", "K", "n"),
        "voce1": ("sigma0", "R0", "Rinf1", "b1"),
        "voce2": ("sigma0", "R0", "Rinf1", "b1", "Rinf2", "b2")}
ELASTIC = ("E", "nu")


@dataclass(frozen=True)
class Material:
    """Elastic constants and a hardening law with its parameters (MPa)."""

    law: str
    E: float
    nu: float
    params: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.law not in LAWS:
            raise ConfigError("law", f"unknown hardening law {self.law!r}; one of {list(LAWS)}")
        missing = [k for k in LAWS[self.law] if k not in self.params]
        if missing:
            raise ConfigError(self.law, f"missing parameter(s) {missing}")
        if not (self.E > 0 and -1.0 < self.nu < 0.5):
            raise ConfigError(self.law, f"need E > 0 and -1 < nu < 0.5, got E={self.E}, "
                                        f"nu={self.nu}")
        if self.params["sigma0"] <= 0:
            raise ConfigError(f"{self.law}.sigma0", "must be > 0")

    @classmethod
    def from_dict(cls, law: str, values: dict[str, float]) -> Material:
        return cls(law, float(values["E"]), float(values["nu"]),
                   {k: float(values[k]) for k in LAWS.get(law, ()) if k in values})

    @property
    def shear(self) -> float:
        return self.E / (2 * (1 + self.nu))

    @property
    def bulk(self) -> float:
        return self.E / (3 * (1 - 2 * self.nu))

    def elastic_tensor(self) -> np.ndarray:
        return self.bulk * np.outer(M, M) + 2 * self.shear * PDEV

    def yield_stress(self, ep: np.ndarray) -> np.ndarray:
        return hardening(self.law, self.params, ep)[0]


def hardening(law: str, p: dict[str, float], ep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sigma_y, d sigma_y / d eps_p) at equivalent plastic strain ``ep``."""
    ep = np.asarray(ep, float)
    if law == "holloman":
        e = np.maximum(ep, 1e-300)
        g = p["sigma0"] + p["K"] * e ** p["n"]
        # the slope is infinite at 0 for n < 1; a huge finite value keeps the
        # return mapping's Newton step well defined (it is never used at 0 itself)
        dg = p["K"] * p["n"] * np.maximum(ep, 1e-14) ** (p["n"] - 1.0)
        return np.where(ep > 0, g, p["sigma0"]), dg
    g = p["sigma0"] + p["R0"] * ep
    dg = np.full_like(ep, p["R0"])
    for i in (1, 2):
        if f"Rinf{i}" in p:
            x = np.exp(-p[f"b{i}"] * ep)
            g = g + p[f"Rinf{i}"] * (1 - x)
            dg = dg + p[f"Rinf{i}"] * p[f"b{i}"] * x
    return g, dg


def return_increment(mat: Material, f_trial: np.ndarray, alpha: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``q_tr - 3G dg - sigma_y(alpha + dg) = 0`` for the plastic increment
    ``dg`` where the trial overstress ``f_trial = q_tr - sigma_y(alpha)`` is > 0;
    returns (dg, H) with H the hardening slope at the new plastic strain.

    The residual falls monotonically from ``f_trial`` at 0 to <= 0 at
    ``f_trial / 3G``; Newton steps that leave the shrinking bracket are replaced by
    bisection, so it converges for any increasing hardening law."""
    G3 = 3 * mat.shear
    s0 = mat.yield_stress(alpha)
    q = f_trial + s0
    lo, hi = np.zeros_like(f_trial), f_trial / G3
    x = hi.copy()
    tol = 1e-12 * max(mat.params["sigma0"], 1.0)
    H = np.zeros_like(x)
    for _ in range(200):
        sy, H = hardening(mat.law, mat.params, alpha + x)
        r = q - G3 * x - sy
        if np.all(np.abs(r) <= tol):
            break
        lo = np.where(r > 0, x, lo)
        hi = np.where(r < 0, x, hi)
        xn = x + r / (G3 + H)
        bad = ~((xn > lo) & (xn < hi)) | ~np.isfinite(xn)
        x = np.where(np.abs(r) <= tol, x, np.where(bad, 0.5 * (lo + hi), xn))
    else:
        raise FloatingPointError("return mapping did not converge")
    return x, H


def radial_return(mat: Material, eps: np.ndarray, ep_old: np.ndarray, alpha_old: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """3-D radial return at every point: total strains ``eps`` [n, 4] (Mandel), the
    committed plastic strain ``ep_old`` [n, 4] and equivalent plastic strain
    ``alpha_old`` [n]; returns stress [n, 4], consistent tangent [n, 4, 4], the new
    plastic strain and equivalent plastic strain."""
    G, Cel = mat.shear, mat.elastic_tensor()
    sig = (eps - ep_old) @ Cel.T
    s = sig @ PDEV.T
    norm = np.sqrt(np.einsum("ij,ij->i", s, s))
    q = SQ32 * norm
    f = q - mat.yield_stress(alpha_old)
    tang = np.broadcast_to(Cel, (len(eps), 4, 4)).copy()
    ep, alpha = ep_old.copy(), alpha_old.copy()
    pl = f > 1e-10 * mat.params["sigma0"]
    if np.any(pl):
        dg, H = return_increment(mat, f[pl], alpha_old[pl])
        n = s[pl] / norm[pl, None]
        sig[pl] -= 2 * G * SQ32 * dg[:, None] * n
        ep[pl] += SQ32 * dg[:, None] * n
        alpha[pl] += dg
        beta = 1 - 3 * G * dg / q[pl]
        gbar = 3 * G / (3 * G + H) - (1 - beta)
        tang[pl] = (mat.bulk * np.outer(M, M)[None] + 2 * G * beta[:, None, None] * PDEV[None]
                    - 2 * G * gbar[:, None, None] * np.einsum("ni,nj->nij", n, n))
    return sig, tang, ep, alpha


@dataclass
class State:
    """Committed state at every quadrature point: plastic strain (Mandel 4-vector),
    equivalent plastic strain and the thickness strain (a warm start)."""

    ep: np.ndarray
    alpha: np.ndarray
    ezz: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> State:
        return cls(np.zeros((n, 4)), np.zeros(n), np.zeros(n))

    def copy(self) -> State:
        return State(self.ep.copy(), self.alpha.copy(), self.ezz.copy())


def plane_stress_update(mat: Material, e2: np.ndarray, old: State, tol: float = 1e-10,
                        max_iter: int = 30) -> tuple[np.ndarray, np.ndarray, State]:
    """Plane-stress update at every point from in-plane strains ``e2`` [n, 3]
    (``[xx, yy, sqrt(2) xy]``): a Newton iteration on ``eps_zz`` with the 3-D radial
    return until ``|sigma_zz| <= tol * |sigma|``.  Returns the in-plane stress
    [n, 3], the condensed consistent tangent [n, 3, 3] and the new state."""
    Cel = mat.elastic_tensor()
    # elastic predictor of eps_zz: sigma_zz = 0 with the committed plastic strain
    ee = e2[:, :2] - old.ep[:, :2]
    ezz = old.ep[:, 2] - Cel[2, 0] * (ee[:, 0] + ee[:, 1]) / Cel[2, 2]
    eps = np.empty((len(e2), 4))
    eps[:, INPLANE] = e2
    for _ in range(max_iter):
        eps[:, 2] = ezz
        sig, tang, ep, alpha = radial_return(mat, eps, old.ep, old.alpha)
        r = sig[:, 2]
        scale = np.abs(sig).max(axis=1) + 1e-8 * mat.params["sigma0"]
        if np.all(np.abs(r) <= tol * scale):
            break
        ezz = ezz - r / tang[:, 2, 2]
    else:
        raise FloatingPointError("plane-stress iteration on eps_zz did not converge")
    c = tang[:, INPLANE][:, :, INPLANE] - np.einsum(
        "ni,nj->nij", tang[:, INPLANE, 2], tang[:, 2, INPLANE]) / tang[:, 2, 2, None, None]
    return sig[:, INPLANE], c, State(ep, alpha, ezz)
