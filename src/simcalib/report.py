"""Tables for the report: the runtime table aggregated from Snakemake's
``benchmark:`` files, the projection of the paper config's CPU-hours from them, and
``results/report/summary.md`` (each headline table beside the paper's numbers).

Every rule writes a benchmark TSV under ``results/benchmarks/rules/``; a job's
*kind* is its path with the numbers replaced by ``N`` (``epidemic/simulate_chunk_N``),
so chunks, replications and targets of one rule aggregate into one row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

BENCH_COLUMNS = ("s", "cpu_time", "max_rss")


def job_kind(rel_path: str) -> str:
    """``epidemic/simulate_chunk_3.tsv`` -> ``epidemic/simulate_chunk_N``."""
    stem = rel_path[:-4] if rel_path.endswith(".tsv") else rel_path
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", stem)


def collect_benchmarks(root: str | Path) -> pd.DataFrame:
    """One row per benchmark TSV: path, kind, wall seconds, CPU seconds, max RSS (MB)."""
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
    try:
        return pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError):
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
