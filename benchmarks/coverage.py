"""Does the metamodel posterior's uncertainty hold?  Coverage of known inputs, side by
side with sbi's neural posterior estimation (NPE), on the same design and targets
(issue 25).  And at 30 runs per target: simcalib's strategies against "NPE + 30
posterior draws, best kept".

Per study and seed (one library run, no workflow): a Sobol design of ``--n`` runs is
simulated, the study's metamodel trained on it (``train_metamodel``), and
``--targets`` synthetic targets drawn with known inputs x* (``make_targets``) and
simulated.  Then

* **simcalib**: ``simcalib.metamodel.posterior`` for all targets at once (the
  study's defaults: 4 chains, R-hat <= 1.01 and bulk ESS >= 400 or flagged);
* **NPE**: sbi's ``NPE`` (default MAF) trained once on the same design runs (inputs
  scaled to the unit box, log-aware; outputs standardised; prior uniform on the
  unit box), conditioned on each target's outputs, ``--npe-draws`` draws each.
  Contexts (Rosenbrock's a, b) are appended to the conditioning vector.

Coverage: the fraction of targets whose x*_i lies in the central credible interval
at 50/80/95 % (per input; ``input`` = the name) and, jointly, whose x* has a higher
posterior density than a share <= 1 - level of the draws (the rank of the truth's
density among the draws: simulation-based calibration's HPD coverage; ``input`` =
``joint``).  ``width`` is the median interval width in units of the input's range
(unit scale, log-aware; joint rows: NaN).

* **sequential** (``--sequential K``): on the first K targets, one at a time as a user
  with one data set runs it, the ``sequential`` strategy with ``--seq-budget`` runs
  and then its own posterior from those runs
  (:func:`simcalib.metamodel.posterior.sequential_posterior`: the refitted ensemble's
  spread and cross-fitted error, kappa calibrated on half the runs and checked on the
  other half); ``coverage_sequential_answers.csv`` keeps each answer, its distance to
  x* (unit box) and whether it lies inside its posterior.  ``--only-sequential`` skips
  the design posterior and NPE (the design then only gives the metamodel whose output
  scale Delta uses today: keep ``--n`` small).

* **the curve case** (``--studies epidemic_curve``, issue 42): the stochastic
  ``epidemic`` calibrated to its daily case curve only (every 4th day to day 120, 30
  points, population 100,000), each target one observed curve at held-out true
  inputs.  The design posterior and (``--sequential K``) ``sequential``'s posterior
  run once per error model of ``--curve-errors`` (``basis``: correlated errors
  through the basis weights plus per-point truncation error; ``independent``: the
  same variances per point, no correlation), the method named ``simcalib-basis``,
  ``sequential-independent``...  ``width_mean`` is the mean interval width (unit
  scale) beside the median ``width``.

Strategies at r = ``--runs`` (``--strategies``): ``adaptive``, ``posterior``
(r posterior draws simulated, best kept), ``pts``, and NPE + r (r NPE draws
simulated, best kept), each scored by Delta with the metamodel's output scale (the
stochastic epidemic: mean Delta of ``--rescore`` fresh replicates at the chosen point).

    python benchmarks/coverage.py --quick         # minutes: 1 seed, small n and targets
    python benchmarks/coverage.py                 # n 1,024, 60 targets, 3 studies
    python benchmarks/coverage.py --report-only   # tables and figure from the CSVs
    python benchmarks/coverage.py --only-sequential --sequential 100 --seq-budget 64 --n 64
    python benchmarks/coverage.py --studies epidemic_curve --n 256 --targets 100 --no-npe \
        --strategies --runs 0 --sequential 10 --seq-budget 64     # the curve case

Writes ``results/benchmarks/coverage.csv`` (study, method, input, nominal, empirical,
width, targets, ...), ``coverage_strategies.csv`` (per target), ``coverage_table.csv``
and ``coverage.png``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
# this file's name shadows the ``coverage`` package (numba, imported by ArviZ, imports
# it): take the script's own folder off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT / "src"))

from simcalib import io  # noqa: E402
from simcalib.config import load_config  # noqa: E402
from simcalib.metamodel.posterior import build, sample, settings, target_specs  # noqa: E402
from simcalib.metamodel.posterior.build import error_scale  # noqa: E402
from simcalib.metamodel.posterior.curves import CURVE_ERRORS  # noqa: E402
from simcalib.metamodel.posterior.noise import error_model  # noqa: E402
from simcalib.metamodel.strategies import calibrate, compute_anchors, get  # noqa: E402
from simcalib.metamodel.strategies.ledger import output_scale, read_targets  # noqa: E402
from simcalib.metamodel.strategies.runner import rescore  # noqa: E402
from simcalib.metamodel.strategies.settings import solver_options  # noqa: E402
from simcalib.metamodel.training import train_metamodel  # noqa: E402
from simcalib.seeds import int_seed, rng  # noqa: E402
from simcalib.study import Study, build_study  # noqa: E402
from simcalib.study.simulation import make_targets, simulate_rows  # noqa: E402

OUT = ROOT / "results" / "benchmarks"
LEVELS = (0.5, 0.8, 0.9, 0.95)
STUDIES = ("epidemic_mean", "epidemic", "rosenbrock")
#: the curve case (issue 42): the stochastic epidemic calibrated to its daily case curve
CURVE = "epidemic_curve"
#: its points: every 4th day to day 120 (30 points), population 100,000 (as
#: benchmarks/series_milp_size.py), the study's own 2 replicates a run
CURVE_DAYS = list(range(4, 121, 4))
log = logging.getLogger("coverage")


def curve_study(cfg: dict[str, Any]) -> Study:
    """The stochastic ``epidemic`` study calibrated to its case curve only (no scalar
    outputs): one observed curve per target, 30 points."""
    c = dict(build_study(cfg, "epidemic").cfg)
    c["series"] = {"cases": {"index": "day", "points": CURVE_DAYS}}
    c["outputs"] = []
    c["simulator"] = {**c["simulator"], "options": {**c["simulator"]["options"],
                                                    "population": 100_000,
                                                    "max_days": CURVE_DAYS[-1] + 4}}
    return Study(CURVE, c)


# ---- one study and seed: design, metamodel, targets ----------------------------------

def prepare(cfg: dict[str, Any], name: str, seed: int, n: int, n_targets: int
            ) -> dict[str, Any]:
    base = curve_study(cfg) if name == CURVE else build_study(cfg, name)
    study = Study(name, {**base.cfg, "targets": {**base.cfg["targets"], "n": n_targets}})
    levels = max(1, len(study.space.context_levels()))
    t0 = time.process_time()
    design = study.space.design(int(np.ceil(n / levels)), rng(seed, "design", name), "sobol")
    design.insert(0, "run_id", np.arange(len(design), dtype=np.int64))
    sim = simulate_rows(study, design, seed)
    sim_cpu = time.process_time() - t0
    tdf = simulate_rows(study, make_targets(study, seed), seed, stream="targets:targets",
                        id_column="target_id")
    tdf = tdf[tdf["status"] == "ok"].reset_index(drop=True)
    ok = sim[sim["status"] == "ok"].reset_index(drop=True)
    t0 = time.process_time()
    mm, metrics = train_metamodel(ok, study.input_names, study.outputs,
                                  study.cfg["metamodel"], seed, name)
    log.info("%s seed %d: design %d runs (%.0f CPU-s), metamodel min test R2 %.4f "
             "(%.0f CPU-s), %d targets", name, seed, len(ok), sim_cpu,
             metrics["min_test_r2"], time.process_time() - t0, len(tdf))
    return {"study": study, "design": ok, "targets": tdf, "mm": mm, "metrics": metrics}


# ---- coverage from draws --------------------------------------------------------------

def coverage_rows(study_name: str, method: str, seed: int, U: list[np.ndarray],
                  u_true: np.ndarray, names: list[str], rank: np.ndarray,
                  converged: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Per-input central-interval and joint density-rank coverage; U[t] are target
    t's draws on the unit scale (n_t, d), u_true (T, d), rank (T,) the share of draws
    with a higher density than the truth."""
    rows = []
    for lev in LEVELS:
        a = (1 - lev) / 2
        qs = np.array([np.quantile(u, [a, 1 - a], axis=0) for u in U])  # (T, 2, d)
        inside = (qs[:, 0] <= u_true) & (u_true <= qs[:, 1])
        width = qs[:, 1] - qs[:, 0]
        for j, nm in enumerate(names):
            rows.append({"study": study_name, "method": method, "seed": seed, "input": nm,
                         "nominal": lev, "empirical": float(inside[:, j].mean()),
                         "width": float(np.median(width[:, j])),
                         "width_mean": float(np.mean(width[:, j])), "targets": len(U)})
        rows.append({"study": study_name, "method": method, "seed": seed, "input": "joint",
                     "nominal": lev, "empirical": float((rank <= lev).mean()),
                     "width": np.nan, "targets": len(U),
                     "converged_share": (float(np.mean(converged)) if converged is not None
                                         else np.nan)})
    return rows


def simcalib_posterior(prep: dict[str, Any], cfg: dict[str, Any], seed: int,
                       curve_errors: str | None = None
                       ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, Any, float]:
    """The design posterior of every target; on a curve study with error model
    ``curve_errors`` (simcalib.metamodel.posterior.curves), kappa calibrated with it."""
    study, mm = prep["study"], prep["mm"]
    c = settings(cfg)
    model = error_model(mm, curve_errors)
    t0 = time.process_time()
    # the error model stands in for the metamodel: kappa is calibrated on it
    kappa, _ = error_scale(study.space, mm, c, seed, prep["design"], study.name,
                           model=model)
    kcpu = time.process_time() - t0
    specs = target_specs(prep["targets"], study.space, list(mm.output_names), c["obs_noise"],
                         kappa=kappa)
    post = build(study.space, mm, specs, c, model=model)
    draws = sample(post, c, rng(seed, "coverage-posterior", study.name))
    log.info("%s: kappa %g (%.1f CPU-s to calibrate), posterior %.1f CPU-s", study.name,
             kappa, kcpu, draws.cpu_seconds)
    T = len(specs)
    tt = np.arange(T)
    Xtrue = np.array([s.x_true for s in specs])
    lp_true = post.logp(np.hstack([post.to_u(Xtrue, tt), np.zeros((T, post.D - post.d))]), tt)
    U, rank = [], np.empty(T)
    for t in range(T):
        Ut = draws.U[:, :, t, : post.d].reshape(-1, post.d)
        # integer inputs: compare on the integer cells (the draws' cell centres)
        U.append(post.to_u(draws.flat(t), np.full(len(Ut), t)))
        lp = draws.logp[:, :, t].reshape(-1)
        rank[t] = float(np.mean(lp > lp_true[t]))
    u_true = post.to_u(Xtrue, tt)
    return U, u_true, rank, draws, draws.cpu_seconds + kcpu, kappa


def sequential_coverage(prep: dict[str, Any], pcfg: dict[str, Any], cfg: dict[str, Any],
                        seed: int, k: int, budget: int, modes: list[str | None]
                        ) -> Iterator[tuple[str | None, np.ndarray, np.ndarray, float, bool,
                                            float, dict[str, Any]]]:
    """``sequential`` on each of the first ``k`` targets alone (``budget`` runs), then
    its posterior from those runs, once per error model of ``modes`` (a curve study;
    ``[None]`` otherwise) on the same runs.  Yields per target and mode: the mode, the
    draws on the unit scale, the truth on it, its density rank, convergence, CPU
    seconds (the strategy's share included in the first mode's) and the answer's row
    (so that a long run's finished targets are written as they come)."""
    from simcalib.metamodel.posterior import sequential_posterior

    study, mm = prep["study"], prep["mm"]
    # the curve study is the epidemic's with a series: its solver set
    solver = solver_options(cfg, "epidemic" if study.name == CURVE else study.name)
    cal = {**study.cfg["calibration"], "budget": int(budget), "rescore": 0}
    ens = (cal.get("sequential") or {}).get("ensemble") or {}
    names = study.space.tunable_names
    for i in range(min(k, len(prep["targets"]))):
        one = prep["targets"].iloc[[i]].reset_index(drop=True)
        t0 = time.process_time()
        rec, runs = calibrate(study, mm, one, "sequential", cal, solver, seed)
        for mode in modes:
            res = sequential_posterior(study, runs, one, rec, pcfg, ens, seed,
                                       curve_errors=mode)
            post, draws = res.draws.post, res.draws
            X = draws.flat(0)
            zero = np.zeros(len(X), dtype=int)
            xt = post.targets[0].x_true
            u_true = post.to_u(xt[None, :], np.zeros(1, dtype=int))
            full = np.hstack([u_true, np.zeros((1, post.D - post.d))])
            lp_true = post.logp(full, np.zeros(1, dtype=int))[0]
            rank = float(np.mean(draws.logp[:, :, 0].reshape(-1) > lp_true))
            conv = bool(draws.converged[0])
            a = res.answers.iloc[0]
            xa = np.array([float(a[f"x_{n}"]) for n in names])
            ua = post.to_u(xa[None, :], np.zeros(1, dtype=int))[0]
            xs = np.array([float(rec.iloc[0][f"x_{n}"]) for n in names])
            us = post.to_u(xs[None, :], np.zeros(1, dtype=int))[0]
            ans = {"study": study.name, "seed": seed, "target_id": int(a["target_id"]),
                   "curve_errors": mode or "",
                   "answer_rule": a["answer_rule"], "kappa": res.meta["kappa"],
                   "distance": float(np.sqrt(np.mean((ua - u_true[0]) ** 2))),
                   # the strategy's own answer (its records: the best run, or on a
                   # stochastic simulator its ensemble's pick)
                   "distance_strategy": float(np.sqrt(np.mean((us - u_true[0]) ** 2))),
                   "inside_90": bool(a["inside_90"]),
                   "inside_joint_90": a["inside_joint_90"],
                   "why_outside": a["why_outside"], "converged": conv,
                   "runs": int(len(runs))}
            log.info("%s seed %d sequential target %d (%s): %d runs, kappa %g, answer %s at "
                     "distance %.3f, truth rank %.2f", study.name, seed, i, mode, len(runs),
                     res.meta["kappa"], a["answer_rule"], ans["distance"], rank)
            yield (mode, post.to_u(X, zero), u_true[0], rank, conv,
                   time.process_time() - t0, ans)
            t0 = time.process_time()


# ---- sbi NPE --------------------------------------------------------------------------

def npe_fit(prep: dict[str, Any], seed: int) -> Any:
    """sbi NPE (default MAF) on the design: theta = tunables on the unit scale at each
    row's context, x = standardised outputs (+ contexts)."""
    import torch
    from sbi.inference import NPE
    from sbi.utils import BoxUniform

    study, design = prep["study"], prep["design"]
    sp = study.space
    lo, hi = sp.bounds(design[sp.context_names]) if sp.contexts else (
        np.broadcast_to(sp.bounds({})[0], (len(design), len(sp.tunable_names))),
        np.broadcast_to(sp.bounds({})[1], (len(design), len(sp.tunable_names))))
    th = unit(sp, design[sp.tunable_names].to_numpy(float), lo, hi)
    Y = design[study.outputs].to_numpy(float)
    ym, ys = Y.mean(axis=0), Y.std(axis=0)
    ys = np.where(ys > 0, ys, 1.0)
    C = design[sp.context_names].to_numpy(float)
    xv = np.hstack([(Y - ym) / ys, C])
    torch.manual_seed(int_seed(seed, "npe", study.name))
    torch.set_num_threads(1)   # a shared 2-core machine: more threads only contend
    prior = BoxUniform(torch.zeros(th.shape[1]), torch.ones(th.shape[1]))
    from torch.utils.tensorboard import SummaryWriter

    # sbi's training logs go under results/ (git-ignored), not into the working directory
    writer = SummaryWriter(log_dir=str(OUT / "sbi-logs" / f"{study.name}_{seed}"))
    inf = NPE(prior=prior, show_progress_bars=False, summary_writer=writer)
    t0 = time.process_time()
    inf.append_simulations(torch.tensor(th, dtype=torch.float32),
                           torch.tensor(xv, dtype=torch.float32))
    est = inf.train(show_train_summary=False)
    cpu = time.process_time() - t0
    epochs = (getattr(inf, "_summary", {}) or {}).get("epochs_trained") or [-1]
    log.info("%s NPE: trained in %.0f CPU-s (%s epochs)", study.name, cpu, epochs[-1])
    return {"posterior": inf.build_posterior(est), "ym": ym, "ys": ys, "cpu": cpu}


def unit(sp: Any, X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Tunables to [0, 1] over per-row bounds (log-aware; integer cell centres)."""
    return sp.unit_of(X, lo, hi)


def npe_draws(fit: dict[str, Any], prep: dict[str, Any], n_draws: int, seed: int
              ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, list[np.ndarray]]:
    """Per target: NPE draws on the unit scale, the truth's density rank, raw draws."""
    import torch

    study, tdf = prep["study"], prep["targets"]
    sp = study.space
    U, R, raw = [], [], []
    utrue = []
    for _, row in tdf.iterrows():
        ctx = {c: float(row[c]) for c in sp.context_names}
        lo, hi = sp.bounds(ctx)
        y = (row[study.outputs].to_numpy(float) - fit["ym"]) / fit["ys"]
        xo = torch.tensor(np.concatenate([y, [ctx[c] for c in sp.context_names]]),
                          dtype=torch.float32)
        torch.manual_seed(int_seed(seed, "npe-draws", study.name, int(row["target_id"])))
        th = fit["posterior"].sample((n_draws,), x=xo, show_progress_bars=False)
        # unnormalised (no leakage correction): ranks compare densities at one x only
        lp = fit["posterior"].log_prob(th, x=xo, norm_posterior=False).numpy()
        xt = row[sp.tunable_names].to_numpy(float)[None, :]
        ut = unit(sp, xt, lo[None, :], hi[None, :])
        lpt = fit["posterior"].log_prob(torch.tensor(ut, dtype=torch.float32), x=xo,
                                        norm_posterior=False).numpy()
        u = th.numpy().astype(float)
        # map to the inputs (integers to their cell) and back, as simcalib's draws are
        X = sp._map_unit(np.clip(u, 0, 1 - 1e-12), np.broadcast_to(lo, u.shape),
                         np.broadcast_to(hi, u.shape))
        U.append(unit(sp, X, np.broadcast_to(lo, u.shape), np.broadcast_to(hi, u.shape)))
        raw.append(X)
        R.append(float(np.mean(lp > lpt[0])))
        utrue.append(ut[0])
    return U, np.array(utrue), np.array(R), raw


def best_of_draws(study: Any, t: Any, X: np.ndarray, r: int, seed: int, scale: np.ndarray,
                  outputs: list[str]) -> tuple[np.ndarray, float, int]:
    """"NPE + r": r of the posterior draws ``X`` (seeded per target) simulated at the
    target's context, the best kept.  Returns (its inputs, its Delta (inf when every
    run failed), failed runs); ``outputs`` is the order of ``t.z``."""
    pick = rng(seed, "npe-pick", study.name, t.target_id).choice(len(X), size=r, replace=False)
    df = pd.DataFrame(X[pick], columns=study.space.tunable_names)
    for c, v in t.context.items():
        df[c] = v
    df = df[study.input_names]
    df.insert(0, "run_id", np.arange(r, dtype=np.int64))
    res = simulate_rows(study, df, seed, stream=f"calib:npe:{t.target_id}")
    Y = res[outputs].to_numpy(float)
    okm = (res["status"] == "ok").to_numpy()
    err = np.where(okm, (np.abs(Y - t.z) / scale).sum(axis=1), np.inf)
    j = int(np.argmin(err))
    return X[pick][j], float(err[j]), int((~okm).sum())


# ---- strategies at r runs --------------------------------------------------------------

def adaptive_posterior(p: Any) -> dict[str, Any]:
    """The experiment "let adaptive place its trust region with the posterior": round 0
    is the OP point plus posterior draws (instead of uniform runs in the box around
    OP); the rounds after it are adaptive's, from the best run so far.  Registered
    here only (not in the library) until it is shown to help."""
    from simcalib.metamodel.strategies import adaptive as ad
    from simcalib.metamodel.strategies.ledger import choose
    from simcalib.metamodel.strategies.posterior import posterior_draws

    a = p.settings["adaptive"]
    sizes = ad.round_sizes(p.budget, int(a["rounds"]), min_size=2)
    radius = float(p.proximity)
    op0 = p.full_op()
    draws, _ = posterior_draws(p, sizes[0] - 1)
    p.simulate(np.vstack([op0[None, :], draws]), "round0")
    best = p.best_run()
    best_err = best["error"] if best is not None else np.inf
    anchor = best["x"] if best is not None else op0
    shift = ad._local_offset(p, anchor, p.mm, int(a["neighbours"]))
    for k, n_k in enumerate(sizes[1:], start=1):
        box = p.box(anchor, radius)
        x_op = p.op(box, f"adaptive{k}", shift=shift)
        p.simulate(np.vstack([x_op[None, :], p.sample(n_k - 1, box)]), f"round{k}")
        best = p.best_run()
        improved = best is not None and best["error"] < best_err - 1e-12
        if best is not None:
            if improved and ad.at_region_edge(best["x"], box, p.bounds()):
                radius = min(1.0, radius * float(a["grow"]))
            elif not improved:
                radius = max(float(a["min_proximity"]), radius * float(a["shrink"]))
            best_err = min(best_err, best["error"])
            anchor = best["x"]
            shift = ad._local_offset(p, anchor, p.mm, int(a["neighbours"]))
    x, e, status = choose(p, op0)
    return {"x": x, "error": e, "status": status, "anchor": op0, "anchor_kind": "op"}


def register_experiments() -> None:
    from simcalib.metamodel.strategies.registry import registry, strategy

    if "adaptive_post" not in registry():
        strategy("adaptive_post", label="Adaptive (posterior start)", order=75, min_budget=2,
                 reads=("budget", "proximity", "adaptive", "posterior"), uses_anchor=True,
                 default=False)(adaptive_posterior)


def strategies(prep: dict[str, Any], cfg: dict[str, Any], name: str, seed: int, r: int,
               methods: list[str], kappa: float, npe_raw: list[np.ndarray] | None, rescore_k: int
               ) -> list[dict[str, Any]]:
    study, mm, tdf = prep["study"], prep["mm"], prep["targets"]
    solver = solver_options(cfg, name)
    cal = {**study.cfg["calibration"], "budget": r, "rescore": 0,
           "posterior": {**(study.cfg["calibration"].get("posterior") or {}),
                         "error_scale": kappa}}
    scale = output_scale(mm)
    targets = {t.target_id: t for t in read_targets(tdf, study, mm)}
    rows = []
    anchors = None
    for m in methods:
        if get(m).uses_anchor and anchors is None:
            anchors = compute_anchors(study, mm, tdf, solver, seed)
        t0 = time.process_time()
        rec, _ = calibrate(study, mm, tdf, m, cal, solver, seed,
                           anchors=anchors if get(m).uses_anchor else None)
        cpu = (time.process_time() - t0) / max(1, len(rec))
        for _, rr in rec.iterrows():
            tid = int(rr["target_id"])
            x = np.array([rr[f"x_{p}"] for p in study.space.tunable_names])
            score = (rescore(study, mm, targets[tid], x, rescore_k, seed, scale)
                     if rescore_k else float(rr["error"]))
            rows.append({"study": name, "seed": seed, "target_id": tid, "method": m,
                         "runs": int(rr["runs"]), "error": float(rr["error"]),
                         "score": score, "cpu_s": cpu})
        log.info("%s seed %d %s: mean Delta %.4g", name, seed, m,
                 np.mean([q["score"] for q in rows if q["method"] == m]))
    if npe_raw is not None:
        for (tid, t), X in zip(targets.items(), npe_raw, strict=True):
            x, err, _ = best_of_draws(study, t, X, r, seed, scale, list(mm.output_names))
            score = rescore(study, mm, t, x, rescore_k, seed, scale) if rescore_k else err
            rows.append({"study": name, "seed": seed, "target_id": tid, "method": "npe+r",
                         "runs": r, "error": err, "score": score, "cpu_s": np.nan})
        log.info("%s seed %d npe+%d: mean Delta %.4g", name, seed, r,
                 np.mean([q["score"] for q in rows if q["method"] == "npe+r"]))
    return rows


# ---- report ----------------------------------------------------------------------------

def table(cov: pd.DataFrame) -> pd.DataFrame:
    """Per study, method, level, pooled over seeds (and over per-target rows, as the
    sequential posterior writes them), each part weighed by its targets: empirical
    coverage per input (mean over inputs), worst input, joint, the widths (median per
    part, and the mean), the targets and the binomial sd of a calibrated coverage at
    that many targets, sqrt(p (1 - p) / n)."""
    cov = cov.copy()
    if "width_mean" not in cov:
        cov["width_mean"] = np.nan
    keys = ["study", "method", "nominal", "input"]
    for c in ("empirical", "width", "width_mean"):
        cov[f"_{c}"] = cov[c] * cov["targets"]
    g = cov.groupby(keys)
    n = g["targets"].sum()
    pooled = pd.DataFrame({c: g[f"_{c}"].sum(min_count=1) / n
                           for c in ("empirical", "width", "width_mean")})
    pooled["targets"] = n
    pooled = pooled.reset_index()
    per = pooled[pooled["input"] != "joint"].groupby(["study", "method", "nominal"]).agg(
        empirical_inputs=("empirical", "mean"), worst_input=("empirical", "min"),
        width=("width", "mean"), width_mean=("width_mean", "mean"))
    joint = pooled[pooled["input"] == "joint"].groupby(["study", "method", "nominal"]).agg(
        empirical_joint=("empirical", "mean"), targets=("targets", "sum"))
    out = per.join(joint).reset_index()
    out["binom_sd"] = np.sqrt(out["nominal"] * (1 - out["nominal"]) / out["targets"])
    return out


def figure(cov: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    studies = list(dict.fromkeys(cov["study"]))
    fig, axes = plt.subplots(1, len(studies), figsize=(4.2 * len(studies), 4), squeeze=False)
    for ax, s in zip(axes[0], studies, strict=True):
        sub = cov[cov["study"] == s]
        for (m, inp), g in sub.groupby(["method", "input"]):
            g = g.groupby("nominal")["empirical"].mean()
            joint = inp == "joint"
            ax.plot(g.index, g.values, "o-" if joint else ".-", lw=2 if joint else 0.6,
                    alpha=1 if joint else 0.35,
                    color={"simcalib": "#3182bd", "sequential": "#31a354"}.get(m, "#e6550d"),
                    label=f"{m} (joint)" if joint else None)
        ax.plot([0.4, 1], [0.4, 1], "k--", lw=0.8)
        ax.fill_between([0.4, 1], [0.35, 0.95], [0.45, 1.05], color="0.85", alpha=0.5)
        ax.set_xlim(0.45, 1)
        ax.set_ylim(0, 1.02)
        ax.set_title(s)
        ax.set_xlabel("nominal")
        ax.set_ylabel("empirical coverage of the true inputs")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Coverage (thin: per input; thick: joint density rank; band: +-5 pp)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def merge(tags: list[str], strategy_tags: list[str]) -> None:
    """coverage.csv and coverage_strategies.csv from the parts of parallel processes
    (``--tag``)."""
    if tags:
        io.write_csv(pd.concat([io.read_csv(OUT / f"coverage{t}.csv") for t in tags],
                               ignore_index=True), OUT / "coverage.csv")
    if strategy_tags:
        io.write_csv(pd.concat([io.read_csv(OUT / f"coverage_strategies{t}.csv")
                                for t in strategy_tags], ignore_index=True),
                     OUT / "coverage_strategies.csv")


def report() -> None:
    cov = io.read_csv(OUT / "coverage.csv")
    t = table(cov)
    io.write_csv(t, OUT / "coverage_table.csv")
    print(t.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    figure(cov, OUT / "coverage.png")
    sp = OUT / "coverage_strategies.csv"
    if sp.is_file():
        s = io.read_csv(sp)
        g = s.groupby(["study", "method"])["score"].agg(["mean", "median", "count"])
        # paired ratio to NPE + r over the same targets: mean Delta(npe+r) / mean Delta(m)
        piv = s.pivot_table(index=["study", "seed", "target_id"], columns="method",
                            values="score")
        if "npe+r" in piv:
            for m in [c for c in piv.columns if c != "npe+r"]:
                for study, sub in piv.groupby(level="study"):
                    ok = sub[[m, "npe+r"]].dropna()
                    if len(ok):
                        g.loc[(study, m), "npe_over_method"] = (ok["npe+r"].mean()
                                                                / ok[m].mean())
                        g.loc[(study, m), "wins_vs_npe"] = float((ok[m] < ok["npe+r"]).mean())
        io.write_csv(g.reset_index(), OUT / "coverage_strategies_table.csv")
        print(g.to_string(float_format=lambda v: f"{v:.4g}"))


def one_seed(a: argparse.Namespace, cfg: dict[str, Any], name: str, seed: int,
             have_sbi: bool, cov_rows: list[dict[str, Any]],
             strat_rows: list[dict[str, Any]], seq_rows: list[dict[str, Any]]) -> None:
    """One study and seed: the methods asked for, their rows appended and written."""
    stochastic = name in ("epidemic", CURVE)
    own = "epidemic" if name == CURVE else name
    pcfg = (cfg["studies"][own]["calibration"] or {}).get("posterior") or {}
    suffix = ""
    if a.error_scale is not None:   # kappa fixed: what an error model gives uncalibrated
        pcfg = {**pcfg, "error_scale": a.error_scale}
        suffix = f"-kappa{a.error_scale:g}"
    prep = prepare(cfg, name, seed, a.n, a.targets)
    names = prep["study"].space.tunable_names
    # a curve study: one posterior per error model (docs/strategies.md, "Posterior on
    # curves"), the method named after it
    modes = a.curve_errors if name == CURVE else [None]
    if a.sequential:
        # one row set per target (targets = 1): the table pools them; written as each
        # target finishes, so a run cut short keeps what it did
        for mode, u, ut, rank, conv, cpu, ans in sequential_coverage(
                prep, pcfg, cfg, seed, a.sequential, a.seq_budget, modes):
            cov_rows += [{**q, "cpu_s": cpu, "target_id": ans["target_id"]}
                         for q in coverage_rows(
                name, "sequential" + (f"-{mode}" if mode else "") + suffix, seed, [u],
                ut[None, :],
                names, np.array([rank]), np.array([conv]))]
            seq_rows.append(ans)
            io.write_csv(pd.DataFrame(cov_rows), OUT / f"coverage{a.tag}.csv")
            io.write_csv(pd.DataFrame(seq_rows),
                         OUT / f"coverage_sequential_answers{a.tag}.csv")
    if a.only_sequential:
        return
    if a.no_coverage:   # strategies only: kappa is all they need
        kappa, _ = error_scale(prep["study"].space, prep["mm"], settings(pcfg), seed,
                               prep["design"], name)
    else:
        for mode in modes:
            U, ut, rank, draws, cpu, kappa = simcalib_posterior(prep, pcfg, seed, mode)
            log.info("%s seed %d simcalib posterior (%s): %d targets in %.1f CPU-s, %d "
                     "converged, kappa %g", name, seed, mode, len(U), cpu,
                     int(draws.converged.sum()), kappa)
            cov_rows += [{**q, "cpu_s": cpu, "kappa": kappa} for q in coverage_rows(
                name, "simcalib" + (f"-{mode}" if mode else "") + suffix, seed, U, ut, names,
                rank, draws.converged)]
            io.write_csv(pd.DataFrame(cov_rows), OUT / f"coverage{a.tag}.csv")
    raw = None
    if have_sbi:
        fit = npe_fit(prep, seed)
        t0 = time.process_time()
        Un, utn, rank_n, raw = npe_draws(fit, prep, a.npe_draws, seed)
        cpu_n = fit["cpu"] + time.process_time() - t0
        log.info("%s seed %d NPE: trained and sampled in %.1f CPU-s", name, seed,
                 cpu_n)
        if not a.no_coverage:
            cov_rows += [{**q, "cpu_s": cpu_n} for q in coverage_rows(
                name, "npe", seed, Un, utn, names, rank_n)]
    if cov_rows:
        io.write_csv(pd.DataFrame(cov_rows), OUT / f"coverage{a.tag}.csv")
    if a.strategies or raw is not None and a.runs:
        k = min(a.strategy_targets, len(prep["targets"]))
        sub = {**prep, "targets": prep["targets"].head(k)}
        strat_rows += strategies(sub, cfg, name, seed, a.runs, a.strategies, kappa,
                                 raw[:k] if raw is not None else None,
                                 a.rescore if stochastic else 0)
        io.write_csv(pd.DataFrame(strat_rows), OUT / f"coverage_strategies{a.tag}.csv")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", nargs="+", default=list(STUDIES))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--seed-offset", type=int, default=0)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--targets", type=int, default=60)
    ap.add_argument("--npe-draws", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--strategy-targets", type=int, default=10,
                    help="targets (the first ones) that the strategies run on")
    ap.add_argument("--strategies", nargs="*", default=["adaptive", "posterior"])
    ap.add_argument("--rescore", type=int, default=5,
                    help="fresh replicates re-scoring a stochastic study's chosen points")
    ap.add_argument("--no-npe", action="store_true")
    ap.add_argument("--sequential", type=int, default=0, metavar="K",
                    help="the sequential strategy's own posterior on the first K targets")
    ap.add_argument("--seq-budget", type=int, default=64,
                    help="runs of the sequential strategy per target")
    ap.add_argument("--only-sequential", action="store_true",
                    help="only the sequential posterior (no design posterior, no NPE)")
    ap.add_argument("--no-coverage", action="store_true",
                    help="strategies only (kappa is still calibrated)")
    ap.add_argument("--quick", action="store_true",
                    help="minutes: n 512, 50 targets, NPE 1,000 draws, no strategies")
    ap.add_argument("--curve-errors", nargs="+", default=["basis", "independent"],
                    choices=list(CURVE_ERRORS),
                    help=f"on the curve study ({CURVE}): the posteriors' error models "
                         "(default: basis and its baseline independent; scaled on request)")
    ap.add_argument("--error-scale", type=float, default=None,
                    help="kappa fixed at this value instead of the study's setting (the "
                         "methods are named with a -kappa<value> suffix)")
    ap.add_argument("--tag", default="", help="suffix of the output CSVs (parallel parts)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--from-tags", nargs="*", default=[],
                    help="with --report-only: merge coverage<TAG>.csv parts first")
    ap.add_argument("--strategy-tags", nargs="*", default=[],
                    help="with --report-only: merge coverage_strategies<TAG>.csv parts")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if a.report_only:
        merge(a.from_tags, a.strategy_tags)
        report()
        return 0
    if a.quick:
        a.n, a.targets, a.npe_draws, a.strategies, a.runs = 512, 50, 1000, [], 0
    if a.only_sequential:
        a.no_npe, a.no_coverage, a.strategies = True, True, []
        a.targets = max(a.sequential, 1)
    try:
        import sbi  # noqa: F401
        have_sbi = not a.no_npe
    except ImportError:
        have_sbi = False
        log.warning("sbi is not installed (pip install 'simcalib[sbi]'): NPE is skipped")
    cfg = load_config(ROOT / "config" / "config.yaml")
    register_experiments()
    OUT.mkdir(parents=True, exist_ok=True)
    cov_rows: list[dict[str, Any]] = []
    strat_rows: list[dict[str, Any]] = []
    seq_rows: list[dict[str, Any]] = []
    for name in a.studies:
        for seed in range(cfg["seed"] + a.seed_offset, cfg["seed"] + a.seed_offset + a.seeds):
            one_seed(a, cfg, name, seed, have_sbi, cov_rows, strat_rows, seq_rows)
    if not a.tag:
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
