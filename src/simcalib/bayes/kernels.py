"""Discrepancy covariances: squared-exponential kernel, KOH and MOS, stable Cholesky.

Observations are stacked output-major ("task-major"): entry ``i`` of the observed
vector is output ``out[i]`` at time ``t[i]``; missing entries are simply absent, so
the observation operator (and a data mask) only selects rows.

* KOH: ``C = gamma * (I_J kron K)``, ``K_ij = exp(-(t_i - t_j)^2 / (2 ell^2))``.
* MOS (paper section 3.2): ``C_delta = C - C J (J^T C J)^{-1} J^T C`` where ``J`` is the
  (m x p) sensitivity matrix of the observed entries.  It is the KOH prior conditioned
  on ``J^T delta = 0`` (the discretised orthogonality constraint; uniform quadrature
  weights cancel), so ``J^T C_delta = 0`` exactly.  ``C_delta`` depends on J only
  through its column space, so J's columns are scaled to unit norm first (this
  removes the bad conditioning from parameters of different units); columns of zero
  norm (parameters the data cannot see) are dropped and counted.

Everything is float64; factorisations call LAPACK directly and add escalating
jitter only when a matrix is not numerically positive definite (counted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dpotrf, dpotrs, dtrtrs


class CholeskyError(np.linalg.LinAlgError):
    """No jitter up to the limit made the matrix positive definite."""


def _potrf(a: np.ndarray) -> np.ndarray | None:
    """LAPACK Cholesky without scipy's wrapper overhead (the sampler calls this
    thousands of times per second on small matrices); None if not positive definite."""
    c, info = dpotrf(a, lower=1, clean=1, overwrite_a=0)
    return c if info == 0 else None


def robust_cholesky(a: np.ndarray, start: float = 1e-10, limit: float = 1e-2
                    ) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of ``a``, adding escalating jitter (relative to the mean
    diagonal: start, x10, ... up to limit) until it succeeds.  Returns ``(L, jitter)``
    with the absolute jitter that was added (0.0 when none was needed)."""
    c = _potrf(a)
    if c is not None:
        return c, 0.0
    scale = float(np.mean(np.diag(a)))
    if not np.isfinite(scale) or scale <= 0:
        raise CholeskyError("matrix has a non-positive or non-finite diagonal")
    rel = start
    eye = np.eye(a.shape[0])
    while rel <= limit:
        c = _potrf(a + rel * scale * eye)
        if c is not None:
            return c, rel * scale
        rel *= 10.0
    raise CholeskyError(f"not positive definite even with jitter {limit} x mean diagonal")


def chol_solve(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A^{-1} b`` from the lower Cholesky factor of A."""
    return dpotrs(chol, b, lower=1)[0]


def tri_solve(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``L^{-1} b`` for lower-triangular L."""
    return dtrtrs(chol, b, lower=1)[0]


def se_kernel(t1: np.ndarray, t2: np.ndarray, gamma: float, ell: float) -> np.ndarray:
    """Squared-exponential kernel ``gamma * exp(-(t1 - t2')^2 / (2 ell^2))``."""
    d = t1[:, None] - t2[None, :]
    return gamma * np.exp(-0.5 * (d / ell) ** 2)


@dataclass
class ObsLayout:
    """Times and outputs of the observed entries, with what the kernel needs cached."""

    t: np.ndarray          # (m,) times of the observed entries
    out: np.ndarray        # (m,) output index of each entry
    d2: np.ndarray         # (m, m) squared time differences
    same: np.ndarray       # (m, m) 1.0 where both entries belong to one output

    @classmethod
    def build(cls, t: np.ndarray, out: np.ndarray) -> ObsLayout:
        t = np.asarray(t, dtype=np.float64)
        out = np.asarray(out, dtype=np.int64)
        return cls(t, out, (t[:, None] - t[None, :]) ** 2,
                   (out[:, None] == out[None, :]).astype(np.float64))

    def koh(self, gamma: float, ell: float) -> np.ndarray:
        """``gamma * (I_J kron K)`` restricted to the observed entries."""
        return gamma * np.exp(self.d2 * (-0.5 / (ell * ell))) * self.same


def scaled_columns(j: np.ndarray, rank_tol: float = 1e-12) -> tuple[np.ndarray, bool]:
    """Columns of ``j`` scaled to unit norm (C_delta depends on J only through its
    column space, so scaling removes the bad conditioning of sensitivities to
    parameters of different units); columns with (near) zero norm, i.e. parameters the
    observations do not see, are dropped and flagged (a counted regularisation)."""
    norms = np.sqrt(np.einsum("ij,ij->j", j, j))
    top = norms.max(initial=0.0)
    keep = norms > rank_tol * top if top > 0 else np.zeros_like(norms, dtype=bool)
    if np.all(keep):
        return j / norms, False
    return j[:, keep] / norms[keep], True


@dataclass
class MosFactors:
    """``C_delta`` plus the pieces reused to draw from it: the scaled sensitivities
    ``js``, ``cj = C js``, the Cholesky factor ``lg`` of ``js^T C js``, and ``regularised``
    (dropped columns plus jitter additions, counted by the sampler)."""

    c_delta: np.ndarray
    js: np.ndarray
    cj: np.ndarray
    lg: np.ndarray
    regularised: int

    def project(self, delta_c: np.ndarray) -> np.ndarray:
        """Map a KOH draw to a MOS draw: ``delta_c - C J G^{-1} J^T delta_c``.  With
        ``delta_c ~ N(0, C)`` the result has covariance ``C_delta`` and ``J^T result = 0``."""
        if self.js.shape[1] == 0:
            return delta_c
        return delta_c - self.cj @ chol_solve(self.lg, self.js.T @ delta_c)


def mos_from_koh(c: np.ndarray, j: np.ndarray, rank_tol: float = 1e-12) -> MosFactors:
    """MOS covariance ``C - C J (J^T C J)^{-1} J^T C`` from the KOH covariance ``c`` and
    the sensitivities ``j`` (m x p)."""
    js, dropped = scaled_columns(j, rank_tol)
    reg = int(dropped)
    if js.shape[1] == 0:
        return MosFactors(c.copy(), js, js, np.zeros((0, 0)), reg)
    cj = c @ js
    lg, jit = robust_cholesky(js.T @ cj)
    reg += int(jit > 0)
    w = tri_solve(lg, cj.T)
    return MosFactors(c - w.T @ w, js, cj, lg, reg)


def mos_covariance(c: np.ndarray, j: np.ndarray, rank_tol: float = 1e-10) -> np.ndarray:
    """Just ``C_delta`` (for tests and data simulation)."""
    return mos_from_koh(c, j, rank_tol).c_delta
