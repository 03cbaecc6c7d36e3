"""Tables for the report: the runtime table aggregated from Snakemake's
``benchmark:`` files, the projection of the paper config's CPU-hours from them, and
``results/report/summary.md`` (each headline table beside the paper's numbers).

Every rule writes a benchmark TSV under ``results/benchmarks/rules/``; a job's
*kind* is its path with the numbers replaced by ``N`` (``epidemic/sim_run_N``),
so chunks, replications and targets of one rule aggregate into one row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib import timing
from simcalib.errors import SimcalibError

BENCH_COLUMNS = ("s", "cpu_time", "max_rss")


def job_kind(rel_path: str) -> str:
    """``epidemic/sim_run_3.tsv`` -> ``epidemic/sim_run_N``."""
    stem = rel_path[:-4] if rel_path.endswith(".tsv") else rel_path
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", stem)


CHUNK_BENCH = re.compile(r"^(?P<study>[^/]+)/sim_run_(?P<chunk>\d+)\.tsv$")


def chunk_cpu_seconds(results: Path, rel_path: str) -> float:
    """CPU seconds a simulation chunk measured itself (``RUSAGE_SELF`` plus
    ``RUSAGE_CHILDREN``, in ``chunks/chunk_<k>_timing.json``, beside the chunk's summary);
    NaN for other jobs.  Snakemake's
    benchmark samples the process tree now and then and misses short-lived child
    processes, so for a command simulator its ``cpu_time`` understates the work."""
    m = CHUNK_BENCH.match(rel_path)
    if not m:
        return float("nan")
    meta = results / m["study"] / "chunks" / f"chunk_{m['chunk']}.json"
    try:
        return float(timing.read_json(meta).get("cpu_seconds", float("nan")))
    except (OSError, ValueError, TypeError, AttributeError, SimcalibError):
        return float("nan")


def collect_benchmarks(root: str | Path) -> pd.DataFrame:
    """One row per benchmark TSV: path, kind, wall seconds, CPU seconds, max RSS (MB).
    A simulation chunk's CPU seconds are the larger of the benchmark's and the
    chunk's own count (which includes its child processes, see
    :func:`chunk_cpu_seconds`); ``root`` is ``results/benchmarks/rules``."""
    root = Path(root)
    rows = []
    for path in sorted(root.rglob("*.tsv")):
        try:
            df = pd.read_csv(path, sep="\t")
        except (pd.errors.ParserError, pd.errors.EmptyDataError):
            continue
        if df.empty or "s" not in df:
            continue
        rel = str(path.relative_to(root))
        rec = {"path": rel, "kind": job_kind(rel)}
        for col in BENCH_COLUMNS:
            val = pd.to_numeric(df[col], errors="coerce").iloc[0] if col in df else np.nan
            rec[col] = float(val) if pd.notna(val) else np.nan
        own = chunk_cpu_seconds(root.parent.parent, rel)
        if np.isfinite(own) and not rec["cpu_time"] >= own:
            rec["cpu_time"] = own
        rows.append(rec)
    return pd.DataFrame(rows, columns=["path", "kind", *BENCH_COLUMNS])


def runtime_table(bench: pd.DataFrame) -> pd.DataFrame:
    """Per job kind: jobs, total and mean wall seconds, total CPU seconds, max RSS."""
    if bench.empty:
        return pd.DataFrame(columns=["kind", "jobs", "wall_s_total", "wall_s_mean",
                                     "cpu_s_total", "max_rss_mb"])
    g = bench.groupby("kind")
    out = pd.DataFrame({
        "jobs": g.size(),
        "wall_s_total": g["s"].sum(),
        "wall_s_mean": g["s"].mean(),
        "cpu_s_total": g["cpu_time"].sum(min_count=1),
        "max_rss_mb": g["max_rss"].max(),
    }).reset_index()
    return out.sort_values("wall_s_total", ascending=False).reset_index(drop=True)


def markdown_table(df: pd.DataFrame, floatfmt: str = ".4g", index: bool = False) -> str:
    """A GitHub-markdown table without extra dependencies."""
    data = df.reset_index() if index else df
    cols = [str(c) for c in data.columns]

    def fmt(v: Any) -> str:
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else format(float(v), floatfmt)
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in data.itertuples(False)]
    return "\n".join(lines)


def read_if_exists(path: str | Path) -> pd.DataFrame | None:
    p = Path(path)
    if not p.exists():
        return None
    from simcalib import timing  # timing columns live in <stem>_timing.csv beside it

    try:
        return timing.read_csv(p)
    except SimcalibError:
        return None


def summary_markdown(sections: Iterable[tuple[str, str]], runtime: pd.DataFrame,
                     header: str = "") -> str:
    """Assemble summary.md from (title, markdown body) sections plus the runtime table."""
    parts = ["# simcalib results summary", ""]
    if header:
        parts += [header, ""]
    for title, body in sections:
        parts += [f"## {title}", "", body.strip(), ""]
    parts += ["## Runtime (from the rules' benchmark files)", ""]
    if runtime.empty:
        parts.append("No benchmark files found.")
    else:
        total = runtime["wall_s_total"].sum()
        cpu = runtime["cpu_s_total"].sum()
        parts.append(f"{int(runtime['jobs'].sum())} jobs, {total:.0f} s of job wall time, "
                     f"{cpu:.0f} CPU-seconds in all.")
        parts += ["", markdown_table(runtime.head(40), ".3g")]
    return "\n".join(parts) + "\n"


def scale_factor(default: Mapping[str, Any], paper: Mapping[str, Any],
                 keys: Iterable[str]) -> float:
    """Product of paper/default ratios of the numeric values at dotted ``keys``."""
    f = 1.0
    for key in keys:
        a, b = _get(default, key), _get(paper, key)
        if isinstance(a, int | float) and isinstance(b, int | float) and a:
            f *= float(b) / float(a)
    return f


def _get(d: Mapping[str, Any], dotted: str) -> Any:
    node: Any = d
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


# ---- summary.md sections -----------------------------------------------------------

# Paper 1 (epidemic, Figs. 4-5): median actual error per strategy, 50 targets, r = 100.
PAPER1_MEDIANS = {"rs": 0.1408, "op": 0.2059, "stp": 0.1803, "pts": 0.0773}
PAPER1_PTS_MEAN_REDUCTION = 0.46
PAPER1_SWEEP_MEDIANS = {0.001: 0.2059, 0.02: 0.0852, 0.05: 0.0773, 0.1: 0.0869, 0.2: 0.0929,
                        1.0: 0.1408}


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
    if "median_distance" not in summ:
        out.append("Targets are observed data: the true inputs are unknown, so only the "
                   "re-simulated misfit Δ is reported (no distance to the truth).")
    return out


def paper1_section(results: Path, study: str) -> str | None:
    parts = []
    meta = results / study / "metamodel" / "metamodel.json"
    if meta.exists():
        import json

        info = json.loads(meta.read_text())
        r2 = info.get("test_r2", {})
        if r2:
            parts.append(f"Metamodel {info.get('hidden', info.get('architecture', ''))}: "
                         f"test R² min {min(r2.values()):.3f}, median "
                         f"{float(np.median(list(r2.values()))):.3f} over {len(r2)} outputs.")
    op = read_if_exists(results / study / "op" / "op.csv")
    if op is not None and "seconds" in op:
        status = op["status"].value_counts().to_dict() if "status" in op else {}
        parts.append(f"OP solves: {len(op)} targets, median {op['seconds'].median():.2f} s, "
                     f"max {op['seconds'].max():.2f} s, status {status}.")
    summ = read_if_exists(results / study / "calibration" / "summary.csv")
    if summ is not None:
        parts += paper1_trust_lines(summ)
        # the metamodel's columns repeat on every row; the line above says it once
        table = summ.drop(columns=["metamodel_min_test_r2", "metamodel_min_r2",
                                   "metamodel_ok"], errors="ignore")
        if study.startswith("epidemic"):
            table["paper_median_error"] = table["strategy"].map(PAPER1_MEDIANS)
        parts.append(markdown_table(table))
        if study.startswith("epidemic"):
            parts.append(f"Paper 1: PtS mean actual error {PAPER1_PTS_MEAN_REDUCTION:.0%} below "
                         "RS; ordering PtS > RS > StP > OP (50 targets, r = 100, FluTE).")
    sweep = read_if_exists(results / study / "calibration" / "sweep.csv")
    if sweep is not None:
        parts.append("PtS proximity sweep (Fig. 5):\n\n" + markdown_table(sweep))
    if not parts:
        return None
    return "\n\n".join(parts)


def paper2_section(results: Path) -> str | None:
    base = results / "multisource"
    parts = []
    rr = read_if_exists(base / "analytic" / "rrmse.csv")
    if rr is not None:
        if {"scenario", "output", "rrmse"} <= set(rr.columns):
            pivot = rr.pivot_table(index="output", columns="scenario", values="rrmse")
            parts.append("Analytic example, RRMSE of HF emulation (Table 1; RRMSE = "
                         "sqrt(MSE / var(y_test))):\n\n" + markdown_table(pivot, index=True))
        else:
            parts.append(markdown_table(rr))
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
        parts.append("Calibrated θ̂ vs θ^MSE:\n\n" + markdown_table(th[cols]))
    for name in ("table3_theta_step1.csv", "theta_step2.csv", "table5_rrmse_step2.csv"):
        t = read_if_exists(base / "hardening" / name)
        if t is not None:
            parts.append(f"Hardening law, `{name}`:\n\n" + markdown_table(t))
    return "\n\n".join(parts) if parts else None


def paper3_section(results: Path, settings: Iterable[str]) -> str | None:
    parts = []
    for setting in settings:
        for name in ("table_params.md", "table_output.md"):
            p = results / "bayes" / setting / name
            if p.exists():
                parts.append(p.read_text().strip())
    return "\n\n".join(parts) if parts else None
