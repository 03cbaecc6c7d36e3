"""The answer first: what the read-me-first page opens with.

Per metamodel study: the calibrated inputs per target of the recommended strategy
(the others a click away), a figure of the observed outputs beside the outputs
re-simulated at those inputs, and the posterior intervals once ``cal_posterior`` has
run.  Per Bayes setting: the posterior of each method, with a NOT CONVERGED box as
prominent as the metamodel's.  Every flag comes from :mod:`simcalib.report.flags`,
so the page and the console summary list the same ones.

Wording follows the results: observed targets are "your data", simulated ones
"simulated targets (true inputs known)"; Δ's unit is what the study divided by
(:func:`simcalib.study.observations.delta_unit`, each series named once:
:func:`simcalib.report.sections.report_unit`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simcalib.report import agree
from simcalib.report import flags as fl
from simcalib.report.names import display
from simcalib.report.recommend import study_pick
from simcalib.report.sections import Block, Figure, Table, read_if_exists, report_unit
from simcalib.study.series import parse_column


def _inputs_table(rec: pd.DataFrame, targets: pd.DataFrame | None, unit: str) -> pd.DataFrame:
    """target, contexts, calibrated inputs, Δ (and the re-scored Δ, runs)."""
    xs = [c for c in rec.columns if c.startswith("x_")]
    contexts = [c for c in rec.columns if c not in xs and targets is not None
                and c in targets.columns and c not in ("target_id", "status", "message")
                and not c.startswith(("sd_", "weight_"))
                and f"target_{c}" not in rec.columns]
    cols = ["target_id", *contexts, *xs, "error"]
    cols += [c for c in ("rescored_error", "distance", "runs", "status") if c in rec]
    return display(rec[cols], unit)


def study_answer(results: Path, study: str, figures: Path | None) -> list[Block]:
    """The calibrated inputs per target, the observed-vs-re-simulated figure and the
    posterior intervals of one metamodel study; empty when it has no calibration."""
    cal = results / study / "calibration"
    got = study_pick(cal)
    if got is None:
        return []
    summ, pick = got
    if pick is None:
        return [f"**WARNING:** {study}: no strategy calibrated any target."]
    best, why = pick
    records = {s: read_if_exists(cal / f"{s}.csv") for s in summ["strategy"]}
    records = {s: r for s, r in records.items() if r is not None and len(r)}
    rec = records.get(best)
    if rec is None:
        return []
    targets = read_if_exists(results / study / "targets.csv")
    outputs = [c[len("target_"):] for c in rec.columns if c.startswith("target_")
               and c != "target_id"]
    unit = report_unit(targets, outputs)
    observed = not any(c.startswith("true_") for c in rec.columns)
    source = ("your data (observed targets: no true inputs, so no distance to the truth)"
              if observed else "simulated targets (true inputs known; distance in the "
              "unit cube of the inputs)")
    series = sorted({p[0] for o in outputs if (p := parse_column(o)) is not None})
    per_series = (f" A series ({', '.join(series)}) counts as one output: its points' "
                  "terms are averaged over the points a target observes."
                  if series else "")
    blocks: list[Block] = [
        f"Targets: {source}. Strategy **{best}** is recommended: {why}. Δ = Σ over outputs "
        f"of |simulator − target| divided by the {unit}.{per_series}"]
    blocks += noise_blocks(results, study, summ, unit)
    blocks.append(Table(f"Calibrated inputs per target: {best} (recommended)",
                        with_series_misfit(_inputs_table(rec, targets, unit), results,
                                           study, best)))
    for s, r in records.items():
        if s != best:
            blocks.append(Table(f"Calibrated inputs per target: {s} (click to open)",
                                with_series_misfit(_inputs_table(r, targets, unit), results,
                                                   study, s), collapsed=True))
    # a series' points are drawn as curves (curves_blocks), not one panel per point
    scalars = [o for o in outputs if parse_column(o) is None]
    if figures is not None and scalars:
        blocks.append(answer_figure(rec, targets, scalars, figures, study, best, observed))
    blocks += curves_blocks(results, study, best)
    blocks += extra_set_curves_blocks(results, study, best)
    blocks += seq_posterior_blocks(results, study)
    blocks += posterior_blocks(results, study, rec, best)
    return blocks


def answer_figure(rec: pd.DataFrame, targets: pd.DataFrame | None, outputs: list[str],
                  figures: Path, study: str, best: str, observed: bool) -> Figure:
    """The observed outputs (with their sd_ error bars) beside the simulator re-run at
    the recommended strategy's inputs."""
    from simcalib.metamodel.plots import fig_answer

    path = figures / f"answer_{study}.png"
    sds = None
    if targets is not None and any(f"sd_{o}" in targets for o in outputs):
        sds = targets[["target_id", *[f"sd_{o}" for o in outputs if f"sd_{o}" in targets]]]
    label = "your data" if observed else "target (simulated)"
    fig_answer(rec, outputs, path, f"{study}: {label} vs the simulator at {best}'s "
               "calibrated inputs", observed_label=label, sds=sds)
    return Figure(f"{study}: observed vs re-simulated outputs per target", path,
                  f"black: {label}; orange: the simulator re-run at the inputs {best} chose "
                  "(one run per target).")


def curves_path(results: Path, study: str, strategy: str) -> Path:
    """The curves table of a strategy (``cal_curves``); its figure is the ``.png``
    beside it."""
    return results / study / "curves" / f"{strategy}.csv"


def with_series_misfit(table: pd.DataFrame, results: Path, study: str, strategy: str
                       ) -> pd.DataFrame:
    """``table`` (one row per target) with each series' weighted L1 misfit of the
    answer's curve and of the re-runs at the answer, from the strategy's curves table;
    ``table`` unchanged for a study without one (a scalar study)."""
    curves = read_if_exists(curves_path(results, study, strategy))
    if curves is None or curves.empty or "target" not in table:
        return table
    from simcalib.report.curves import series_misfit

    mis = series_misfit(curves)
    out = table.copy()
    for name, part in mis.groupby("series", sort=False):
        by = part.set_index("target_id")
        # the answer's own run: with selection by mean, Δ is the mean of several runs
        out[f"misfit {name} (the answer's run)"] = out["target"].map(by["misfit_answer"])
        if by["misfit_resim"].notna().any():
            runs = int(by["replicates"].max())
            what = f"mean of {runs} re-runs" if runs > 1 else "one re-run"
            out[f"misfit {name} ({what})"] = out["target"].map(by["misfit_resim"])
    return out


def curves_blocks(results: Path, study: str, best: str) -> list[Block]:
    """The recommended strategy's curves figure with one line saying what its band is
    (nothing for a study without series or before ``cal_curves`` ran)."""
    from simcalib.report.curves import band_sentence

    path = curves_path(results, study, best)
    curves = read_if_exists(path)
    fig = path.with_suffix(".png")
    if curves is None or not fig.is_file():
        return []
    return [Figure(f"{study}: observed curves beside {best}'s answer, per target", fig,
                   band_sentence(curves) + " Misfit: each series' weighted L1 over its "
                   f"observed points (per point in `{path}`).")]


def extra_set_curves_blocks(results: Path, study: str, best: str) -> list[Block]:
    """Every extra target set's curves figures (``cal_curves`` on
    ``calibration.extra_targets``: ``results/<study>/curves/targets_<name>/<strategy>``
    ``.csv``/``.png``), each set under a heading naming it, the recommended strategy
    first where it ran there, then the set's other strategies.  Why the page reads the
    directory instead of the config: an extra set's curves come from its own
    ``extra_strategies`` and appear only once their jobs ran, so only the files that
    exist are shown (none for a study without extra sets or before the jobs ran: the
    page never requires them)."""
    from simcalib.report.curves import band_sentence

    root = results / study / "curves"
    if not root.is_dir():
        return []
    out: list[Block] = []
    for d in sorted(p for p in root.glob("targets_*") if p.is_dir()):
        name = d.name.removeprefix("targets_")
        strategies = sorted((p.stem for p in d.glob("*.png")),
                            key=lambda s: (s != best, s))
        figs: list[Block] = []
        shown = []
        for s in strategies:
            table = read_if_exists(d / f"{s}.csv")
            if table is None:
                continue
            shown.append(s)
            figs.append(Figure(f"{study}, extra target set {name}: observed curves beside "
                               f"{s}'s answer, per target", d / f"{s}.png",
                               band_sentence(table) + " Misfit: each series' weighted L1 "
                               f"over its observed points (per point in `{d / s}.csv`)."))
        if figs:
            out.append(f"**Extra target set `{name}`** (`calibration.extra_targets`): its "
                       "targets' observed curves beside the answers of "
                       f"{', '.join(shown)} (`calibration.extra_strategies`).")
            out += figs
    return out


def noise_blocks(results: Path, study: str, summary: pd.DataFrame, unit: str
                 ) -> list[Block]:
    """For a stochastic simulator: its noise ceiling per output (test R² beside the
    largest R² the replicate noise allows, and their ratio, the explainable share the
    trust flag judges) and the strategies' Δ beside their re-scored Δ on fresh runs.
    Why on the first page: a low R² or a small best-run Δ means nothing until the
    noise is known (the chosen run's Δ is the best of r noisy draws, biased low)."""
    out: list[Block] = []
    info = read_json_if_exists(results / study / "metamodel" / "metamodel.json") or {}
    noise = info.get("noise") or {}
    ceiling = noise.get("ceiling") or {}
    if noise.get("stochastic") and ceiling:
        r2 = info.get("test_r2") or {}
        share = noise.get("explainable_share") or {}
        var = noise.get("var") or {}
        if info.get("series"):   # a series is one row, as the trust flag judges it
            ceiling, share, r2, var = _series_noise(info, var)
        table = pd.DataFrame({
            "output": list(ceiling),
            "test R²": [float(r2.get(o, np.nan)) for o in ceiling],
            "noise ceiling (1 − noise var / total var)": [float(v) for v in ceiling.values()],
            "explainable share (R² / ceiling)": [float(share.get(o, np.nan))
                                                 for o in ceiling],
            "noise sd of a dataset row": [float(np.sqrt(var[o])) if o in var else np.nan
                                          for o in ceiling]})
        src = (f"a probe of {noise.get('pairs')} repeated design rows "
               f"({noise.get('runs')} runs)" if noise.get("source") == "probe"
               else f"the dataset's {noise.get('source', 'replicates')}")
        out.append(f"**Noise ceiling**: the simulator is stochastic; its run-to-run noise, "
                   f"measured from {src}, caps any metamodel's test R² at the ceiling below. "
                   "The trust flag judges the explainable share (R² / ceiling) against "
                   "metamodel.min_r2.")
        out.append(Table(f"{study}: noise ceiling and explainable share per output", table))
    if "median_rescored_error" in summary and summary["median_rescored_error"].notna().any():
        cols = [c for c in ("strategy", "median_error", "median_rescored_error",
                            "mean_error", "mean_rescored_error", "failed_targets")
                if c in summary]
        table = summary[cols].copy()
        table["re-scored / own Δ (median)"] = (
            pd.to_numeric(table["median_rescored_error"], errors="coerce")
            / pd.to_numeric(table["median_error"], errors="coerce"))
        out.append("**Re-scored errors**: each strategy's chosen point re-run on fresh "
                   "seeds (calibration.rescore, outside the budget, the same seeds for "
                   "every strategy). Its own Δ is the best of its noisy runs and biased "
                   "low; the re-scored Δ is the honest one, and the recommendation above "
                   "uses it.")
        out.append(Table(f"{study}: Δ of the chosen run vs re-scored Δ on fresh runs",
                         display(table, unit)))
    return out


def _series_noise(info: dict, var: dict) -> tuple[dict, dict, dict, dict]:
    """(ceiling, explainable share, test R², noise variance) with each series as one
    output: its curve's pooled values (:func:`simcalib.metamodel.trust.judge`) and the
    mean of its points' noise variances."""
    from simcalib.metamodel import trust

    verdict = trust.judge(info)
    var_out = {o: v for o, v in var.items() if parse_column(o) is None}
    for name in info.get("series") or {}:
        pts = [float(v) for o, v in var.items() if (p := parse_column(o)) and p[0] == name]
        if pts:
            var_out[name] = float(np.mean(pts))
    return (dict(verdict.ceiling or {}), dict(verdict.share or {}), dict(verdict.test_r2),
            var_out)


def read_json_if_exists(path: Path) -> dict | None:
    """A JSON object, or None when the file is missing or unreadable."""
    import json

    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _intervals(post: pd.DataFrame) -> pd.DataFrame:
    table = post.copy()
    if {"q5", "q95"} <= set(table.columns):
        table["90 % interval"] = [f"[{lo:.4g}, {hi:.4g}]" for lo, hi in
                                  zip(table["q5"], table["q95"], strict=True)]
    return table


def posterior_blocks(results: Path, study: str, rec: pd.DataFrame | None = None,
                     best: str = "") -> list[Block]:
    """The metamodel posterior's 90 % intervals per target and input, when it exists,
    beside the recommended strategy's answer (``rec``): whether it lies inside them and
    the joint 90 % region, and why not where it does not (:mod:`simcalib.report.agree`)."""
    path = results / study / "calibration" / "posterior" / "posterior_summary.csv"
    post = read_if_exists(path)
    if post is None or not {"target_id", "input", "mean"} <= set(post.columns):
        return []
    out: list[Block] = [f"**NOT CONVERGED:** {f.message} (open `{f.file}`)"
                        for f in fl.posterior_flags(results, study)]
    table = _intervals(post)
    keep = [c for c in ("target_id", "input", "mean", "90 % interval", "sd", "identified",
                        "converged", "r_hat", "ess_bulk") if c in table.columns]
    table = table[keep]
    check = agree.design_check(results, study, rec) if rec is not None else None
    if check is not None:
        xs = rec.set_index("target_id")
        table.insert(keep.index("90 % interval") + 1 if "90 % interval" in keep else 3,
                     f"answer ({best})",
                     [float(xs.at[t, f"x_{i}"]) if t in xs.index and f"x_{i}" in xs
                      else np.nan for t, i in zip(table["target_id"], table["input"],
                                                  strict=True)])
        line = agree.sentence(check, "the metamodel posterior")
        bad = agree.disagreements(check)
        out.append(("**" + line + "**") if len(bad) else line)
    out.append(Table(f"{study}: posterior of the calibrated inputs per target (metamodel "
                     "posterior, docs/posterior.md)", display(table)))
    return out


def seq_posterior_blocks(results: Path, study: str) -> list[Block]:
    """``sequential``'s own posterior: its answer per target (the best run on a
    deterministic simulator, the posterior's median on a stochastic one), each input's
    90 % interval, and whether the answer lies inside them (why not, where not)."""
    ans = agree.seq_answers(results, study)
    post = read_if_exists(agree.seq_dir(results, study) / "posterior_summary.csv")
    if ans is None or post is None:
        return []
    names = [c[2:] for c in ans.columns if c.startswith("x_")]
    iv = _intervals(post).set_index(["target_id", "input"])
    table = pd.DataFrame({"target_id": ans["target_id"], "answer": ans["answer_rule"]})
    for n in names:
        table[n] = ans[f"x_{n}"].to_numpy()
        if "90 % interval" in iv:
            table[f"{n} 90 % interval"] = [iv["90 % interval"].get((t, n), "")
                                           for t in ans["target_id"]]
        if f"true_{n}" in ans:
            table[f"true {n}"] = ans[f"true_{n}"].to_numpy()
    for c in ("inside_90", "inside_joint_90", "why_outside", "converged"):
        if c in ans:
            table[c] = ans[c].to_numpy()
    line = agree.sentence(ans, "sequential's posterior")
    out: list[Block] = [f"**NOT CONVERGED:** {f.message} (open `{f.file}`)"
                        for f in fl.posterior_flags(results, study, "sequential_posterior")]
    if not ans["answer_rule"].astype(str).str.startswith("best run").all():
        out.append("On this stochastic simulator **the answer is the posterior's**: its "
                   "median (or the run it ranks best), not sequential's run of smallest "
                   "misfit above, which partly fits the noise of one observation.")
    if line:
        out.append(("**" + line + "**") if len(agree.disagreements(ans)) else line)
    out.append(Table(f"{study}: sequential's posterior, from its own runs: the answer and "
                     "each input's 90 % interval (docs/posterior.md)", display(table)))
    return out


# ---- Bayes ----------------------------------------------------------------------------

def _bayes_runs(results: Path, setting: str) -> dict[str, pd.DataFrame]:
    """method -> its posterior summary: ``<method>/summary.csv`` (your data) or the
    first replication's ``<method>/rep<k>/summary.csv`` (simulated data)."""
    out: dict[str, pd.DataFrame] = {}
    for f in fl.bayes_run_summaries(results, setting):
        method = f.parent.name if not f.parent.name.startswith("rep") else f.parent.parent.name
        if method in out:
            continue
        df = read_if_exists(f)
        if df is not None and {"parameter", "mean"} <= set(df.columns):
            out[method] = df
    return out


def bayes_observed(results: Path, setting: str) -> bool:
    """A setting fitted to your data (no replications, no truth)."""
    base = results / "bayes" / setting
    return any((base / m / "summary.csv").is_file() for m in ("koh", "mos"))


def bayes_answer(results: Path, setting: str) -> list[Block]:
    """Each method's posterior (mean and 95 % interval per parameter, R-hat, ESS,
    converged) side by side, after a NOT CONVERGED box per method that needs one."""
    runs = _bayes_runs(results, setting)
    if not runs:
        return []
    observed = bayes_observed(results, setting)
    blocks: list[Block] = [f"**NOT CONVERGED:** {f.what.replace(' NOT CONVERGED', '')}: "
                           f"{f.message} (open `{f.file}`)"
                           for f in fl.bayes_flags(results, setting)]
    wide = None
    for method, df in runs.items():
        m = method.upper()
        part = pd.DataFrame({"parameter": df["parameter"].astype(str),
                             f"{m} mean": df["mean"]})
        if {"lower95", "upper95"} <= set(df.columns):
            part[f"{m} 95 % interval"] = [f"[{lo:.4g}, {hi:.4g}]" for lo, hi in
                                          zip(df["lower95"], df["upper95"], strict=True)]
        for c, name in (("r_hat", "R-hat"), ("ess_bulk", "bulk ESS"),
                        ("converged", "converged")):
            if c in df:
                part[f"{m} {name}"] = df[c].to_numpy()
        wide = part if wide is None else wide.merge(part, on="parameter", how="outer",
                                                    sort=False)
    what = ("your data" if observed else
            "simulated data, first replication (the truth is known: see the bias and "
            "coverage tables below)")
    blocks.append(Table(f"{setting}: posterior per parameter and method ({what})", wide))
    fig = results / "bayes" / setting / "figures" / "predictive.png"
    if not fig.is_file():
        reps = sorted((results / "bayes" / setting / "figures").glob("output_uq_rep*.png"))
        fig = reps[0] if reps else fig
    if fig.is_file():
        blocks.append(Figure(f"{setting}: {'your data' if observed else 'the data'} and the "
                             "calibrated model's predictions", fig))
    return blocks
