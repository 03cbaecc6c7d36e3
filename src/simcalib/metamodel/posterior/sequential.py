"""``sequential``'s own posterior, from the same runs (issue 41; docs/posterior.md).

For every target, p(x | z) ~ prior(x) N(z; E(x), Sigma(x)) with E the mean of an
ensemble refitted on every usable run of the strategy (the strategy's fitting
function and ``calibration.sequential.ensemble`` settings) and

    Sigma(x) = kappa (spread(x) + R) + Sigma_obs

* spread(x): the members' covariance at x, the emulator's uncertainty where the runs
  are thin;
* R: the second moment of cross-fitted held-out residuals (2 folds): the emulator's
  error near the runs and, on a stochastic simulator, the run-to-run noise (never less
  than the replicate variance where points were run twice);
* Sigma_obs: the targets' ``sd_<output>`` (observed targets), or an inferred scale;
* kappa: ``calibration.posterior.error_scale``; ``calibrate`` picks it by
  simulation-based calibration with the fold-0 ensemble on the fold-1 runs as
  pseudo-targets (known inputs), then checks the joint coverage at that kappa with
  the fold-1 ensemble on the fold-0 runs, which the choice never saw (``kappa_check``
  in posterior.json).  Pseudo-targets are runs, which cluster where ``sequential``
  searched: the check speaks for the region around the targets, not the whole box.

The answer: on a deterministic simulator the strategy's answer (its best run); on a
stochastic one the posterior's central point (the median of each input) when it lies
inside the joint 90 % region and satisfies the constraints, else the run the posterior
ranks best (the highest posterior density among the target's runs).  Either way it is
checked against the posterior (:mod:`.agreement`) and the result row says why where it
lies outside.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.metamodel.curves import has_series
from simcalib.metamodel.posterior import agreement
from simcalib.metamodel.posterior.build import run, settings, target_specs
from simcalib.metamodel.posterior.curves import curve_terms
from simcalib.metamodel.posterior.emulator import Emulator, fit_curve_emulator, fit_emulator
from simcalib.metamodel.posterior.sampler import Draws
from simcalib.metamodel.posterior.summary import summarize, unidentified_inputs

log = logging.getLogger(__name__)

#: levels of the held-out coverage check
CHECK_LEVELS = (0.5, 0.8, 0.9, 0.95)
#: the wording of "chosen by a different criterion" per answer rule (agreement.explain)
CRITERIA = {
    "best run": "the point was chosen by a different criterion: the run of smallest misfit, "
                "where the posterior weighs every run with the emulator's error; on a "
                "deterministic simulator that run is exact, the posterior's width is the "
                "emulator's doubt",
    "the run the posterior ranks best": "no run lies inside the posterior's 90 % region "
                                        "and its median breaks it (a curved posterior): "
                                        "the answer is the closest run",
}
#: kappa grid: below 1 too, because the fold ensembles' residuals (each trained on half
#: the runs) overstate the error of the ensemble trained on all of them
KAPPA_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


@dataclass
class SequentialPosterior:
    """What :func:`sequential_posterior` returns: the summary table (as
    ``posterior_summary.csv``), the answers with their agreement columns (as
    ``answer.csv``), posterior.json's contents, the draws and the emulator."""

    summary: pd.DataFrame
    answers: pd.DataFrame
    meta: dict[str, Any]
    draws: Draws
    emulator: Emulator
    kappa_table: pd.DataFrame | None


def _runs_at_contexts(runs: pd.DataFrame, targets: pd.DataFrame, space: Any,
                      outputs: list[str]) -> pd.DataFrame:
    """The usable runs (ok, finite outputs) with their target's context columns."""
    need = ["target_id", "status", *space.tunable_names, *outputs]
    missing = [c for c in need if c not in runs.columns]
    if missing:
        raise DataError("runs", f"the sequential runs lack column(s) {missing}")
    ok = runs[(runs["status"].astype(str) == "ok")
              & np.isfinite(runs[outputs].to_numpy(dtype=float)).all(axis=1)].copy()
    ctx = list(space.context_names)
    if ctx:
        t = targets.set_index("target_id")
        unknown = sorted(set(ok["target_id"]) - set(t.index))
        if unknown:
            raise DataError("runs", f"runs of target(s) {unknown[:5]} absent from the targets "
                            "table: the runs and targets are of different calibrations")
        for c in ctx:
            if c not in ok.columns:
                ok[c] = t.loc[ok["target_id"], c].to_numpy(dtype=float)
    return ok.reset_index(drop=True)


def _stochastic(declared: bool | None, emu: Emulator) -> tuple[bool, str]:
    """Stochastic as declared (or known for a built-in simulator), else as the runs
    show (a point run twice with different outputs), else deterministic."""
    if declared is not None:
        return bool(declared), "declared (noise.stochastic or the built-in simulator)"
    if emu.replicate_points:
        return emu.stochastic_evidence, (f"measured: {emu.replicate_points} point(s) run more "
                                         "than once " + ("gave different outputs"
                                                         if emu.stochastic_evidence
                                                         else "gave equal outputs"))
    return False, "unknown (no point was run twice): taken as deterministic"


def _kappa(space: Any, emu: Emulator, c: Mapping[str, Any], seed: int, study: str
           ) -> tuple[float, pd.DataFrame | None, dict[str, Any] | None]:
    """kappa (a number, or calibrated on fold-1 runs with the fold-0 ensemble), its
    table and the check on the fold-0 runs with the fold-1 ensemble."""
    from simcalib.metamodel.posterior.scale import coverage_table, joint_ranks
    from simcalib.seeds import rng

    if c["error_scale"] != "calibrate":
        return float(c["error_scale"]), None, None
    rows, fold = emu.rows, emu.fold_of
    rank, kap, m = joint_ranks(space, emu.folds[0], rows[fold == 1], KAPPA_GRID, c,
                               rng(seed, "seq-posterior-kappa", study))
    table = coverage_table(rank, kap, KAPPA_GRID, m)
    # the grid value of least miss (ties: the kappa closest to 1), not the design
    # route's crossing of the signed error (scale.choose): these pseudo-targets are the
    # search's own runs, clustered near its best ones, and their ranks are no shifted
    # uniform; on epidemic_mean (32 runs a target, 8 targets) the crossing chose kappa
    # 3-4x smaller and covered the true inputs no better (joint 0.38 / 0.62 / 0.75 /
    # 0.88 at 50 / 80 / 90 / 95 % against 0.38 / 0.75 / 0.75 / 0.88; docs/benchmarks.md)
    miss = table.groupby("kappa", sort=True)["miss"].first()
    order = np.lexsort((np.abs(np.log(miss.index.to_numpy(dtype=float))), miss.to_numpy()))
    kappa = float(miss.index[int(order[0])])
    rank2, _, m2 = joint_ranks(space, emu.folds[1], rows[fold == 0], [kappa], c,
                               rng(seed, "seq-posterior-kappa-check", study))
    check = {"rows": int(m2), "kappa": kappa,
             "joint_coverage": {f"{lev:g}": float((rank2 <= lev).mean())
                                for lev in CHECK_LEVELS},
             "what": "joint coverage of held-out runs (fold 0, ensemble of fold 1) at the "
                     "kappa chosen on the other fold"}
    log.info("%s sequential posterior: kappa %g (calibrated on %d runs); check on %d other "
             "runs: joint coverage %s", study, kappa, m, m2, check["joint_coverage"])
    return kappa, table, check


def _answer(t: int, draws: Draws, table: pd.DataFrame, rec: pd.Series | None,
            own_runs: pd.DataFrame, stochastic: bool) -> tuple[np.ndarray, str, float]:
    """(answer, rule, its log density) of target ``t`` (module doc)."""
    post = draws.post
    names = post.space.tunable_names
    tid = post.targets[t].target_id
    lp_draws = draws.logp[:, :, t].reshape(-1)
    if not stochastic and rec is not None and all(f"x_{n}" in rec for n in names):
        x = np.array([float(rec[f"x_{n}"]) for n in names])
        if np.isfinite(x).all():
            return x, "best run (deterministic simulator)", _logp(draws, t, x)
    rows = table[(table["target_id"] == tid) & table["input"].isin(names)].set_index("input")
    med = rows.loc[names, "q50"].to_numpy(dtype=float, copy=True)
    ints = np.asarray(post.space.integer_mask, dtype=bool)
    med[ints] = np.round(med[ints])   # a median between two integers: a value the input takes
    lp_med = _logp(draws, t, med)
    if agreement.inside_hpd(lp_med, lp_draws):
        return med, "posterior median", lp_med
    X = own_runs[names].to_numpy(dtype=float)
    best = best_run_by_density(draws, t, X)
    if best is not None:
        return X[best[0]], "the run the posterior ranks best (its median lies off the " \
            "joint 90 % region)", best[1]
    x, lp = highest_density_draw(draws, t)
    return x, "the posterior's highest-density draw", lp


def best_run_by_density(draws: Draws, t: int, X: np.ndarray) -> tuple[int, float] | None:
    """(row, log density) of the row of ``X`` (tunables) where target ``t``'s posterior
    density is highest; None when no row has a finite density."""
    lps = _logp_rows(draws, t, X) if len(X) else np.empty(0)
    if not np.isfinite(lps).any():
        return None
    i = int(np.nanargmax(np.where(np.isfinite(lps), lps, -np.inf)))
    return i, float(lps[i])


def highest_density_draw(draws: Draws, t: int) -> tuple[np.ndarray, float]:
    """Target ``t``'s draw of highest posterior density and that density."""
    c, n = np.unravel_index(int(np.argmax(draws.logp[:, :, t])), draws.logp.shape[:2])
    return np.asarray(draws.X[c, n, t]), float(draws.logp[c, n, t])


def _logp(draws: Draws, t: int, x: np.ndarray) -> float:
    """Posterior log density of target ``t`` at tunables ``x`` (an inferred tau at its
    posterior median)."""
    return float(_logp_rows(draws, t, np.asarray(x, dtype=float)[None, :])[0])


def _logp_rows(draws: Draws, t: int, X: np.ndarray) -> np.ndarray:
    """:func:`_logp` at every row of ``X`` in one evaluation of the posterior (one
    emulator pass for a target's runs, not one per run)."""
    post = draws.post
    X = np.atleast_2d(np.asarray(X, dtype=float))
    tt = np.full(len(X), t)
    U = post.to_u(X, tt)
    if post.D > post.d:
        v = np.median(draws.U[:, :, t, post.d]) if post.infer[t] else 0.0
        U = np.hstack([U, np.full((len(X), 1), v)])
    return np.asarray(post.logp(U, tt), dtype=float)


def _answers(draws: Draws, table: pd.DataFrame, records: pd.DataFrame | None,
             runs: pd.DataFrame, stochastic: bool) -> pd.DataFrame:
    post = draws.post
    names = post.space.tunable_names
    rec_by = (records.set_index("target_id") if records is not None and len(records)
              else None)
    out = []
    for t, spec in enumerate(post.targets):
        tid = spec.target_id
        rec = rec_by.loc[tid] if rec_by is not None and tid in rec_by.index else None
        if isinstance(rec, pd.DataFrame):
            rec = rec.iloc[0]
        own = runs[runs["target_id"] == tid]
        x, rule, lp = _answer(t, draws, table, rec, own, stochastic)
        rows = table[(table["target_id"] == tid) & table["input"].isin(names)]
        rows = rows.set_index("input")
        ag = agreement.check(dict(zip(names, x, strict=True)),
                             {n: (float(rows.at[n, "q5"]), float(rows.at[n, "q95"]))
                              for n in names},
                             {n: float(rows.at[n, "prior_sd_ratio"]) for n in names},
                             draws.flat(t), names,
                             agreement.inside_hpd(lp, draws.logp[:, :, t].reshape(-1)),
                             "highest density", CRITERIA.get(rule.split(" (")[0], ""))
        row: dict[str, Any] = {"target_id": tid, **spec.context, "answer_rule": rule}
        row.update({f"x_{n}": float(v) for n, v in zip(names, x, strict=True)})
        if rec is not None:
            row.update({f"strategy_x_{n}": float(rec[f"x_{n}"]) for n in names
                        if f"x_{n}" in rec})
        if spec.x_true is not None:
            row.update({f"true_{n}": float(v) for n, v in zip(names, spec.x_true,
                                                              strict=True)})
        row.update(ag.columns())
        row["converged"] = bool(draws.converged[t])
        out.append(row)
    return pd.DataFrame(out)


def sequential_posterior(study: Any, runs: pd.DataFrame, targets: pd.DataFrame,
                         records: pd.DataFrame | None = None,
                         cfg: Mapping[str, Any] | None = None,
                         ensemble: Mapping[str, Any] | None = None, seed: int = 0,
                         stochastic: bool | None = None,
                         out_dir: str | Path | None = None,
                         curve_errors: str | None = None) -> SequentialPosterior:
    """Every target's posterior over its tunable inputs from ``sequential``'s ``runs``
    (its runs CSV: target_id, status, tunables, outputs), conditioned on ``targets``
    (outputs, contexts, ``sd_``/``weight_`` columns, true inputs for simulated
    targets); ``records`` (the strategy's records) give the deterministic answer.
    ``cfg``: ``calibration.posterior``; ``ensemble``:
    ``calibration.sequential.ensemble``; ``stochastic``: None = as the study's config
    or the runs say.  With ``out_dir`` the files of :func:`write` are written.  On a
    study with series outputs the ensemble is fitted on each series' basis weights and
    the likelihood covers every observed point (:mod:`.curves`; ``curve_errors``: its
    error model, default ``calibration.posterior.curve_errors``)."""
    from simcalib.metamodel.ensemble import EnsembleSettings
    from simcalib.study.noise import known_stochastic

    t_cpu = time.process_time()
    c = settings(cfg)
    space = study.space
    outputs = list(study.outputs)
    rows = _runs_at_contexts(runs, targets, space, outputs)
    es = EnsembleSettings.from_config(ensemble, "calibration.sequential.ensemble")
    if has_series(outputs):
        emu = fit_curve_emulator(rows, space.input_names, outputs, es, seed, study.name,
                                 study.cfg.get("metamodel"),
                                 curve_errors or c["curve_errors"])
    else:
        emu = fit_emulator(rows, space.input_names, outputs, es, seed, study.name)
    declared = stochastic if stochastic is not None else known_stochastic(study.cfg)
    noisy, how = _stochastic(declared, emu)
    kappa, ktable, kcheck = _kappa(space, emu, c, seed, study.name)
    specs = target_specs(targets, space, outputs, c["obs_noise"], source="targets",
                         kappa=kappa)
    draws = run(space, emu.model, specs, c, seed, study.name, "sequential",
                model=emu.model)
    table = summarize(draws)
    answers = _answers(draws, table, records, rows, noisy)
    meta = _meta(study.name, draws, table, answers, emu, kappa, ktable, kcheck, noisy, how,
                 es, len(runs), time.process_time() - t_cpu)
    res = SequentialPosterior(table, answers, meta, draws, emu, ktable)
    if out_dir is not None:
        write(res, out_dir, c, study.name)
    return res


def _meta(study: str, draws: Draws, table: pd.DataFrame, answers: pd.DataFrame,
          emu: Emulator, kappa: float, ktable: pd.DataFrame | None,
          kcheck: dict[str, Any] | None, noisy: bool, how: str, es: Any, n_runs: int,
          cpu: float) -> dict[str, Any]:
    outs = emu.model.output_names
    lay = getattr(emu.model, "layout", None)
    # the residual and replicate terms live where the ensemble was fitted: on a curve
    # study the scalars and basis weights
    red = list(lay.reduced) if lay is not None else outs
    X = emu.rows[emu.model.input_names].to_numpy(dtype=float)
    spread = np.sqrt(np.diagonal(emu.model.spread_cov(X), axis1=1, axis2=2))
    outside = answers[~answers["inside_90"].astype(bool)
                      | (answers["inside_joint_90"] == False)]  # noqa: E712
    terms = {"spread_sd_median_at_runs": dict(zip(outs, np.median(spread, axis=0).tolist(),
                                                  strict=True)),
             "residual_sd": dict(zip(red, np.sqrt(np.diag(emu.residual_cov)).tolist(),
                                     strict=True)),
             "replicate_noise_sd": (dict(zip(red, np.sqrt(emu.replicate_var).tolist(),
                                             strict=True))
                                    if emu.replicate_var is not None else None),
             "observation_sd": bool(np.any([s.obs_var.any() for s in draws.post.targets])),
             "inferred_scale_targets": int(sum(s.infer_scale for s in draws.post.targets))}
    if lay is not None:
        terms["curves"] = curve_terms(emu.model)
    conv = draws.converged
    trust = []
    if not conv.all():
        trust.append(f"{int((~conv).sum())} target(s) not converged (R-hat, bulk ESS): their "
                     "intervals are unreliable")
    if len(outside):
        trust.append(f"{len(outside)} answer(s) outside their posterior's 90 % region: see "
                     "why_outside in answer.csv")
    cov = (kcheck or {}).get("joint_coverage", {})
    if cov and abs(cov.get("0.9", 0.9) - 0.9) > 0.2:
        trust.append(f"held-out joint coverage at 90 % is {cov['0.9']:.2f}: the intervals are "
                     + ("too narrow" if cov["0.9"] < 0.9 else "too wide"))
    return {
        "study": study, "strategy": "sequential", "targets": len(draws.post.targets),
        "runs": int(n_runs), "usable_runs": int(len(emu.rows)),
        "converged_targets": int(conv.sum()),
        "unconverged_targets": [s.target_id for s, ok in zip(draws.post.targets, conv,
                                                             strict=True) if not ok],
        "r_hat_max": float(np.nanmax(np.where(draws.diag_mask, draws.r_hat, np.nan))),
        "ess_bulk_min": float(np.nanmin(np.where(draws.diag_mask, draws.ess_bulk, np.nan))),
        "iterations": int(draws.iterations), "chains": int(draws.settings["chains"]),
        "sigma_source": emu.model.source, "error_terms": terms,
        "kappa": kappa, "kappa_calibrated": ktable is not None, "kappa_check": kcheck,
        "stochastic": bool(noisy), "stochastic_source": how,
        "answer_rules": answers["answer_rule"].value_counts().to_dict(),
        "answers_outside": [int(t) for t in outside["target_id"]],
        "unidentified": unidentified_inputs(table),
        "ensemble": {"members": es.members, "hidden": list(es.hidden),
                     "oob_r2_min": emu.model.info.get("min_oob_r2")},
        "trust": trust, "cpu_seconds": round(cpu, 3),
        "sampling_cpu_seconds": round(draws.cpu_seconds, 3),
    }


def write(res: SequentialPosterior, out_dir: str | Path, cfg: Mapping[str, Any],
          study: str) -> None:
    """posterior_summary.csv, answer.csv, posterior.json, kappa.csv, intervals.png,
    targets/target_<id>.nc and pair plots of the first ``pair_plots`` targets."""
    from simcalib import io, timing
    from simcalib.metamodel.posterior.plots import intervals_figure, pair_plot
    from simcalib.metamodel.posterior.summary import write_netcdfs

    out = Path(out_dir)
    (out / "targets").mkdir(parents=True, exist_ok=True)
    draws = res.draws
    space = draws.post.space
    names = space.tunable_names
    io.write_csv(res.summary, out / "posterior_summary.csv")
    io.write_csv(res.answers, out / "answer.csv")
    if res.kappa_table is not None:
        io.write_csv(res.kappa_table, out / "kappa.csv")
    write_netcdfs(draws, out / "targets", int(cfg["save_draws"]))
    ans = {int(r["target_id"]): {n: float(r[f"x_{n}"]) for n in names}
           for _, r in res.answers.iterrows()}
    for t, spec in enumerate(draws.post.targets[: int(cfg["pair_plots"])]):
        pair_plot(draws.flat(t), names, draws.post.lo[t], draws.post.hi[t],
                  out / "targets" / f"pair_{spec.target_id}.png", spec.x_true,
                  f"{study} (sequential), target {spec.target_id}"
                  + ("" if draws.converged[t] else " (NOT converged)"))
    glo, ghi = space.global_bounds()
    intervals_figure(res.summary, {n: (float(a), float(b)) for n, a, b in
                                   zip(names, glo, ghi, strict=True)},
                     out / "intervals.png",
                     f"{study}: sequential's posterior, 90 % intervals "
                     f"({res.meta['converged_targets']}/{res.meta['targets']} converged)",
                     answers=ans)
    timing.write_json(res.meta, out / "posterior.json")
