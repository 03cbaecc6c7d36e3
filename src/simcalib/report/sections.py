"""The report's sections: every headline table of the workflow's results, read from
the files the stages write, as blocks that :mod:`simcalib.report.build` renders to
``summary.md`` and :mod:`simcalib.report.html` to the HTML pages of the Snakemake
report.  One builder per paper, so the markdown and the HTML report show the same
numbers.

A section is ``(title, blocks)``; a block is a paragraph (``str``, with ``**bold**``
and ```code``` as the only markup) or a :class:`Table`.  Each table that carries a
trust signal (test R², MILP status and gap, R-hat and ESS) keeps it as a column, and a
number that may be wrong gets a **WARNING** paragraph above its table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib import timing
from simcalib.bayes.convergence import R_HAT_MAX
from simcalib.errors import SimcalibError
from simcalib.metamodel import trust
from simcalib.study.observations import delta_unit

#: R-hat above this means the chains may not have mixed (Vehtari et al. 2021, ArviZ)
RHAT_MAX = R_HAT_MAX

# Paper 1 (epidemic, Figs. 4-5): median actual error per strategy, 50 targets, r = 100.
PAPER1_MEDIANS = {"rs": 0.1408, "op": 0.2059, "stp": 0.1803, "pts": 0.0773}
PAPER1_PTS_MEAN_REDUCTION = 0.46


@dataclass
class Table:
    """A titled table of a section; ``index`` keeps the frame's index as a column;
    ``collapsed`` tables are a click away in HTML (``<details>``).  ``df`` keeps the
    CSV files' column names; the pages show them readable, with units
    (:func:`simcalib.report.names.display`), Δ's in ``unit`` (what Δ is divided by;
    empty: the training sd)."""

    title: str
    df: pd.DataFrame
    index: bool = False
    collapsed: bool = False
    unit: str = ""


@dataclass
class Figure:
    """A PNG the page shows (embedded in the HTML page, linked from summary.md)."""

    title: str
    path: Path
    caption: str = ""


Block = str | Table | Figure
Section = tuple[str, list[Block]]


def read_if_exists(path: str | Path) -> pd.DataFrame | None:
    p = Path(path)
    if not p.exists():
        return None
    try:  # timing columns live in <stem>_timing.csv beside it
        return timing.read_csv(p)
    except SimcalibError:
        return None


# ---- paper 1 ---------------------------------------------------------------------------

def report_unit(targets: pd.DataFrame | None, outputs: list[str]) -> str:
    """:func:`~simcalib.study.observations.delta_unit` with each series counted as one
    output (named once, not point by point): a series is divided by the observations'
    sd where they give an ``sd_`` for any of its points.  A study without series gets
    ``delta_unit`` itself, word for word."""
    from simcalib.study.series import parse_column

    groups: dict[str, list[str]] = {}
    scalars = []
    for o in outputs:
        p = parse_column(o)
        if p is None:
            scalars.append(o)
        else:
            groups.setdefault(p[0], []).append(o)
    if not groups or targets is None:
        return delta_unit(targets, outputs)
    view = pd.DataFrame(index=targets.index)
    for o in scalars:
        if f"sd_{o}" in targets:
            view[f"sd_{o}"] = targets[f"sd_{o}"]
    for name, cols in groups.items():
        if any(f"sd_{c}" in targets and targets[f"sd_{c}"].notna().any() for c in cols):
            view[f"sd_{name}"] = 1.0
    return delta_unit(view, [*scalars, *groups])


def study_unit(results: Path, study: str) -> str:
    """What Δ is divided by in one study, in words: the study's targets.csv ``sd_``
    columns for the metamodel's outputs (metamodel.json), else the training sd."""
    targets = read_if_exists(results / study / "targets.csv")
    try:
        info = json.loads((results / study / "metamodel" / "metamodel.json").read_text())
        outputs = list(info.get("output_names") or [])
    except (OSError, ValueError):
        outputs = []
    return report_unit(targets, outputs) if outputs else delta_unit(None, [])


def metamodel_table(info: dict) -> pd.DataFrame:
    """One row per output: test R², test MAE (in the output's units), and whether R²
    reaches ``metamodel.min_r2``."""
    r2 = info.get("test_r2") or {}
    mae = info.get("test_mae") or {}
    verdict = trust.judge(info)
    if info.get("series"):
        return series_metamodel_table(info, verdict)
    rows = [{"output": o, "test R²": float(v), "test MAE": float(mae.get(o, np.nan)),
             f"R² ≥ min_r2 ({verdict.min_r2:g})": "NO" if o in verdict.weak_outputs else "yes"}
            for o, v in r2.items()]
    return pd.DataFrame(rows)


def series_metamodel_table(info: dict, verdict: trust.MetamodelTrust) -> pd.DataFrame:
    """:func:`metamodel_table` of a study with series: one row per series (its curve's
    test R² pooled over the points, as the trust flag judges it; the mean of its
    points' test MAEs; the basis's held-out reconstruction error as a share of the
    series' scale) beside one row per scalar, instead of a row per point."""
    series = info.get("series") or {}
    mae = info.get("test_mae") or {}
    rows = []
    for o, v in verdict.test_r2.items():
        rec = series.get(o)
        if rec is None:
            m, name, basis = float(mae.get(o, np.nan)), o, np.nan
        else:
            pts = [float(x) for k, x in mae.items() if str(k).startswith(f"{o}@")]
            m = float(np.mean(pts)) if pts else np.nan
            name = f"{o} (curve: {rec.get('points')} points, {rec.get('components')} components)"
            basis = float(rec.get("basis_cv_relative", np.nan))
        rows.append({"output": name, "test R²": float(v), "test MAE": m,
                     "basis error (share of the series' scale)": basis,
                     f"R² ≥ min_r2 ({verdict.min_r2:g})":
                         "NO" if o in verdict.weak_outputs else "yes"})
    return pd.DataFrame(rows)


def op_table(op: pd.DataFrame) -> pd.DataFrame:
    """op.csv's trust columns: one row per target (and alternative optimum)."""
    cols = [c for c in ("target_id", "rank", "status", "objective", "bound", "gap", "seconds",
                        "nodes", "backend", "flag") if c in op.columns]
    out = op[cols].copy()
    if "flag" in out:
        out["flag"] = out["flag"].fillna("")
    return out


def paper1_trust_lines(summ: pd.DataFrame) -> list[str]:
    """Warnings for numbers that may be wrong (metamodel below metamodel.min_r2, OP
    solves without proof of optimality) and the note that observed targets have no
    truth; empty when there is nothing to say."""
    out = []
    if "metamodel_ok" in summ and len(summ) and not bool(summ["metamodel_ok"].iloc[0]):
        out.append(f"**WARNING:** metamodel test R² {summ['metamodel_min_test_r2'].iloc[0]:.3f} "
                   f"is below metamodel.min_r2 = {summ['metamodel_min_r2'].iloc[0]:g}: the "
                   "metamodel-based strategies (OP, StP, PtS, adaptive) rest on a poor "
                   "metamodel.")
    if "op_unproven" in summ and (summ["op_unproven"] > 0).any():
        bad = ", ".join(f"{r.strategy} {int(r.op_unproven)}" for r in summ.itertuples()
                        if r.op_unproven > 0)
        out.append(f"**WARNING:** OP solves not proven optimal (time limit, solver error or "
                   f"fallback): {bad}.")
    if "failed_targets" in summ and (summ["failed_targets"] > 0).any():
        bad = "; ".join(f"{r.strategy}: target(s) {getattr(r, 'failed_target_ids', '') or '?'}"
                        for r in summ.itertuples() if r.failed_targets > 0)
        n = (f" the {int(summ['compared_targets'].iloc[0])} targets every strategy "
             "calibrated" if "compared_targets" in summ else " the common targets")
        out.append(f"**WARNING:** no successful run, so no calibrated point, for {bad}. "
                   f"Reductions vs RS compare{n} (`*_compared` columns).")
    if "median_distance" not in summ:
        out.append("Targets are observed data: the true inputs are unknown, so only the "
                   "re-simulated misfit Δ is reported (no distance to the truth).")
    return out


def _metamodel_blocks(meta: Path) -> list[Block]:
    info = json.loads(meta.read_text())
    table = metamodel_table(info)
    if table.empty:
        return []
    r2 = table["test R²"]
    verdict = trust.judge(info)
    arch = info.get("hidden", info.get("architecture"))
    out: list[Block] = [f"Metamodel{f' (hidden layers {arch})' if arch else ''}: test R² "
                        f"min {r2.min():.3f}, median {float(r2.median()):.3f} over "
                        f"{len(r2)} outputs (held-out test split)."]
    if verdict.weak_outputs:
        out.append(f"**WARNING:** test R² below metamodel.min_r2 = {verdict.min_r2:g} for "
                   f"{', '.join(verdict.weak_outputs)}: predictions of these outputs are "
                   "unreliable.")
    out.append(Table("Metamodel test R² per output", table))
    return out


def _op_blocks(op: pd.DataFrame) -> list[Block]:
    out: list[Block] = []
    if "seconds" in op:
        status = (", ".join(f"{k} {v}" for k, v in op["status"].value_counts().items())
                  if "status" in op else "unknown")
        out.append(f"OP solves: {len(op)} targets, median {op['seconds'].median():.2f} s, "
                   f"max {op['seconds'].max():.2f} s; status: {status}.")
    if "status" in op and (op["status"] != "optimal").any():
        n = int((op["status"] != "optimal").sum())
        out.append(f"**WARNING:** {n} OP solve(s) not proven optimal: the point may not be "
                   "the metamodel's best (see status and gap).")
    out.append(Table("OP per target: MILP status, optimality gap, solve seconds",
                     op_table(op)))
    return out


def _redundant(summ: pd.DataFrame) -> list[str]:
    """Columns of summary.csv that repeat others when no target failed: the
    ``*_compared`` columns (all targets compared) and the empty failed-target ids; the
    table stays narrow enough to read."""
    if "failed_targets" not in summ or (summ["failed_targets"] > 0).any():
        return []
    return ["failed_target_ids", "compared_targets", "mean_error_compared",
            "median_error_compared"]


def paper1_section(results: Path, study: str) -> list[Block]:
    """Metamodel R² per output, OP solves, the strategies' summary and the PtS sweep."""
    blocks: list[Block] = []
    meta = results / study / "metamodel" / "metamodel.json"
    if meta.exists():
        blocks += _metamodel_blocks(meta)
    op = read_if_exists(results / study / "op" / "op.csv")
    if op is not None:
        blocks += _op_blocks(op)
    summ = read_if_exists(results / study / "calibration" / "summary.csv")
    if summ is not None:
        blocks += paper1_trust_lines(summ)
        # the metamodel's columns repeat on every row; the lines above say it once
        table = summ.drop(columns=["metamodel_min_test_r2", "metamodel_min_r2",
                                   "metamodel_ok", *_redundant(summ)], errors="ignore")
        if study.startswith("epidemic"):
            table["paper_median_error"] = table["strategy"].map(PAPER1_MEDIANS)
        unit = study_unit(results, study)
        blocks.append(Table("Calibration strategies: actual error Δ per strategy "
                            f"(strategy names as in the config; Δ in the {unit})", table,
                            unit=unit))
        if study.startswith("epidemic"):
            blocks.append(f"Paper 1: PtS mean actual error {PAPER1_PTS_MEAN_REDUCTION:.0%} below "
                          "RS; ordering PtS > RS > StP > OP (50 targets, r = 100, FluTE).")
    sweep = read_if_exists(results / study / "calibration" / "sweep.csv")
    if sweep is not None:
        blocks.append(Table("PtS proximity sweep" + (" (paper Fig. 5)" if study.startswith(
            "epidemic") else ""), sweep, unit=study_unit(results, study)))
    return blocks


# ---- paper 2 ---------------------------------------------------------------------------

def paper2_section(results: Path) -> list[Block]:
    """RRMSE of HF emulation, calibrated θ̂ against θ^MSE, the hardening-law tables."""
    base = results / "multisource"
    blocks: list[Block] = []
    rr = read_if_exists(base / "analytic" / "rrmse.csv")
    if rr is not None:
        title = ("Analytic example, RRMSE of HF emulation (Table 1; RRMSE = "
                 "sqrt(MSE / var(y_test)))")
        if {"scenario", "output", "rrmse"} <= set(rr.columns):
            pivot = rr.pivot_table(index="output", columns="scenario", values="rrmse")
            blocks.append(Table(title, pivot, index=True))
        else:
            blocks.append(Table(title, rr))
    thetas = []
    for scen in ("s0_s1", "s0_s2", "all"):
        th = read_if_exists(base / "analytic" / scen / "theta.csv")
        if th is not None:
            if "scenario" not in th.columns:
                th.insert(0, "scenario", scen)
            thetas.append(th)
    if thetas:
        th = pd.concat(thetas, ignore_index=True)
        cols = [c for c in ("scenario", "source", "parameter", "mean", "sd", "lower95", "upper95",
                            "theta_mse", "fit_seconds") if c in th.columns]
        blocks.append(Table("Analytic example, calibrated θ̂ vs θ^MSE", th[cols]))
    names = {"table3_theta_step1.csv": "Hardening law, step 1: calibrated θ̂ (Table 3)",
             "theta_step2.csv": "Hardening law, step 2: calibrated θ̂",
             "table5_rrmse_step2.csv": "Hardening law, step 2: RRMSE (Table 5)"}
    for name, title in names.items():
        t = read_if_exists(base / "hardening" / name)
        if t is not None:
            blocks.append(Table(f"{title} (`{name}`)", t))
    return blocks


# ---- paper 3 ---------------------------------------------------------------------------

def _bayes_params(base: Path) -> pd.DataFrame | None:
    """table_params.csv with each row's worst R-hat and smallest bulk ESS (metrics.csv)."""
    params = read_if_exists(base / "table_params.csv")
    if params is None:
        return None
    metrics = read_if_exists(base / "metrics.csv")
    trust = [c for c in ("rhat_max", "ess_bulk_min") if metrics is not None and c in metrics
             and c not in params]   # newer table_params.csv files carry them already
    if trust and {"method", "parameter"} <= set(params.columns) & set(metrics.columns):
        params = params.merge(metrics[["method", "parameter", *trust]],
                              on=["method", "parameter"], how="left")
    return params


def _paper_note(df: pd.DataFrame, table: str) -> str:
    """" (paper Table 1; paper's columns are the paper's numbers)" where the table has
    paper_* columns (paper 3's own settings), nothing on a user's setting."""
    if not any(str(c).startswith("paper_") for c in df.columns):
        return ""
    return f" (paper {table}; the paper's columns are the paper's numbers)"


def paper3_section(results: Path, settings: Iterable[str]) -> list[Block]:
    """Per setting: the parameter table (bias, RMSE, coverage, width beside the paper's,
    with R-hat and ESS) and the output table; the markdown tables the bayes rules write
    when their CSVs are missing."""
    blocks: list[Block] = []
    for setting in settings:
        base = results / "bayes" / setting
        params = _bayes_params(base)
        if params is not None:
            if "rhat_max" in params and (params["rhat_max"] > RHAT_MAX).any():
                bad = params.loc[params["rhat_max"] > RHAT_MAX]
                blocks.append(f"**WARNING:** {setting}: R-hat above {RHAT_MAX} for "
                              + ", ".join(f"{r.method} {r.parameter}"
                                          for r in bad.itertuples())
                              + ": the chains may not have converged; run longer chains.")
            over = " over replications" if "replications" in params else ""
            blocks.append(Table(f"{setting}: parameters{over}"
                                + _paper_note(params, "Table 1"), params))
        elif (base / "table_params.md").exists():
            blocks.append((base / "table_params.md").read_text().strip())
        output = read_if_exists(base / "table_output.csv")
        if output is not None:
            blocks.append(Table(f"{setting}: output" + _paper_note(output, "Table 2"), output))
        elif (base / "table_output.md").exists():
            blocks.append((base / "table_output.md").read_text().strip())
        if (params is not None and "replications" in params and len(params)
                and _paper_note(params, "")):
            blocks.append(f"{setting}: {int(params['replications'].max())} replication(s) "
                          "here; the paper used 100.")
    return blocks
