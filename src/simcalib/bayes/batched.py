"""Batched pieces of the vectorised sampler: forward solves and covariances for all chains.

The sequential sampler advances one chain at a time and pays Python and LAPACK call
overhead per chain.  :class:`BatchedForward` and the covariance helpers here take a
leading *lane* axis (one lane per chain) so that all chains of a run are advanced in
one step:

* **linear models** (spring-damper settings; ``model.solver == "expm"``): the
  augmented state/sensitivity system ``dX/dt = M(theta) X`` is block lower-triangular,
  ``[[A, 0], [dA/dtheta_k, A]]`` per parameter k, so instead of one ``expm`` of the
  ``N (p + 1)`` square generator we take ``p`` small ``2N x 2N`` exponentials, all
  lanes and parameters in one batched ``scipy.linalg.expm`` call (the four-mass
  generator: 8 blocks of 20 x 20 instead of 90 x 90, ~4x fewer flops).  KOH never
  needs sensitivities in the sampler, so its lanes solve the plain ``N x N`` system.
  ``A(theta)`` is traced from the model's right-hand side with sympy (exact, as in
  :mod:`simcalib.bayes.ode`) and evaluated for every lane at once;
* **other models**: all lanes in one call of the model's compiled Dormand-Prince
  solver (:mod:`simcalib.bayes.jit`, every lane with its own step control), or one
  LSODA solve per lane without numba; without sensitivities for KOH.

A self-check at construction compares the batched linear solve with the model's own
``solve``; on any mismatch the per-lane path is used (and logged), so a model the
tracer misreads can cost speed, never correctness.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import scipy.linalg
from scipy.linalg.lapack import dpotrf, dpotrs, dtrtrs

from simcalib.bayes.kernels import CholeskyError, ObsLayout, mos_from_koh, robust_cholesky

log = logging.getLogger(__name__)
LOG2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------- linear algebra
def batch_cholesky(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower Cholesky factors of a stack ``a[c]``.  Returns ``(L, ok, regularised)``.

    One direct LAPACK ``dpotrf`` per lane (for the 20..100-square matrices here a
    Python loop over a handful of lanes is cheaper than numpy's or scipy's batched
    wrappers, which were measured at 5-10x the LAPACK time); a lane that is not
    numerically positive definite goes through :func:`robust_cholesky` (escalating
    jitter, counted); lanes that fail even then have ``ok = False`` and an identity
    factor, never used."""
    n_lane, m = a.shape[0], a.shape[1]
    out = np.empty_like(a)
    ok = np.ones(n_lane, dtype=bool)
    reg = np.zeros(n_lane, dtype=bool)
    for c in range(n_lane):
        lc, info = dpotrf(a[c], lower=1, clean=1, overwrite_a=0)
        if info == 0:
            out[c] = lc
            continue
        try:
            out[c], jit = robust_cholesky(a[c])
            reg[c] = jit > 0
        except (CholeskyError, ValueError):
            out[c] = np.eye(m)
            ok[c] = False
    return out, ok, reg


def tri_solve_batch(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``L^{-1} b`` per lane (direct LAPACK ``dtrtrs``); ``b`` is (C, m) or (C, m, k)."""
    out = np.empty(b.shape)
    for c in range(b.shape[0]):
        out[c] = dtrtrs(chol[c], b[c], lower=1)[0]
    return out


def chol_solve_batch(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A^{-1} b`` per lane from lower Cholesky factors (direct LAPACK ``dpotrs``)."""
    out = np.empty(b.shape)
    for c in range(b.shape[0]):
        out[c] = dpotrs(chol[c], b[c], lower=1)[0]
    return out


def koh_batch(layout: Any, gamma: np.ndarray, ell: np.ndarray) -> np.ndarray:
    """``gamma_c (I_J kron K(ell_c))`` for every lane c (observed entries only).

    A lane far in the tails (``ell`` beyond 1e154, a proposal or a rejected HMC
    trajectory drifting on) overflows ``ell * ell`` to inf: the scale is then -0 and
    the covariance ``gamma`` everywhere, the exact limit ``ell -> inf`` (and what any
    ``ell`` above 1e154 gives in float64), so the overflow is not reported.  ``ell``
    below 1e-154 underflows to a NaN diagonal instead, whose factorisation fails: the
    proposal is rejected and counted (``cholesky_failures``)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        scale = (-0.5 / (ell * ell))[:, None, None]
        return gamma[:, None, None] * np.exp(layout.d2[None] * scale) * layout.same[None]


class FullLayout:
    """The m x m covariance path (MOS, and KOH on a grid with missing entries) behind
    the interface :class:`KronLayout` shares, so the sampler has one code path:
    ``covariance`` (KOH ``C`` per lane), ``loglik``, ``matvec`` (``A v`` per lane),
    ``gain`` (``A S^{-1} v`` from the Cholesky factor of S: Matheron's update) and
    ``size`` (of the factors)."""

    def __init__(self, layout: Any) -> None:
        self.layout = layout
        self.size = layout.d2.shape[0]

    def covariance(self, gamma: np.ndarray, ell: np.ndarray) -> np.ndarray:
        return koh_batch(self.layout, gamma, ell)

    def loglik(self, c: np.ndarray, sigma2: np.ndarray, resid: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return loglik_batch(c, sigma2, resid)

    def matvec(self, a: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.einsum("cij,cj->ci", a, v)

    def gain(self, a: np.ndarray, chol: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.einsum("cij,cj->ci", a, chol_solve_batch(chol, v))


class KronLayout:
    """KOH on a full grid (every output observed at every time): the covariance
    ``gamma (I_J kron K_ell)`` of the output-major stacked entries, and with it
    ``C + sigma^2 I = I_J kron (gamma K_ell + sigma^2 I_T)``, is J copies of one
    T x T block.  So one T x T Cholesky factor serves all J outputs: J^3 times fewer
    flops than factorising the m x m matrix (m = J T; four-mass: one 20 x 20 instead of
    80 x 80), and exactly the same matrices, up to round-off.  MOS's projection couples
    the outputs, so MOS (and any grid with missing entries) keeps :class:`FullLayout`.
    Same interface; matrices are the T x T blocks, vectors the stacked (C, m) entries."""

    def __init__(self, t: np.ndarray, n_out: int) -> None:
        self.n_out, self.n_t = n_out, len(t)
        self.size = self.n_t
        # one output's layout: the block is koh_batch's covariance for it
        self.block = ObsLayout.build(t, np.zeros(len(t), dtype=np.int64))

    @classmethod
    def of(cls, pb: Any) -> KronLayout | None:
        """The block layout of a problem whose observed entries are the full grid."""
        if pb.method != "koh" or not np.all(pb.mask):
            return None
        n_t, n_out = pb.mask.shape
        if not (np.array_equal(pb.oi, np.repeat(np.arange(n_out), n_t))
                and np.array_equal(pb.ti, np.tile(np.arange(n_t), n_out))):
            return None
        return cls(np.asarray(pb.t, dtype=np.float64), n_out)

    def covariance(self, gamma: np.ndarray, ell: np.ndarray) -> np.ndarray:
        """The T x T block ``gamma_c K(ell_c)`` for every lane c."""
        return koh_batch(self.block, gamma, ell)

    def to_blocks(self, v: np.ndarray) -> np.ndarray:
        """Stacked entries (C, m) as (C, T, J): one column per output."""
        return np.swapaxes(v.reshape(v.shape[0], self.n_out, self.n_t), 1, 2)

    def from_blocks(self, b: np.ndarray) -> np.ndarray:
        return np.swapaxes(b, 1, 2).reshape(b.shape[0], self.n_out * self.n_t)

    def loglik(self, block: np.ndarray, sigma2: np.ndarray, resid: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """As :func:`loglik_batch` for ``I_J kron block``; the factor returned is the
        block's."""
        return loglik_batch(block, sigma2, self.to_blocks(resid))

    def matvec(self, a: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.from_blocks(np.einsum("cij,cjk->cik", a, self.to_blocks(v)))

    def gain(self, a: np.ndarray, chol: np.ndarray, v: np.ndarray) -> np.ndarray:
        coef = chol_solve_batch(chol, self.to_blocks(v))
        return self.from_blocks(np.einsum("cij,cjk->cik", a, coef))


class MosBatch:
    """MOS covariances ``C - C J (J^T C J)^{-1} J^T C`` for every lane, with the pieces
    that project a KOH draw onto a MOS draw (see :class:`kernels.MosFactors`).

    J's columns are scaled to unit norm as in :func:`kernels.mos_from_koh`; a lane with
    a (near) zero column, or whose ``J^T C J`` needs jitter, is computed by that
    function itself (counted as regularised)."""

    def __init__(self, c: np.ndarray, jac: np.ndarray, rank_tol: float = 1e-12) -> None:
        n_lane, m, _ = c.shape
        norms = np.sqrt(np.einsum("cij,cij->cj", jac, jac))
        top = norms.max(axis=1, keepdims=True)
        clean = np.all(norms > rank_tol * top, axis=1) & (top[:, 0] > 0)
        self.regularised = np.zeros(n_lane, dtype=int)
        self.ok = np.ones(n_lane, dtype=bool)
        self.special: dict[int, Any] = {}
        js = jac / np.where(norms > 0, norms, 1.0)[:, None, :]
        cj = c @ js
        g = np.swapaxes(js, 1, 2) @ cj
        lg, ok, reg = batch_cholesky(g)
        clean &= ok & ~reg
        w = tri_solve_batch(lg, np.swapaxes(cj, 1, 2))
        self.c_delta = c - np.swapaxes(w, 1, 2) @ w
        self.js, self.cj, self.lg = js, cj, lg
        for lane in np.nonzero(~clean)[0]:
            try:
                fac = mos_from_koh(c[lane], jac[lane], rank_tol)
            except CholeskyError:
                self.ok[lane] = False
                continue
            self.special[int(lane)] = fac
            self.c_delta[lane] = fac.c_delta
            self.regularised[lane] = fac.regularised

    def take(self, lanes: np.ndarray, other: MosBatch) -> None:
        """Replace the factors of ``lanes`` by those of ``other`` (accepted proposals)."""
        self.c_delta[lanes] = other.c_delta[lanes]
        self.js[lanes], self.cj[lanes], self.lg[lanes] = (other.js[lanes], other.cj[lanes],
                                                          other.lg[lanes])
        for lane in np.nonzero(lanes)[0]:
            self.special.pop(int(lane), None)
            if int(lane) in other.special:
                self.special[int(lane)] = other.special[int(lane)]

    def project(self, d: np.ndarray) -> np.ndarray:
        """Map KOH draws ``d`` (C, m) to MOS draws: ``d - C J G^{-1} J^T d`` per lane."""
        jt_d = np.einsum("cmp,cm->cp", self.js, d)
        coef = chol_solve_batch(self.lg, jt_d)
        out = d - np.einsum("cmp,cp->cm", self.cj, coef)
        for lane, fac in self.special.items():
            out[lane] = fac.project(d[lane])
        return out


# ----------------------------------------------------------------- forward solves
def _trace_linear(model: Any) -> tuple[list, list, Any] | None:
    """Sparse structure of ``A(theta)`` and ``dA/dtheta_k`` for a right-hand side that is
    linear and homogeneous in z without explicit time dependence; None otherwise.
    Returns (entries of A as (i, j)), (entries of dA as (k, i, j)), and one numpy
    function of theta returning every entry's value (broadcast over lanes)."""
    import sympy as sp

    n, p = model.n_state, model.n_param
    t = sp.Symbol("t", real=True)
    z = list(sp.symbols(f"z0:{n}", real=True))
    th = list(sp.symbols(f"th0:{p}", real=True))
    try:
        g = sp.Matrix(list(model.rhs(t, z, th, sp)))
    except Exception:  # noqa: BLE001 - untraceable rhs: no batched linear path
        return None
    if g.shape != (n, 1):
        return None
    gz = g.jacobian(z)
    if gz.free_symbols & (set(z) | {t}) or sp.expand(g - gz * sp.Matrix(z)) != sp.zeros(n, 1):
        return None
    a_idx, d_idx, exprs = [], [], []
    for i in range(n):
        for j in range(n):
            if gz[i, j] != 0:
                a_idx.append((i, j))
                exprs.append(gz[i, j])
    for k in range(p):
        dk = gz.diff(th[k])
        for i in range(n):
            for j in range(n):
                if dk[i, j] != 0:
                    d_idx.append((k, i, j))
                    exprs.append(dk[i, j])
    fn = sp.lambdify((th,), exprs, modules="numpy", cse=True)
    return a_idx, d_idx, fn


class BatchedForward:
    """Observed model output ``f`` (C, m) and sensitivities ``J`` (C, m, p) for a stack of
    parameter vectors, for one :class:`Likelihood` (its times, mask and layout)."""

    def __init__(self, pb: Any) -> None:
        self.pb = pb
        model = pb.setting.model
        self.model = model
        self.n, self.p = model.n_state, model.n_param
        self.linear = None
        self.steps = np.diff(pb.t, prepend=model.t0)
        if getattr(model, "solver", None) == "expm":
            traced = _trace_linear(model)
            if traced is not None:
                self.linear = traced
                if not self._self_check():
                    log.warning("batched linear solve disagrees with %s's own solve; "
                                "using per-lane solves", pb.setting.name)
                    self.linear = None

    @property
    def mode(self) -> str:
        if self.linear is not None:
            return "batched-expm"
        return "compiled-dopri5" if self.model.solver == "dopri5" else "per-lane"

    def _self_check(self) -> bool:
        pb = self.pb
        th = (0.6 * pb.lower + 0.4 * pb.upper)[None]
        ref = pb.setting.model.solve(th[0], pb.t)
        if ref is None:
            return True   # nothing to compare with; the sampler still checks finiteness
        f, jac, ok = self._linear(th, True)
        want_f, want_j = ref.z[pb.ti, pb.si], ref.s[pb.ti, pb.si, :]
        scale_f = max(1.0, float(np.abs(want_f).max()))
        scale_j = max(1.0, float(np.abs(want_j).max()))
        return bool(ok[0] and np.allclose(f[0], want_f, atol=1e-7 * scale_f, rtol=1e-6)
                    and np.allclose(jac[0], want_j, atol=1e-7 * scale_j, rtol=1e-6))

    def __call__(self, theta: np.ndarray, sens: bool) -> tuple[np.ndarray, np.ndarray | None,
                                                                np.ndarray]:
        """``(f, J, ok)`` on the modelled scale, as :meth:`Likelihood.forward`: for a
        ``positive`` setting ``log z`` and ``S / z`` (a lane with a non-positive output
        is not ok), otherwise the states themselves."""
        if self.linear is not None:
            return self.pb.modelled(*self._linear(theta, sens))
        return self.pb.modelled(*self._per_lane(theta, sens))

    # per-lane (compiled Dormand-Prince, LSODA, or anything the tracer does not cover)
    def _per_lane(self, theta: np.ndarray, sens: bool
                  ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        pb = self.pb
        z, s, ok = self.model.solve_lanes(theta, pb.t, sensitivities=sens)
        f = z[:, pb.ti, pb.si]
        jac = s[:, pb.ti, pb.si, :] if s is not None else None
        return f, jac, ok

    # batched matrix exponentials
    def _linear(self, theta: np.ndarray, sens: bool
                ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        assert self.linear is not None
        a_idx, d_idx, fn = self.linear
        pb, n, p = self.pb, self.n, self.p
        n_lane = theta.shape[0]
        vals = np.empty((n_lane, len(a_idx) + len(d_idx)))
        for i, v in enumerate(fn(list(theta.T))):
            vals[:, i] = v
        na = len(a_idx)
        a = np.zeros((n_lane, n, n))
        ai, aj = (np.array([ij[0] for ij in a_idx]), np.array([ij[1] for ij in a_idx]))
        a[:, ai, aj] = vals[:, :na]
        if sens:
            gen = np.zeros((n_lane, p, 2 * n, 2 * n))
            gen[:, :, :n, :n] = a[:, None]
            gen[:, :, n:, n:] = a[:, None]
            if d_idx:
                dk = np.array([x[0] for x in d_idx])
                di = np.array([x[1] for x in d_idx]) + n
                dj = np.array([x[2] for x in d_idx])
                gen[:, dk, di, dj] = vals[:, na:]
            x0 = np.zeros((n_lane, p, 2 * n))
            x0[:, :, :n] = self.model.z0
        else:
            gen = a[:, None]
            x0 = np.broadcast_to(self.model.z0, (n_lane, 1, n)).copy()
        out = self._propagate(gen, x0)           # (T, C, blocks, size)
        if out is None:
            return (np.zeros((n_lane, pb.m)), None if not sens else
                    np.zeros((n_lane, pb.m, p)), np.zeros(n_lane, dtype=bool))
        z = out[:, :, 0, :n]                     # (T, C, N)
        f = z[pb.ti, :, pb.si].T                 # (C, m)
        ok = np.all(np.isfinite(f), axis=1)
        jac = None
        if sens:
            s = out[:, :, :, n:]                 # (T, C, p, N)
            jac = np.transpose(s[pb.ti, :, :, pb.si], (1, 0, 2))   # (C, m, p)
            ok &= np.all(np.isfinite(jac), axis=(1, 2))
        return f, jac, ok

    def _propagate(self, gen: np.ndarray, x0: np.ndarray) -> np.ndarray | None:
        steps = self.steps
        pos = steps[steps > 0]
        if np.any(steps < 0):
            return None
        uniform = len(pos) > 0 and np.ptp(pos) <= 1e-9 * max(abs(pos[0]), 1.0)
        cache: dict[float, np.ndarray] = {}

        def phi(h: float) -> np.ndarray:
            key = float(pos[0]) if uniform else float(h)
            if key not in cache:
                with np.errstate(all="ignore"):
                    cache[key] = scipy.linalg.expm(gen * key)
            return cache[key]

        x = x0
        out = np.empty((len(steps), *x0.shape))
        try:
            for i, h in enumerate(steps):
                if h > 0:
                    x = np.einsum("cbij,cbj->cbi", phi(h), x)
                out[i] = x
        except (ValueError, np.linalg.LinAlgError, ArithmeticError):
            return None
        return out


def loglik_batch(c_delta: np.ndarray, sigma2: np.ndarray, resid: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``log N(resid; 0, C_delta + sigma2 I)`` per lane.  Returns ``(ll, chol, ok, reg)``;
    lanes whose covariance cannot be factorised get ``-inf``.  ``resid`` (C, n), or
    (C, n, k) for k independent columns sharing the n x n covariance (the Kronecker
    block of :class:`KronLayout`: log-determinant counted k times)."""
    n = c_delta.shape[1]
    k = 1 if resid.ndim == 2 else resid.shape[2]
    sig = c_delta + sigma2[:, None, None] * np.eye(n)[None]
    chol, ok, reg = batch_cholesky(sig)
    a = tri_solve_batch(chol, resid)
    logdet = np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)), axis=1)
    if resid.ndim == 3:
        logdet = k * logdet
        quad = np.einsum("ctj,ctj->c", a, a)
    else:
        quad = np.einsum("cm,cm->c", a, a)
    ll = -0.5 * quad - logdet - 0.5 * (n * k) * LOG2PI
    return np.where(ok, ll, -np.inf), chol, ok, reg
