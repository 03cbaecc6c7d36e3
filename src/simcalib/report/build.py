"""Tables for the report: the runtime table aggregated from Snakemake's
``benchmark:`` files, the projection of the paper config's CPU-hours from them, and
``results/report/summary.md`` (each headline table beside the paper's numbers; the
sections come from :mod:`simcalib.report.sections`, the HTML pages of the Snakemake
report from :mod:`simcalib.report.html`).

Every rule writes a benchmark TSV under ``results/benchmarks/rules/``; a job's
*kind* is its path with the numbers replaced by ``N`` (``epidemic/sim_run_N``),
so chunks, replications and targets of one rule aggregate into one row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib import timing
from simcalib.errors import SimcalibError
from simcalib.report.names import display
from simcalib.report.sections import Block, Figure, Section, Table, read_if_exists

__all__ = ["read_if_exists"]

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


def render_markdown(blocks: Iterable[Block]) -> str:
    """A section's blocks as markdown: paragraphs as they are, tables under a bold title."""
    parts = []
    for b in blocks:
        if isinstance(b, Table):
            df = display(b.df.reset_index() if b.index else b.df, b.unit)
            parts.append(f"**{b.title}**\n\n" + markdown_table(df))
        elif isinstance(b, Figure):
            parts.append(f"**{b.title}**: `{b.path}`" + (f" ({b.caption})" if b.caption else ""))
        else:
            parts.append(b.strip())
    return "\n\n".join(parts)


def summary_markdown(sections: Iterable[Section], runtime: pd.DataFrame,
                     header: str = "") -> str:
    """Assemble summary.md from (title, blocks) sections plus the runtime table."""
    parts = ["# simcalib results summary", ""]
    if header:
        parts += [header, ""]
    for title, blocks in sections:
        parts += [f"## {title}", "", render_markdown(blocks), ""]
    parts += ["## Runtime (from the rules' benchmark files)", "", runtime_text(runtime)]
    if not runtime.empty:
        parts += ["", markdown_table(runtime.head(40), ".3g")]
    return "\n".join(parts) + "\n"


def runtime_text(runtime: pd.DataFrame) -> str:
    """One line: jobs, job wall seconds and CPU seconds in all."""
    if runtime.empty:
        return "No benchmark files found."
    total = runtime["wall_s_total"].sum()
    cpu = runtime["cpu_s_total"].sum()
    return (f"{int(runtime['jobs'].sum())} jobs, {total:.0f} s of job wall time, "
            f"{cpu:.0f} CPU-seconds in all.")

