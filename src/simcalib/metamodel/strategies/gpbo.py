"""``gpbo``: Gaussian-process Bayesian optimisation (BoTorch) on the actual error, r
runs, no metamodel: the strongest black-box peer of the metamodel strategies.

Why a GP and not only TPE: at r = 30 a GP on -log Delta is the usual first choice for
a smooth, expensive, low-dimensional objective, so it is the fair question "is the
metamodel worth its design?".  Setup as a user would write it: ``n_init``
scrambled Sobol points, then one point per step maximising LogExpectedImprovement of a
``SingleTaskGP`` fitted to -log(Delta) (outcome standardised), inputs scaled to the
unit box at the target's context (log inputs in log space).  Integer inputs are
relaxed to [lb - 1/2, ub + 1/2] and rounded, so each integer gets an equal share of
the box and the GP is fitted at the points actually run.  Linear constraints on
non-log inputs are passed to the acquisition optimiser; a candidate that still breaks
one (rounding, log inputs) or repeats a run is replaced by the best feasible new point
of a seeded random pool scored by the same acquisition, so no run is spent on an
infeasible point.  BoTorch is an optional extra: ``pip install 'simcalib[bo]'``.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.registry import strategy
from simcalib.seeds import int_seed, rng

log = logging.getLogger(__name__)

EXTRA = "pip install 'simcalib[bo]'  (BoTorch >= 0.18)"
_EPS = 1e-12  # Delta = 0 (an exact hit) stays finite on the log scale


def botorch_available() -> bool:
    """Whether BoTorch can be imported (checked without importing it: config
    validation runs at every Snakemake start and must stay light)."""
    return importlib.util.find_spec("botorch") is not None


def _missing(key: str) -> ConfigError:
    return ConfigError(key, f"strategy 'gpbo' needs BoTorch, an optional extra that is not "
                       f"installed: {EXTRA}; or remove 'gpbo' from the list")


def check_gpbo(settings: Mapping[str, Any], key: str) -> None:
    """BoTorch installed (the extra) and sane settings, before any simulator run."""
    g = settings["gpbo"]
    for k in ("n_init", "num_restarts", "raw_samples", "pool", "threads"):
        if int(g[k]) < 1:
            raise ConfigError(f"{key}.gpbo.{k}", f"must be >= 1, got {g[k]}")
    if not botorch_available():
        raise _missing(f"{key}.strategies")


class _Unit:
    """Tunables <-> the unit box at one context (log inputs in log space; integers
    relaxed by half a step on each side and rounded back)."""

    def __init__(self, p: TargetRun) -> None:
        self.space = p.space
        lo, hi = p.bounds()
        self.int = p.space.integer_mask
        self.log = p.space.log_mask
        self.lo_x, self.hi_x = lo.copy(), hi.copy()
        self.lo_x[self.int] = np.ceil(lo[self.int] - 1e-9)
        self.hi_x[self.int] = np.floor(hi[self.int] + 1e-9)
        a, b = self.lo_x.astype(float), self.hi_x.astype(float)
        a[self.int] -= 0.5
        b[self.int] += 0.5
        a[self.log], b[self.log] = np.log(a[self.log]), np.log(b[self.log])
        self.a, self.w = a, np.where(b > a, b - a, 1.0)

    def decode(self, U: np.ndarray) -> np.ndarray:
        v = self.a + np.clip(U, 0.0, 1.0) * self.w
        v[..., self.log] = np.exp(v[..., self.log])
        v[..., self.int] = np.round(v[..., self.int])
        return np.clip(v, self.lo_x, self.hi_x)

    def encode(self, X: np.ndarray) -> np.ndarray:
        v = np.array(X, dtype=float, copy=True)
        v[..., self.log] = np.log(v[..., self.log])
        return np.clip((v - self.a) / self.w, 0.0, 1.0)

    def constraints(self, context: Mapping[str, float]
                    ) -> tuple[list[tuple[np.ndarray, np.ndarray, float]],
                               list[tuple[np.ndarray, np.ndarray, float]]]:
        """The linear constraints in unit coordinates, as BoTorch's
        ``sum(coef * u[idx]) >= rhs`` (inequalities) and ``== rhs`` (equalities).
        A constraint on a log input is not linear there and is left to the
        feasibility filter."""
        names = self.space.tunable_names
        ineq, eq = [], []
        for con in self.space.constraints:
            idx, coef, rhs = [], [], float(con.rhs)
            linear = True
            for n, c in con.coefs.items():
                if n in names:
                    j = names.index(n)
                    if self.log[j]:
                        linear = False
                        break
                    idx.append(j)
                    coef.append(c * self.w[j])
                    rhs -= c * self.a[j]
                else:  # a context: a constant at this target
                    rhs -= c * float(context[n])
            if not linear or not idx:
                continue
            if con.sense == "==":
                eq.append((np.array(idx), np.array(coef), rhs))
            else:  # lhs <= rhs  ->  -lhs >= -rhs
                ineq.append((np.array(idx), -np.array(coef), -rhs))
        return ineq, eq


@strategy("gpbo", label="GP-BO", order=65, reads=("budget", "gpbo"), default=False,
          check=check_gpbo)
def strategy_gpbo(p: TargetRun) -> dict[str, Any]:
    """GP-BO on -log Delta, exactly ``budget`` simulator runs (see the module doc)."""
    try:
        import botorch  # noqa: F401
        import torch
    except ImportError:
        raise _missing("calibration.strategies") from None

    g = p.settings["gpbo"]
    counts = {"sobol": 0, "gp": 0, "pool": 0, "random": 0}
    old_threads = torch.get_num_threads()
    # GP fits on <= a few hundred points: one thread is fastest, more only contend
    torch.set_num_threads(int(g["threads"]))
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int_seed(p.seed, "gpbo", p.study.name, p.target.target_id))
            _optimise(p, g, counts)
    finally:
        torch.set_num_threads(old_threads)
    best_init = min((r for r in p.runs if r["phase"] == "sobol" and np.isfinite(r["error"])),
                    key=lambda r: r["error"], default=p.runs[0])
    x, err, status = choose(p, best_init["x"])
    return {"x": x, "error": err, "status": status, "anchor": best_init["x"],
            "anchor_kind": "best_sobol",
            "history": ";".join(f"{k}:{v}" for k, v in counts.items() if v)}


def _optimise(p: TargetRun, g: Mapping[str, Any], counts: dict[str, int]) -> None:
    """The Sobol start, then one GP step per remaining run (the budget ledger counts)."""
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.exceptions import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    tid = p.target.target_id
    unit = _Unit(p)
    d = len(p.space.tunable_names)
    ineq, eq = unit.constraints(p.target.context)
    pool_rng = rng(p.seed, "gpbo-pool", p.study.name, tid)
    dt = torch.float64

    def feasible(X: np.ndarray) -> np.ndarray:
        if not p.space.constraints:
            return np.ones(len(X), dtype=bool)
        return p.space.feasible(p.frame(X))

    def is_new(x: np.ndarray) -> bool:
        return not any(np.array_equal(x, r["x"]) for r in p.runs)

    # ---- initial design: scrambled Sobol, feasible points only ---------------------
    n0 = min(int(g["n_init"]), p.left)
    sobol = torch.quasirandom.SobolEngine(
        d, scramble=True, seed=int_seed(p.seed, "gpbo-sobol", p.study.name, tid) % (2**31))
    X0 = unit.decode(sobol.draw(max(8, 4 * n0), dtype=dt).numpy())
    X0 = X0[feasible(X0)][:n0]
    if len(X0) < n0:  # a tight feasible region: top up with feasible uniform points
        X0 = np.vstack([X0, p.sample(n0 - len(X0), p.bounds())])
    if n0:
        p.simulate(X0, "sobol")
        counts["sobol"] += n0
    # ---- sequential GP steps ---------------------------------------------------------
    bounds = torch.stack([torch.zeros(d, dtype=dt), torch.ones(d, dtype=dt)])
    t_ineq = [(torch.as_tensor(i), torch.as_tensor(c, dtype=dt), r) for i, c, r in ineq]
    t_eq = [(torch.as_tensor(i), torch.as_tensor(c, dtype=dt), r) for i, c, r in eq]
    while p.left > 0:
        X = np.array([r["x"] for r in p.runs])
        e = np.array([r["error"] for r in p.runs])
        ok = np.isfinite(e)
        if not ok.any():  # nothing to model yet: a feasible uniform point
            p.simulate(p.sample(1, p.bounds()), "random")
            counts["random"] += 1
            continue
        y = -np.log(np.maximum(e, _EPS))
        y[~ok] = y[ok].min()  # a failed run is as bad as the worst success
        tx = torch.as_tensor(unit.encode(X), dtype=dt)
        ty = torch.as_tensor(y[:, None], dtype=dt)
        model = SingleTaskGP(tx, ty, outcome_transform=Standardize(m=1))
        try:
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        except ModelFittingError as exc:  # keep the prior's hyperparameters
            log.warning("target %s: GP fit failed (%s); using the prior", tid, exc)
        acq = LogExpectedImprovement(model, best_f=ty.max())
        cand, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=int(g["num_restarts"]),
                                raw_samples=int(g["raw_samples"]),
                                inequality_constraints=t_ineq or None,
                                equality_constraints=t_eq or None)
        x = unit.decode(cand.detach().numpy().reshape(1, d))
        phase = "gp"
        if not (feasible(x)[0] and is_new(x[0])):
            x = _best_of_pool(p, unit, acq, int(g["pool"]), pool_rng, is_new, dt)
            phase = "pool"
        p.simulate(x, phase)
        counts[phase] += 1


def _best_of_pool(p: TargetRun, unit: _Unit, acq: Any, n: int, pool_rng: np.random.Generator,
                  is_new: Any, dt: Any) -> np.ndarray:
    """The feasible, not yet run point of a random pool with the largest acquisition."""
    import torch

    df = p.space.sample_tunables(n, pool_rng, "uniform", p.target.context, p.bounds())
    X = df[p.space.tunable_names].to_numpy(dtype=float)
    X = p.space.round_integers(X)
    keep = np.array([is_new(x) for x in X])
    if not keep.any():
        return X[:1]
    X = X[keep]
    with torch.no_grad():
        a = acq(torch.as_tensor(unit.encode(X), dtype=dt).unsqueeze(1)).numpy()
    return X[int(np.argmax(a))][None, :]
