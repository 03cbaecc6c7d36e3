"""The unnormalised log posterior of every target at once, on the sampler's coordinates.

Coordinates: each target's tunable inputs as u in (0, 1)^d over that target's box
(bounds at its context; log inputs in log space), plus log tau for targets whose
observation sd is inferred.  The prior is uniform in u, i.e. uniform on the box and
log-uniform for ``log: true`` inputs, truncated to the linear constraints (a point
breaking one has density 0).  Contexts are fixed at the target's values.

Integer inputs are handled exactly, not relaxed: u_i is an auxiliary continuous
coordinate and the input is floor(lb + u_i (ub - lb + 1)) (the design's own map), so
each integer owns a cell of equal prior mass and the likelihood is constant on the
cell; the marginal of the integer is its exact discrete posterior.

The likelihood is N(z; M(x), Sigma(x)) (:mod:`.noise`), or with ``error_dof`` = nu > 2
a multivariate Student-t with the same covariance: a Gaussian whose scale varies from
target to target, because the metamodel's error does vary over the box (held-out
residuals of the epidemic metamodel have Mahalanobis^2 quantiles 7.4 / 18 / 34 at
50 / 90 / 99 %, where a Gaussian would give 8.3 / 14.7 / 21.7).  Outputs with weight 0
are dropped, a weight w multiplies the output's precision by w^2.

The covariance of one lane is

    Sigma = kappa Sigma_err(x) + diag(sd_j^2) + tau^2 diag(m_j s_j^2) + diag((eps s_j)^2)

* ``sd_j``: the target's ``sd_<output>`` where given, else 0;
* ``tau s_j`` (``m_j`` = 1 where the target gives no sd for output j and its
  observation scale is inferred, else 0): the inferred observation sd, in units of
  ``s_j``, the output's scale, which is Delta's divisor where no sd is given
  (docs/observed_targets.md): a point of a curve without its sd is measured as Delta
  measures it, and a point with one is not inflated by tau;
* ``eps s_j`` (:data:`ERROR_FLOOR`): the floor.  ``Sigma_err`` may be singular: on a
  curve whose runs are exactly rank k (a curve linear in its inputs) the basis
  truncates nothing, so ``A C A^T + D`` has rank k < P; with no sd at some points
  (a simulated target, a pseudo-target of the kappa calibration, an observed point
  without sd and tau -> 0 on noise-free data) Sigma was singular and Cholesky failed.
  A positive diagonal added to a positive semi-definite matrix is positive definite,
  so Sigma is by construction, whatever the error model, and tau's posterior stays
  proper (tau below eps buys no likelihood).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from simcalib.errors import ConfigError
from simcalib.metamodel.posterior.noise import ErrorModel
from simcalib.study.space import Space

LOG_2PI = float(np.log(2 * np.pi))
#: lanes x P x P floats per covariance block of one likelihood call (about 32 MB)
LANE_FLOATS = 4_000_000
#: the emulator never reproduces an output to better than this share of its scale s_j
#: (Delta's divisor where no sd is given): (eps s_j)^2 is added to Sigma's diagonal
#: (module docstring).  0.1 %: far below any emulator's held-out error and below the
#: 3 % of the series' scale that a basis keeping 99.9 % of the variance may truncate,
#: so it binds only where the error model says "exactly 0"; Sigma's condition number
#: stays near 1e6 kappa for an error of the output's own size, far inside double
#: precision, so Cholesky needs no retry.
ERROR_FLOOR = 1e-3


@dataclass
class TargetSpec:
    """One target: its id, context, observed outputs (metamodel order), observation
    variance (0 for none), output weights, whether tau is inferred, and (for
    synthetic targets) its true tunable inputs."""

    target_id: int
    context: dict[str, float]
    z: np.ndarray
    obs_var: np.ndarray
    weight: np.ndarray
    infer_scale: bool = False
    x_true: np.ndarray | None = None
    #: multiplier of the metamodel-error covariance (calibrated on held-out rows)
    kappa: float = 1.0
    #: (P,) bool: the outputs whose observation sd is the inferred tau s_j (the kept
    #: outputs without an sd); None: every output when ``infer_scale``
    infer_mask: np.ndarray | None = None

    def tau_mask(self) -> np.ndarray:
        """(P,) 1.0 where tau s_j is this target's observation sd, else 0.0."""
        P = len(self.z)
        if not self.infer_scale:
            return np.zeros(P)
        if self.infer_mask is None:
            return np.ones(P)
        return np.asarray(self.infer_mask, dtype=bool).astype(float)


class Posterior:
    """Log density of T targets over lanes: ``logp(U, t)`` with U (L, D) coordinates
    and t (L,) the target index of each lane."""

    def __init__(self, space: Space, model: ErrorModel, targets: Sequence[TargetSpec],
                 scale: np.ndarray, noise_scale: float = 0.1, dof: float = 0.0) -> None:
        if any(c.sense == "==" for c in space.constraints):
            raise ConfigError("constraints", "the posterior cannot sample under an equality "
                              "constraint (a set of prior mass zero); rewrite it as bounds "
                              "or two inequalities with a tolerance")
        self.space = space
        self.model = model
        self.targets = list(targets)
        self.d = len(space.tunable_names)
        self.infer = np.array([t.infer_scale for t in self.targets], dtype=bool)
        self.D = self.d + (1 if self.infer.any() else 0)
        self.scale = np.asarray(scale, dtype=float)
        self.noise_scale = float(noise_scale)
        if dof and not dof > 2:
            raise ConfigError("error_dof", f"must be > 2 (a finite variance) or 0, got {dof}")
        self.dof = float(dof or 0.0)
        T = len(self.targets)
        lo = np.empty((T, self.d))
        hi = np.empty((T, self.d))
        for i, t in enumerate(self.targets):
            lo[i], hi[i] = space.bounds(t.context)
        self.lo, self.hi = lo, hi
        self.Z = np.array([t.z for t in self.targets], dtype=float)
        self.obs_var = np.array([t.obs_var for t in self.targets], dtype=float)
        self.W = np.array([t.weight for t in self.targets], dtype=float)
        self.tau_mask = np.array([t.tau_mask() for t in self.targets], dtype=float)
        self.kappa = np.array([t.kappa for t in self.targets], dtype=float)
        self.ctx = np.array([[t.context[c] for c in space.context_names]
                             for t in self.targets], dtype=float).reshape(T, -1)
        self.input_order = [space.input_names.index(n) for n in model.input_names] \
            if hasattr(model, "input_names") else list(range(len(space.input_names)))
        self.evaluations = 0

    # ---- coordinates ------------------------------------------------------------
    def to_x(self, U: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Tunables (L, d) from coordinates (L, D) of lanes on targets t."""
        return self.space._map_unit(np.clip(U[:, : self.d], 0.0, 1.0 - 1e-12),
                                    self.lo[t], self.hi[t])

    def to_u(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Coordinates of tunables (the cell centre for integers): for the truth's rank."""
        return self.space.unit_of(X, self.lo[t], self.hi[t])

    def inputs(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Metamodel input rows: tunables and the lanes' contexts, in its order."""
        full = np.hstack([X, self.ctx[t]])
        return full[:, self.input_order]

    def feasible(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        ok = np.ones(len(X), dtype=bool)
        if not self.space.constraints:
            return ok
        env = {n: X[:, j] for j, n in enumerate(self.space.tunable_names)}
        env.update({n: self.ctx[t, j] for j, n in enumerate(self.space.context_names)})
        for con in self.space.constraints:
            ok &= con.satisfied(env)
        return ok

    # ---- density ----------------------------------------------------------------
    def log_prior_scale(self, v: np.ndarray) -> np.ndarray:
        """Half-normal(noise_scale) prior of tau, in v = log tau (Jacobian included)."""
        tau = np.exp(v)
        return v - 0.5 * (tau / self.noise_scale) ** 2

    def logp(self, U: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Unnormalised log posterior of each lane (-inf outside the prior's support)."""
        lprior, llik = self.parts(U, t)
        return lprior + llik

    def parts(self, U: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log prior, log likelihood) of each lane; the prior is -inf outside its
        support (there the likelihood is 0, never evaluated)."""
        U = np.atleast_2d(U)
        lprior = np.full(len(U), -np.inf)
        llik = np.zeros(len(U))
        inside = np.all((U[:, : self.d] > 0.0) & (U[:, : self.d] < 1.0), axis=1)
        if self.D > self.d:
            inside &= np.isfinite(U[:, self.d]) & (np.abs(U[:, self.d]) < 50)
        idx = np.flatnonzero(inside)
        if len(idx) == 0:
            return lprior, llik
        ti = t[idx]
        X = self.to_x(U[idx], ti)
        ok = self.feasible(X, ti)
        idx, ti, X = idx[ok], ti[ok], X[ok]
        if len(idx) == 0:
            return lprior, llik
        llik[idx] = self.loglik(X, ti, U[idx, self.d] if self.D > self.d else None)
        lprior[idx] = 0.0
        if self.D > self.d:
            inf = self.infer[ti]
            lprior[idx] += np.where(inf, self.log_prior_scale(U[idx, self.d]),
                                    -0.5 * U[idx, self.d] ** 2)   # unused coordinate: N(0, 1)
        return lprior, llik

    def loglik(self, X: np.ndarray, t: np.ndarray, v: np.ndarray | None = None) -> np.ndarray:
        """log N(z_t; M(x), Sigma) per lane, dropped outputs (weight 0) excluded; in
        chunks of lanes whose P x P covariances stay under :data:`LANE_FLOATS` floats
        (a 30-point curve has 11 times a 9-output study's P^2: the sampler's prior
        draws for a few hundred pseudo-targets took 11 GB in one piece)."""
        P = self.Z.shape[1]
        step = max(1, LANE_FLOATS // (P * P))
        if len(X) <= step:
            return self._loglik(X, t, v)
        return np.concatenate([self._loglik(X[i:i + step], t[i:i + step],
                                            None if v is None else v[i:i + step])
                               for i in range(0, len(X), step)])

    def _loglik(self, X: np.ndarray, t: np.ndarray, v: np.ndarray | None = None
                ) -> np.ndarray:
        inp = self.inputs(X, t)
        self.evaluations += len(X)
        M = self.model.mean(inp)
        C = np.asarray(self.model.cov(inp), dtype=float)
        P = M.shape[1]
        S = np.broadcast_to(C, (len(X), P, P)) * self.kappa[t][:, None, None]
        S[:, np.arange(P), np.arange(P)] += self.obs_var[t]
        if v is not None:
            tau2 = np.where(self.infer[t], np.exp(2 * v), 0.0)
            S[:, np.arange(P), np.arange(P)] += tau2[:, None] * self.tau_mask[t] \
                * self.scale ** 2
        S[:, np.arange(P), np.arange(P)] += (ERROR_FLOOR * self.scale) ** 2
        w = self.W[t]
        keep = w > 0
        winv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 1.0)
        S = S * winv[:, :, None] * winv[:, None, :]
        r = np.where(keep, self.Z[t] - M, 0.0)
        # a dropped output: unit variance, no correlation, zero residual (adds 0)
        drop = ~keep
        if drop.any():
            S = np.where(drop[:, :, None] | drop[:, None, :], 0.0, S)
            S[:, np.arange(P), np.arange(P)] += drop
        n_kept = keep.sum(axis=1)
        nu = self.dof
        if nu > 0:
            # Student-t with covariance S: scale matrix S (nu - 2) / nu
            S = S * ((nu - 2.0) / nu)
        L = np.linalg.cholesky(S)
        a = np.linalg.solve(L, r[:, :, None])[:, :, 0]
        logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
        m2 = (a ** 2).sum(axis=1)
        if nu > 0:
            return (gammaln(0.5 * (nu + n_kept)) - gammaln(0.5 * nu)
                    - 0.5 * n_kept * np.log(nu * np.pi) - 0.5 * logdet
                    - 0.5 * (nu + n_kept) * np.log1p(m2 / nu))
        return -0.5 * m2 - 0.5 * logdet - 0.5 * n_kept * LOG_2PI

    def sample_prior(self, n: int, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``n`` prior draws per lane target in ``t`` (constraints by rejection): (len(t)*n, D)."""
        tt = np.repeat(t, n)
        U = rng.random((len(tt), self.D))
        if self.D > self.d:
            U[:, self.d] = np.where(self.infer[tt],
                                    np.log(np.abs(rng.normal(0, self.noise_scale, len(tt)))
                                           + 1e-300),
                                    rng.normal(0, 1, len(tt)))
        for _ in range(100):
            bad = ~self.feasible(self.to_x(U, tt), tt)
            if not bad.any():
                break
            U[bad, : self.d] = rng.random((int(bad.sum()), self.d))
        else:
            raise ConfigError("constraints", "could not draw prior points that satisfy the "
                              "constraints at some target's context; the feasible region is "
                              "empty or tiny")
        return U
