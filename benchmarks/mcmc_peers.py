"""simcalib's MCMC against NumPyro NUTS on the same posterior (issue 29): ESS per CPU-s.

    nice -n 10 python benchmarks/mcmc_peers.py --quick   # two-mass only, short chains
    nice -n 10 python benchmarks/mcmc_peers.py           # two-mass, FitzHugh-Nagumo,
                                                         # four-mass; KOH and MOS

The posterior, written a second time in NumPyro/JAX (``pip install -e ".[mcmc-peers]"``;
without numpyro and jax the benchmark says so and exits 0):

* ``theta ~ U(LB, UB)``, ``log gamma ~ N``, ``log ell ~ N`` (the setting's priors),
  ``sigma^2 ~ IG(alpha, beta)``; ``y ~ N(f_theta, C_delta + sigma^2 I)`` with delta
  integrated out, ``C_delta`` the KOH ``gamma (I_J kron K)`` or its MOS projection off
  the (unit-norm scaled) sensitivities ``J = df/dtheta`` (kernels.py).  simcalib's
  sampler draws the same marginal (delta is drawn by Gibbs afterwards and not compared).
* ODE in JAX: the linear spring-damper models are solved exactly as simcalib does
  (``expm(A h)`` powers on the uniform grid); FitzHugh-Nagumo by
  ``jax.experimental.ode.odeint`` (adaptive Dormand-Prince, the method of simcalib's
  compiled solver) at the model's own ``rtol``/``atol`` (1e-7 / 1e-9); diffrax is not
  used.  The MOS sensitivities are ``jacfwd`` of the exact solution (linear models) or
  the augmented sensitivity system ``dS/dt = G_z S + G_theta`` integrated with the
  states (FitzHugh-Nagumo, as simcalib's solver), differentiated by NUTS through the
  adjoint.

Checks first: at random points of the prior box the two log densities (every constant
included) agree to 1e-8 relative, else the benchmark stops (for FitzHugh-Nagumo both
ODE solvers run at rtol 1e-11 for that check, since two adaptive solvers at 1e-7 only
agree to ~1e-6; the difference at the sampling tolerance is printed too).

Then per (setting, method), one data set from simcalib's own generator (replication 0,
as benchmarks/mcmc.py): simcalib's ``run`` (least-squares start included in its CPU
time; vectorized engine, 2 chains; ``--reps`` runs with different chain seeds, 3 by
default, their median ESS per CPU-s reported: one run's ESS swings several-fold on these
multimodal posteriors) once per ``--kernels`` entry
``kernel[:iterations[:burn_in[:theta_scale[:leapfrog_steps[:theta_boundary]]]]]`` (e.g.
``hmc:3000:1000::6``, ``hmc`` with 6 leapfrog steps; ``hmc:3000:1000::3:reflect``, 3 steps
that bounce off theta's bounds; default: the random walk ``mwg`` at
10,000 iterations with 5,000 burn-in, as before; ``mala`` at 10,000 / 2,000; ``hmc`` at
3,000 / 1,000, NUTS's own proportions, on the linear and on the logit theta scale), and
NUTS (2 chains one after the other, 1,000 warm-up + 2,000 draws; 300 + 500 on
FitzHugh-Nagumo, whose odeint-adjoint gradients are slow; started from simcalib's
least-squares fit, whose CPU is charged to simcalib only). NUTS is run twice on one
compiled program: the first (cold) run's CPU includes JAX's tracing and compilation, the
second run (another seed) does not. ESS = ArviZ bulk ESS, min over theta, gamma, ell and
sigma^2 (simcalib.bayes.convergence.diagnose, for both); CPU = process CPU time (XLA
limited to one thread). ``max_mean_diff_sd``: the largest ``|mean_simcalib - mean_nuts|
/ sd_nuts`` over theta, log gamma, log ell, log sigma^2 (draws pooled: simcalib's runs
of that kernel, NUTS's two runs), ``max_sd_rel_diff`` ``|sd_simcalib / sd_nuts - 1|``,
each with the parameter where it occurs. ``ratio`` = simcalib / NUTS ESS per CPU-s
(compile included); ratios are only meaningful within one run (same machine load).

Writes ``results/benchmarks/mcmc_peers.csv``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

# one XLA thread: CPU seconds then compare one core with one core
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scipy.special  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/coverage.py would shadow the coverage package numba probes for, and numba
# would then fail to compile the ODE solver (simcalib falls back to LSODA, much slower)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT / "src"))

from simcalib.bayes._threads import limit_blas_threads  # noqa: E402
from simcalib.bayes.convergence import diagnose  # noqa: E402
from simcalib.bayes.lockstep import LockstepSampler  # noqa: E402
from simcalib.bayes.models import build_setting  # noqa: E402
from simcalib.bayes.protocol import HyperPrior  # noqa: E402
from simcalib.bayes.sampler import Likelihood, SamplerConfig, run  # noqa: E402
from simcalib.bayes.synthetic import simulate  # noqa: E402
from simcalib.io import write_csv  # noqa: E402
from simcalib.seeds import rng  # noqa: E402

COLUMNS = ["setting", "method", "kernel", "simcalib_iterations", "simcalib_burn_in",
           "simcalib_runs", "simcalib_ess_per_cpu_s_each", "simcalib_cpu_s",
           "simcalib_ess", "simcalib_rhat", "simcalib_acceptance", "simcalib_ess_per_cpu_s",
           "nuts_mass", "nuts_warmup", "nuts_draws", "nuts_cpu_s", "nuts_compile_cpu_s", "nuts_ess",
           "nuts_rhat", "nuts_divergences", "nuts_steps_mean", "nuts_ess_per_cpu_s",
           "nuts_ess_per_cpu_s_no_compile", "ratio", "ratio_no_compile",
           "max_mean_diff_sd", "max_mean_diff_param", "max_sd_rel_diff", "max_sd_diff_param",
           "logdensity_max_rel_diff", "load"]
SETTINGS = ["two_mass", "fitzhugh_nagumo", "four_mass"]
#: NUTS warm-up and draws per chain where --warmup/--draws are not given: FitzHugh-Nagumo's
#: gradients go through odeint's adjoint (~17-21 ms each here, 1,000 + 2,000 would take
#: over an hour per method), so its chains are shorter; ESS per CPU-s is a rate (but
#: NUTS's rises with length: compile amortised, longer adaptation)
NUTS_LENGTH = {"fitzhugh_nagumo": (300, 500)}
REL_TOL = 1e-8


def peers_available() -> str | None:
    """None when numpyro and jax import, else why not."""
    try:
        import jax  # noqa: F401
        import numpyro  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or exc}"
    return None


# ------------------------------------------------------------------ the JAX posterior
class JaxPosterior:
    """The marginal posterior of ``(theta, log gamma, log ell, sigma^2)`` of one
    Likelihood, written in JAX: a NumPyro model plus its log density."""

    def __init__(self, pb: Likelihood, rtol: float | None = None,
                 atol: float | None = None) -> None:
        import jax
        import jax.numpy as jnp

        if pb.positive:
            raise ValueError("positive (log-scale) settings are not written in JAX here")
        self.pb = pb
        s = pb.setting
        model = s.model
        self.lower, self.upper = jnp.asarray(pb.lower), jnp.asarray(pb.upper)
        self.gp, self.ep = tuple(s.gamma_prior), tuple(s.ell_prior)
        self.a0, self.b0 = tuple(s.sigma2_prior)
        self.y = jnp.asarray(pb.y)
        self.d2 = jnp.asarray(pb.layout.d2)
        self.same = jnp.asarray(pb.layout.same)
        self.mos = pb.method == "mos"
        ti, si = np.asarray(pb.ti), np.asarray(pb.si)
        z0 = jnp.asarray(model.z0)
        if not np.all(np.isfinite(model.z0)):
            raise ValueError("initial states that depend on theta are not written in JAX here")
        rhs = model.rhs
        t = np.asarray(pb.t, dtype=np.float64)
        t0 = float(model.t0)

        def g(z: Any, tt: Any, th: Any) -> Any:
            return jnp.stack(rhs(tt, list(z), list(th), jnp))

        if model.solver == "expm":
            self.ode = "expm (exact, as simcalib)"
            h = np.diff(t)
            uniform = len(t) > 1 and np.allclose(h, h[0], rtol=1e-12, atol=0)

            def states(th: Any) -> Any:
                a = jax.jacfwd(lambda z: g(z, 0.0, th))(z0)     # exact: G is linear in z
                first = jax.scipy.linalg.expm(a * (t[0] - t0)) @ z0 if t[0] != t0 else z0
                if not uniform:
                    return jax.vmap(lambda tk: jax.scipy.linalg.expm(a * (tk - t0)) @ z0)(
                        jnp.asarray(t))
                step = jax.scipy.linalg.expm(a * h[0])

                def body(z: Any, _: Any) -> tuple[Any, Any]:
                    zn = step @ z
                    return zn, zn

                _, rest = jax.lax.scan(body, first, None, length=len(t) - 1)
                return jnp.concatenate([first[None], rest])

            def forward(th: Any) -> tuple[Any, Any]:
                obs = lambda q: states(q)[ti, si]  # noqa: E731
                f = obs(th)
                return f, (jax.jacfwd(obs)(th) if self.mos else None)
        else:
            from jax.experimental.ode import odeint

            rt = model.rtol if rtol is None else rtol
            at = model.atol if atol is None else atol
            self.ode = f"jax.experimental.ode.odeint (Dormand-Prince) rtol {rt:g} atol {at:g}"
            grid = jnp.asarray(t if t[0] == t0 else np.concatenate([[t0], t]))
            skip = 0 if t[0] == t0 else 1
            n, p = model.n_state, model.n_param

            def aug(x: Any, tt: Any, th: Any) -> Any:
                z, sens = x[:n], x[n:].reshape(n, p)
                gz = jax.jacfwd(lambda q: g(q, tt, th))(z)
                gth = jax.jacfwd(lambda q: g(z, tt, q))(th)
                return jnp.concatenate([g(z, tt, th), (gz @ sens + gth).ravel()])

            def forward(th: Any) -> tuple[Any, Any]:
                if not self.mos:
                    zs = odeint(g, z0, grid, th, rtol=rt, atol=at, mxstep=model.mxstep)[skip:]
                    return zs[ti, si], None
                x0 = jnp.concatenate([z0, jnp.zeros(n * p)])
                xs = odeint(aug, x0, grid, th, rtol=rt, atol=at, mxstep=model.mxstep)[skip:]
                return xs[ti, si], xs[:, n:].reshape(-1, n, p)[ti, si]

        self.forward = forward

    def covariance(self, th: Any, log_gamma: Any, log_ell: Any, sigma2: Any) -> tuple[Any, Any]:
        """Mean ``f`` and ``C_delta + sigma^2 I`` (kernels.py's formulas)."""
        import jax.numpy as jnp
        import jax.scipy.linalg as jsl

        f, jac = self.forward(th)
        ell = jnp.exp(log_ell)
        c = jnp.exp(log_gamma) * jnp.exp(self.d2 * (-0.5 / (ell * ell))) * self.same
        if self.mos:
            js = jac / jnp.sqrt(jnp.sum(jac * jac, axis=0))
            cj = c @ js
            lg = jnp.linalg.cholesky(js.T @ cj)
            w = jsl.solve_triangular(lg, cj.T, lower=True)
            c = c - w.T @ w
        return f, c + sigma2 * jnp.eye(c.shape[0])

    def model(self) -> None:
        """The NumPyro model."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        th = numpyro.sample("theta", dist.Uniform(self.lower, self.upper).to_event(1))
        lg = numpyro.sample("log_gamma", dist.Normal(*self.gp))
        ll = numpyro.sample("log_ell", dist.Normal(*self.ep))
        s2 = numpyro.sample("sigma2", dist.InverseGamma(self.a0, self.b0))
        f, cov = self.covariance(th, lg, ll, s2)
        numpyro.sample("y", dist.MultivariateNormal(f, scale_tril=jnp.linalg.cholesky(cov)),
                       obs=self.y)

    def log_density(self, th: np.ndarray, lg: float, ll: float, s2: float) -> float:
        """NumPyro's log joint at one point (constrained values, no Jacobian), jitted
        once (one compilation instead of one per operation)."""
        if not hasattr(self, "_log_density"):
            import jax
            from numpyro.infer.util import log_density

            self._log_density = jax.jit(lambda p: log_density(self.model, (), {}, p)[0])
        params = {"theta": np.asarray(th), "log_gamma": np.float64(lg),
                  "log_ell": np.float64(ll), "sigma2": np.float64(s2)}
        return float(self._log_density(params))


def simcalib_log_density(pb: Likelihood, th: np.ndarray, lg: float, ll: float,
                         s2: float, lk: LockstepSampler | None = None) -> float:
    """simcalib's log joint at one point, every constant included: the vectorized
    engine's log likelihood + hyperprior (what its Metropolis step targets), plus the
    normalising constants it drops and sigma^2's inverse-gamma prior (what its Gibbs
    step draws from)."""
    s = pb.setting
    lk = lk or lockstep_of(pb)
    span = pb.upper - pb.lower
    x = np.concatenate([(th - pb.lower) / span, [lg, ll]])[None]
    ev = lk.evaluate(x, np.array([s2]), np.ones(1, dtype=bool))
    (_, sg), (_, sl) = s.gamma_prior, s.ell_prior
    a0, b0 = s.sigma2_prior
    const = (-np.sum(np.log(span)) - math.log(sg) - math.log(sl) - math.log(2 * math.pi))
    ig = a0 * math.log(b0) - scipy.special.gammaln(a0) - (a0 + 1) * math.log(s2) - b0 / s2
    return float(ev.lp[0] + const + ig)


def lockstep_of(pb: Likelihood) -> LockstepSampler:
    """simcalib's vectorized engine for one chain of ``pb`` (the random-walk kernel,
    whose target has sigma^2 outside the block)."""
    s = pb.setting
    hyper = HyperPrior(tuple(s.gamma_prior), tuple(s.ell_prior))
    return LockstepSampler([pb], SamplerConfig(chains=1, progress=False, log_every=0),
                           [hyper], 1)


def check_equality(pb: Likelihood, post: JaxPosterior, gen: np.random.Generator,
                   n: int = 8) -> float:
    """Max relative difference of the two log densities at ``n`` random points: theta
    uniform in its box, log gamma / log ell from their priors, sigma^2 from its prior."""
    s = pb.setting
    lk = lockstep_of(pb)
    worst = 0.0
    for _ in range(n):
        th = pb.lower + (pb.upper - pb.lower) * gen.uniform(0.05, 0.95, pb.p)
        lg = s.gamma_prior[0] + s.gamma_prior[1] * gen.standard_normal()
        ll = s.ell_prior[0] + s.ell_prior[1] * gen.standard_normal()
        s2 = float(s.sigma2_prior[1] / gen.gamma(s.sigma2_prior[0]))
        a = simcalib_log_density(pb, th, lg, ll, s2, lk)
        b = post.log_density(th, lg, ll, s2)
        if not (np.isfinite(a) and np.isfinite(b)):
            continue
        worst = max(worst, abs(a - b) / max(abs(a), 1.0))
    return worst


# ------------------------------------------------------------------ the samplers
def summaries(draws: dict[str, np.ndarray], names: list[str]
              ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Means and sds pooled over chains of theta and of log gamma, log ell, log sigma^2
    (on the log scale: the raw scale's heavy right tails make a sample sd too noisy
    to compare)."""
    cols = [draws["theta"][..., i] for i in range(draws["theta"].shape[-1])]
    cols += [np.log(draws["gamma"]), np.log(draws["ell"]), np.log(draws["sigma2"])]
    return ([*names, "log_gamma", "log_ell", "log_sigma2"],
            np.array([float(np.mean(c)) for c in cols]),
            np.array([float(np.std(c)) for c in cols]))


def pooled(runs: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The chains of several runs as one chain set."""
    return {k: np.concatenate([r["draws"][k] for r in runs]) for k in runs[0]["draws"]}


def parse_kernel(spec: str, iterations: int
                 ) -> tuple[str, int, int, str, int | None, str | None]:
    """``kernel[:iterations[:burn_in[:theta_scale[:leapfrog_steps[:boundary]]]]]`` ->
    (kernel, iterations, burn_in, theta_scale, leapfrog_steps, theta_boundary); burn-in
    defaults to half the iterations, the scale to linear, the leapfrog steps and the
    boundary (reject / reflect) to the schema's (None)."""
    parts = spec.split(":")
    it = int(parts[1]) if len(parts) > 1 and parts[1] else iterations
    burn = int(parts[2]) if len(parts) > 2 and parts[2] else it // 2
    scale = parts[3] if len(parts) > 3 and parts[3] else "linear"
    steps = int(parts[4]) if len(parts) > 4 and parts[4] else None
    boundary = parts[5] if len(parts) > 5 and parts[5] else None
    return parts[0], it, burn, scale, steps, boundary


def run_simcalib(pb: Likelihood, name: str, method: str, spec: str, iterations: int,
                 seed: int, rep: int = 0) -> dict[str, Any]:
    """One simcalib run; ``rep`` 0 uses benchmarks/mcmc.py's streams, ``rep`` k > 0
    another chain seed (same data, same least-squares start)."""
    kernel, iterations, burn_in, scale, steps, boundary = parse_kernel(spec, iterations)
    kw: dict[str, Any] = {"iterations": iterations, "burn_in": burn_in, "chains": 2,
                          "log_every": 0, "progress": False, "theta_scale": scale}
    if steps is not None:
        kw["leapfrog_steps"] = steps
    if boundary is not None:
        kw["theta_boundary"] = boundary
    if kernel != "mwg" or "theta_kernel" in {f.name for f in fields(SamplerConfig)}:
        kw["theta_kernel"] = kernel
    cfg = SamplerConfig.from_dict(kw)
    c0 = time.process_time()
    keys = ("bayes", name, method, 0) + ((("peers", rep),) if rep else ())
    res = run(pb, cfg, seed, keys, init_keys=("bayes", name, "init", 0))
    cpu = time.process_time() - c0
    draws = {"theta": np.stack([c.theta for c in res.chains]),
             "gamma": np.exp(np.stack([c.log_gamma for c in res.chains])),
             "ell": np.exp(np.stack([c.log_ell for c in res.chains])),
             "sigma2": np.stack([c.sigma2 for c in res.chains])}
    r_hat, ess = diagnose(draws)
    return {"cpu": cpu, "ess": ess, "rhat": r_hat, "draws": draws, "init": res.init,
            "iterations": iterations, "burn_in": burn_in,
            "acceptance": float(np.mean([c.acceptance for c in res.chains]))}


class Nuts:
    """One NumPyro MCMC object (2 chains, one after the other) reused for both runs, so
    the second run reuses the compiled program."""

    def __init__(self, post: JaxPosterior, warmup: int, draws: int,
                 dense_mass: bool = False) -> None:
        from numpyro.infer import MCMC, NUTS

        self.post = post
        self.mcmc = MCMC(NUTS(post.model, dense_mass=dense_mass), num_warmup=warmup,
                         num_samples=draws,
                         num_chains=2, chain_method="sequential", progress_bar=False)

    def run(self, seed: int, init: dict[str, Any], pb: Likelihood) -> dict[str, Any]:
        import jax

        s = pb.setting
        span = pb.upper - pb.lower
        th = np.clip(np.asarray(init["theta"]), pb.lower + 1e-3 * span, pb.upper - 1e-3 * span)
        start = {"theta": np.stack([th, th]),
                 "log_gamma": np.full(2, s.gamma_prior[0]),
                 "log_ell": np.full(2, s.ell_prior[0]),
                 "sigma2": np.full(2, float(init["sigma2"]))}
        c0 = time.process_time()
        self.mcmc.run(jax.random.PRNGKey(seed), init_params=None if init is None else
                      _unconstrain(self.post, start), extra_fields=("diverging", "num_steps"))
        smp = self.mcmc.get_samples(group_by_chain=True)
        jax.block_until_ready(smp)
        cpu = time.process_time() - c0
        draws = {"theta": np.asarray(smp["theta"]), "gamma": np.exp(np.asarray(smp["log_gamma"])),
                 "ell": np.exp(np.asarray(smp["log_ell"])), "sigma2": np.asarray(smp["sigma2"])}
        r_hat, ess = diagnose(draws)
        ex = self.mcmc.get_extra_fields()
        return {"cpu": cpu, "ess": ess, "rhat": r_hat, "draws": draws,
                "divergences": int(np.sum(ex["diverging"])),
                "steps": float(np.mean(ex["num_steps"]))}


def _unconstrain(post: JaxPosterior, start: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per-chain unconstrained initial values for NumPyro's ``init_params``."""
    import jax
    from numpyro.infer.util import unconstrain_fn

    return jax.vmap(lambda p: unconstrain_fn(post.model, (), {}, p))(
        {k: np.asarray(v) for k, v in start.items()})


# ------------------------------------------------------------------ one row
def bench(name: str, method: str, kernels: list[str], iterations: int, warmup: int,
          draws: int, seed: int, reps: int = 1, dense_mass: bool = False
          ) -> list[dict[str, Any]]:
    setting = build_setting(name)
    sim = simulate(setting, rng(seed, "bayes", name, "data", 0))
    pb = Likelihood(setting, sim.obs, method)
    gen = rng(seed, "mcmc_peers", name, method, "check")
    if setting.model.solver != "expm":
        # two adaptive solvers only agree to their tolerance: check the posterior's
        # definition with both at 1e-11, print the difference at the sampling tolerance
        rt, at = setting.model.rtol, setting.model.atol
        setting.model.rtol, setting.model.atol = 1e-11, 1e-13
        tight = check_equality(pb, JaxPosterior(pb), gen)
        setting.model.rtol, setting.model.atol = rt, at
        post = JaxPosterior(pb)
        loose = check_equality(pb, post, rng(seed, "mcmc_peers", name, method, "check"))
        print(f"{name} {method}: log densities, max relative difference {tight:.2e} at "
              f"rtol 1e-11 ({loose:.2e} at the sampling rtol {rt:g}); ODE: {post.ode}",
              flush=True)
    else:
        post = JaxPosterior(pb)
        tight = check_equality(pb, post, gen)
        print(f"{name} {method}: log densities, max relative difference {tight:.2e}; "
              f"ODE: {post.ode}", flush=True)
    if not tight <= REL_TOL:
        raise SystemExit(f"FAIL: {name} {method}: simcalib's and the JAX log density differ "
                         f"by {tight:.3g} relative (> {REL_TOL:g}): not the same posterior")
    sims = {k: [run_simcalib(pb, name, method, k, iterations, seed, r) for r in range(reps)]
            for k in kernels}
    nuts = Nuts(post, warmup, draws, dense_mass)
    init = sims[kernels[0]][0]["init"]
    cold = nuts.run(seed, init, pb)
    warm = nuts.run(seed + 1, init, pb)
    nuts_ess_cpu = cold["ess"] / cold["cpu"]
    nuts_ess_cpu_warm = warm["ess"] / warm["cpu"]
    names, mean_n, sd_n = summaries(pooled([cold, warm]), setting.params)
    rows = []
    for k, runs in sims.items():
        _, mean_s, sd_s = summaries(pooled(runs), setting.params)
        rates = [r["ess"] / r["cpu"] for r in runs]
        ours = float(np.median(rates))
        z = np.abs(mean_s - mean_n) / sd_n
        rel = np.abs(sd_s / sd_n - 1.0)
        sm = {"iterations": runs[0]["iterations"], "burn_in": runs[0]["burn_in"],
              "cpu": float(np.median([r["cpu"] for r in runs])),
              "ess": float(np.median([r["ess"] for r in runs])),
              "rhat": max(r["rhat"] for r in runs),
              "acceptance": float(np.mean([r["acceptance"] for r in runs]))}
        rows.append({
            "setting": name, "method": method, "kernel": k,
            "simcalib_iterations": sm["iterations"], "simcalib_burn_in": sm["burn_in"],
            "simcalib_runs": len(runs),
            "simcalib_cpu_s": sm["cpu"], "simcalib_ess": sm["ess"], "simcalib_rhat": sm["rhat"],
            "simcalib_acceptance": sm["acceptance"], "simcalib_ess_per_cpu_s": ours,
            "simcalib_ess_per_cpu_s_each": ";".join(f"{v:.1f}" for v in rates),
            "nuts_mass": "dense" if dense_mass else "diagonal",
            "nuts_warmup": warmup, "nuts_draws": draws, "nuts_cpu_s": cold["cpu"],
            "nuts_compile_cpu_s": max(cold["cpu"] - warm["cpu"], 0.0),
            "nuts_ess": cold["ess"], "nuts_rhat": cold["rhat"],
            "nuts_divergences": cold["divergences"] + warm["divergences"],
            "nuts_steps_mean": 0.5 * (cold["steps"] + warm["steps"]),
            "nuts_ess_per_cpu_s": nuts_ess_cpu, "nuts_ess_per_cpu_s_no_compile": nuts_ess_cpu_warm,
            "ratio": ours / nuts_ess_cpu, "ratio_no_compile": ours / nuts_ess_cpu_warm,
            "max_mean_diff_sd": float(z.max()), "max_mean_diff_param": names[int(z.argmax())],
            "max_sd_rel_diff": float(rel.max()), "max_sd_diff_param": names[int(rel.argmax())],
            "logdensity_max_rel_diff": tight, "load": os.getloadavg()[0]})
        r = rows[-1]
        print(f"{name:16s} {method:4s} {k:16s} simcalib x{len(runs)} {sm['cpu']:6.1f} CPU-s ESS "
              f"{sm['ess']:6.0f} "
              f"R-hat {sm['rhat']:.3f} -> {ours:6.1f}/s | NUTS {cold['cpu']:6.1f} CPU-s "
              f"(warm {warm['cpu']:6.1f}) ESS {cold['ess']:6.0f}/{warm['ess']:6.0f} R-hat "
              f"{cold['rhat']:.3f} -> {nuts_ess_cpu:6.1f}/s ({nuts_ess_cpu_warm:6.1f}/s "
              f"no compile) | ratio {r['ratio']:.2f} ({r['ratio_no_compile']:.2f}) | means "
              f"within {r['max_mean_diff_sd']:.3f} sd ({r['max_mean_diff_param']}), sds "
              f"{r['max_sd_rel_diff']:.1%} ({r['max_sd_diff_param']}); each run "
              f"{r['simcalib_ess_per_cpu_s_each']}",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="two-mass only, 2,000 simcalib iterations, NUTS 300 + 500")
    ap.add_argument("--settings", nargs="+", choices=SETTINGS)
    ap.add_argument("--methods", nargs="+", default=["koh", "mos"], choices=["koh", "mos"])
    ap.add_argument("--kernels", nargs="+",
                    help="simcalib runs: kernel[:iterations[:burn_in[:theta_scale["
                    ":leapfrog_steps[:boundary]]]]] with kernel a sampler.theta_kernel "
                    "(burn-in: half; scale: linear; leapfrog steps and boundary "
                    "(reject/reflect): the schema's; default: "
                    "mwg at --iterations, mala:10000:2000, hmc:3000:1000, "
                    "hmc:3000:1000:logit; --quick: mwg, mala, hmc:2000:500)")
    ap.add_argument("--iterations", type=int, help="simcalib iterations per chain "
                    "of a kernel without its own (default 10,000, --quick 2,000)")
    ap.add_argument("--warmup", type=int, help="NUTS warm-up (default 1,000, "
                    "FitzHugh-Nagumo 300; --quick 300)")
    ap.add_argument("--draws", type=int, help="NUTS draws per chain (default 2,000, "
                    "FitzHugh-Nagumo 500; --quick 500)")
    ap.add_argument("--dense-mass", action="store_true",
                    help="NUTS with a dense mass matrix (NumPyro's default is diagonal)")
    ap.add_argument("--append", action="store_true",
                    help="keep the output's rows of other settings/methods (a run per setting)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--reps", type=int, help="simcalib runs per kernel (chain seeds; "
                    "ESS per CPU-s: their median; default 3, --quick 1)")
    ap.add_argument("--output", default=str(ROOT / "results" / "benchmarks" / "mcmc_peers.csv"))
    args = ap.parse_args(argv)
    missing = peers_available()
    if missing is not None:
        print(f"mcmc_peers: skipped: NumPyro/JAX not installed ({missing}); "
              "pip install -e '.[mcmc-peers]'")
        return 0
    import jax

    jax.config.update("jax_enable_x64", True)
    logging.basicConfig(level=logging.WARNING)
    limit_blas_threads(1)
    settings = args.settings or (["two_mass"] if args.quick else SETTINGS)
    iters = args.iterations or (2000 if args.quick else 10000)
    kernels = args.kernels or (["mwg", "mala", "hmc:2000:500"] if args.quick else
                               ["mwg", "mala:10000:2000", "hmc:3000:1000",
                                "hmc:3000:1000:logit"])
    t0 = time.perf_counter()
    rows = []
    kept = pd.DataFrame(columns=COLUMNS)
    if args.append and Path(args.output).exists():
        kept = pd.read_csv(args.output)
        kept = kept[~(kept.setting.isin(settings) & kept.method.isin(args.methods))]
    for s in settings:
        for m in args.methods:
            warmup, draws = NUTS_LENGTH.get(s, (300, 500) if args.quick else (1000, 2000))
            rows.extend(bench(s, m, kernels, iters, args.warmup or warmup, args.draws or draws,
                              args.seed, args.reps or (1 if args.quick else 3),
                              args.dense_mass))
            new = pd.DataFrame(rows, columns=COLUMNS)
            write_csv(pd.concat([kept, new]) if len(kept) else new, args.output)
    df = pd.DataFrame(rows, columns=COLUMNS)
    print()
    print(df[["setting", "method", "kernel", "simcalib_ess_per_cpu_s", "nuts_ess_per_cpu_s",
              "nuts_ess_per_cpu_s_no_compile", "ratio", "ratio_no_compile",
              "max_mean_diff_sd", "simcalib_rhat", "nuts_rhat"]].to_string(
        index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"total {time.perf_counter() - t0:.0f} s; wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
