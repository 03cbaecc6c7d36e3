"""Every trust flag the result files carry, collected in one list: the console summary
at the end of a run (:func:`console_summary`, called by the Snakefile's ``onsuccess``
and ``onerror`` handlers and by ``simcalib report-flags``) and the report's read-me-first
page both read it, so the two can never disagree.

A flag is a result that may be wrong, with the file to open:

* a metamodel whose test R² is below ``metamodel.min_r2`` (:mod:`simcalib.metamodel.trust`);
* OP solves (``op.csv``, the strategies' anchors) not proven optimal;
* a metamodel posterior, ``sequential``'s posterior or a Bayes chain set that has not
  converged (R-hat, bulk ESS);
* targets a strategy could not calibrate, and failed simulator runs above
  ``report.flag_failed_share`` of a study's design or a strategy's runs.

The module reads files only (no torch, no solver), like the rest of the report.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from simcalib import timing
from simcalib.errors import SimcalibError
from simcalib.metamodel import trust


@dataclass(frozen=True)
class Flag:
    """One flagged result: where (a study, a Bayes setting), what, why, which file."""

    subject: str
    what: str
    message: str
    file: str

    def line(self) -> str:
        return f"{self.subject}: {self.what}: {self.message}"


def _read(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return timing.read_csv(path)
    except (SimcalibError, OSError, ValueError, pd.errors.ParserError,
            pd.errors.EmptyDataError):
        return None


# ---- metamodel studies ----------------------------------------------------------------

def metamodel_flags(results: Path, study: str) -> list[Flag]:
    meta = results / study / "metamodel" / "metamodel.json"
    if not meta.is_file():
        return []
    try:
        info = json.loads(meta.read_text())
    except (OSError, ValueError):
        return []
    line = trust.judge(info).warning("metamodel")
    if line is None:
        return []
    return [Flag(study, "metamodel", line.removeprefix("metamodel: "), str(meta))]


def op_flags(results: Path, study: str) -> list[Flag]:
    path = results / study / "op" / "op.csv"
    op = _read(path)
    if op is None or "status" not in op:
        return []
    if "rank" in op:
        op = op[op["rank"] == 0]
    bad = trust.op_unproven(op)
    if bad.empty:
        return []
    status = ", ".join(f"{k} {v}" for k, v in bad["status"].value_counts().items())
    gap = (f", largest gap {float(pd.to_numeric(bad['gap'], errors='coerce').max()):.3g}"
           if "gap" in bad else "")
    return [Flag(study, "MILP not proven optimal",
                 f"{len(bad)} of {len(op)} OP solves ({status}{gap}): the OP point may not "
                 "be the metamodel's optimum", str(path))]


def calibration_flags(results: Path, study: str, failed_share: float) -> list[Flag]:
    path = results / study / "calibration" / "summary.csv"
    summ = _read(path)
    if summ is None or "strategy" not in summ:
        return []
    out = []
    if "op_unproven" in summ and (summ["op_unproven"] > 0).any():
        bad = ", ".join(f"{r.strategy} {int(r.op_unproven)}" for r in summ.itertuples()
                        if r.op_unproven > 0)
        out.append(Flag(study, "MILP not proven optimal",
                        f"strategies' OP solves without proof of optimality: {bad}",
                        str(path)))
    if "failed_targets" in summ and (summ["failed_targets"] > 0).any():
        bad = ", ".join(f"{r.strategy} {int(r.failed_targets)} of {int(r.targets)}"
                        for r in summ.itertuples() if r.failed_targets > 0)
        out.append(Flag(study, "failed targets", f"targets without a calibrated point: {bad}",
                        str(path)))
    if {"failed_runs", "runs", "targets"} <= set(summ.columns):
        total = summ["runs"] * summ["targets"]
        share = summ["failed_runs"] / total.where(total > 0)
        bad = summ[share > failed_share]
        if len(bad):
            text = ", ".join(f"{r.strategy} {int(r.failed_runs)} of {int(t)}"
                             for r, t in zip(bad.itertuples(), total[bad.index], strict=True))
            out.append(Flag(study, "failed runs",
                            f"more than {failed_share:.0%} of the strategies' simulator runs "
                            f"failed: {text}", str(path.parent / "runs")))
    return out


def simulation_flags(results: Path, study: str, failed_share: float) -> list[Flag]:
    out = []
    path = results / study / "simulation_summary.json"
    if path.is_file():
        try:
            summ = json.loads(path.read_text())
            runs, failures = int(summ.get("runs", 0)), int(summ.get("failures", 0))
        except (OSError, ValueError, TypeError):
            runs = failures = 0
        if runs and failures / runs > failed_share:
            kinds = ", ".join(f"{k} {v}" for k, v in (summ.get("status_counts") or {}).items()
                              if k != "ok")
            example = next(iter((summ.get("failure_examples") or {}).values()), "")
            out.append(Flag(study, "failed runs",
                            f"{failures} of {runs} design runs failed ({kinds})"
                            + (f"; e.g. {str(example)[:160]}" if example else ""),
                            str(results / study / "dataset.csv")))
    tpath = results / study / "targets.csv"
    targets = _read(tpath)
    if targets is not None and "status" in targets:
        bad = targets[targets["status"].astype(str) != "ok"]
        if len(bad):
            out.append(Flag(study, "failed targets",
                            f"{len(bad)} of {len(targets)} targets failed to simulate "
                            f"({', '.join(sorted(set(bad['status'].astype(str))))})",
                            str(tpath)))
    return out


def posterior_flags(results: Path, study: str, which: str = "posterior") -> list[Flag]:
    """Unconverged targets of the design posterior (``which`` = ``posterior``) or of
    ``sequential``'s own (``sequential_posterior``)."""
    path = results / study / "calibration" / which / "posterior_summary.csv"
    post = _read(path)
    if post is None or "converged" not in post:
        return []
    bad = post[~_truthy(post["converged"])]
    if bad.empty:
        return []
    targets = sorted(set(bad["target_id"].astype(int))) if "target_id" in bad else []
    what = "posterior" if which == "posterior" else "sequential's posterior"
    return [Flag(study, f"{what} NOT CONVERGED",
                 f"{len(targets)} target(s) {targets[:8]}{' ...' if len(targets) > 8 else ''}"
                 f"{_rhat_ess(bad)}: their intervals are unreliable", str(path))]


# ---- Bayes --------------------------------------------------------------------------

def _truthy(col: pd.Series) -> pd.Series:
    return col.astype(str).str.strip().str.lower().isin(("true", "1", "1.0"))


def _rhat_ess(df: pd.DataFrame) -> str:
    parts = []
    if "r_hat" in df and pd.to_numeric(df["r_hat"], errors="coerce").notna().any():
        parts.append(f"R-hat up to {pd.to_numeric(df['r_hat'], errors='coerce').max():.3f}")
    if "ess_bulk" in df and pd.to_numeric(df["ess_bulk"], errors="coerce").notna().any():
        parts.append(f"bulk ESS down to {pd.to_numeric(df['ess_bulk'], errors='coerce').min():.0f}")
    return f" ({', '.join(parts)})" if parts else ""


def bayes_run_summaries(results: Path, setting: str) -> list[Path]:
    """The per-run ``summary.csv`` files of a setting: ``<method>/summary.csv`` (your
    data) and ``<method>/rep<k>/summary.csv`` (simulated replications)."""
    base = results / "bayes" / setting
    files = sorted(base.glob("*/summary.csv")) + sorted(base.glob("*/rep*/summary.csv"))
    return [f for f in files if f.parent.name != "figures"]


def bayes_flags(results: Path, setting: str) -> list[Flag]:
    out = []
    by_method: dict[str, list[tuple[Path, pd.DataFrame]]] = {}
    for f in bayes_run_summaries(results, setting):
        df = _read(f)
        if df is None or "converged" not in df:
            continue
        bad = df[~_truthy(df["converged"])]
        if len(bad):
            method = str(df["method"].iloc[0]) if "method" in df else f.parent.name
            by_method.setdefault(method, []).append((f, bad))
    for method, runs in by_method.items():
        params = sorted(set().union(*(set(b["parameter"].astype(str)) for _, b in runs)))
        bad = pd.concat([b for _, b in runs])
        where = (f"{len(runs)} replication(s)" if any(f.parent.name.startswith("rep")
                                                      for f, _ in runs) else "the run")
        table = results / "bayes" / setting / "table_params.csv"
        modes = [str(m) for m in bad.get("minor_mode", pd.Series(dtype=str)).dropna()
                 if str(m).strip()]
        # the first mode only (a summary row lists every mode of its parameter)
        n_modes = sum(len(m.split("; ")) for m in modes)
        mode = (f"; a minor mode explored too little: {modes[0].split('; ')[0]}"
                + (f" (+{n_modes - 1} more in the table)" if n_modes > 1 else "")
                if modes else "")
        out.append(Flag(f"Bayes {setting}", f"{method.upper()} chains NOT CONVERGED",
                        f"{where}, parameters {', '.join(params[:8])}"
                        f"{' ...' if len(params) > 8 else ''}{_rhat_ess(bad)}{mode}: run "
                        "longer chains (bayes.sampler.iterations or until_converged)",
                        str(table if table.is_file() else runs[0][0])))
    return out


# ---- all ------------------------------------------------------------------------------

def collect(results: str | Path, studies: Sequence[str] = (), bayes: Sequence[str] = (),
            failed_share: float = 0.1) -> list[Flag]:
    """Every flag of the given metamodel studies and Bayes settings, in that order."""
    root = Path(results)
    flags: list[Flag] = []
    for s in studies:
        flags += simulation_flags(root, s, failed_share)
        flags += metamodel_flags(root, s)
        flags += op_flags(root, s)
        flags += calibration_flags(root, s, failed_share)
        flags += posterior_flags(root, s)
        flags += posterior_flags(root, s, "sequential_posterior")
    for b in bayes:
        flags += bayes_flags(root, b)
    return flags


def count_line(n: int) -> str:
    """The summary's last line."""
    return "no result flagged" if n == 0 else f"{n} result{'s' if n != 1 else ''} flagged"


# ---- warnings of the run's job logs ----------------------------------------------------

MAX_LOGS = 8  # log files listed by name in the console summary
#: a log record of simcalib's own at level WARNING: written for the user to act on
_WARNING = re.compile(r"\bWARNING\b")
#: Python's warnings module (``path.py:88: RuntimeWarning: overflow ...``): a library's
#: internals, counted but not listed (nothing a user can act on)
_RAW = re.compile(r"\b[A-Z]\w*Warning: ")


@dataclass(frozen=True)
class LogWarnings:
    file: str
    count: int
    first: str


def log_warnings(logs: str | Path, since: float | None = None) -> list[LogWarnings]:
    """simcalib's WARNING lines of the job logs under ``logs`` written at or after
    ``since`` (a time stamp: this run's jobs only).  Raw Python warnings
    (``...Warning:`` lines from numerical libraries) are left out: the trust block
    lists only what a user should act on (:func:`raw_warning_count` counts them)."""
    out = []
    for f, lines in _log_lines(logs, since):
        mine = [ln for ln in lines if _WARNING.search(ln) and not _RAW.search(ln)]
        if mine:
            first = re.sub(r"^\d{4}-\d\d-\d\d [\d:,]+ WARNING ", "", mine[0].strip())
            out.append(LogWarnings(str(f), len(mine), first[:220]))
    return out


def raw_warning_count(logs: str | Path, since: float | None = None) -> int:
    """Raw Python warning lines of this run's job logs (not listed)."""
    return sum(sum(bool(_RAW.search(ln)) and not _WARNING.search(ln) for ln in lines)
               for _, lines in _log_lines(logs, since))


def _log_lines(logs: str | Path, since: float | None) -> list[tuple[Path, list[str]]]:
    out = []
    for f in sorted(Path(logs).rglob("*.log")):
        try:
            if since is not None and f.stat().st_mtime < since:
                continue
            out.append((f, f.read_text(errors="replace").splitlines()))
        except OSError:
            continue
    return out


#: what a flag's own job logs say when they warn of it: such a warning repeats the flag
_REPEATS = {"metamodel": ("min_r2",), "NOT CONVERGED": ("did not converge", "not converge"),
            "MILP not proven optimal": ("not proven", "time limit", "unproven"),
            "failed": ("failed",)}


def covered(line: str, flags: Sequence[Flag]) -> bool:
    """A log warning that only repeats one of ``flags`` (the flag, with its file, is
    what to act on: the console lists it once)."""
    text = line.lower()
    return any(key in f.what and any(p in text for p in phrases)
               for f in flags for key, phrases in _REPEATS.items())


def console_summary(results: str | Path, studies: Sequence[str] = (),
                    bayes: Sequence[str] = (), failed_share: float = 0.1,
                    logs: str | Path | None = None, since: float | None = None,
                    failed: bool = False, page: str | None = None,
                    width: int = 88, report_cmd: str | None = None) -> str:
    """The block printed at the end of a run: the job logs' warnings of this run, each
    flagged result with the file to open, the answer per study (with its 90 %
    intervals, and why where it lies outside them), the report command that works as
    printed (``report_cmd``: with the run's ``--configfile``), and the last line
    "N results flagged"."""
    from simcalib.report.console import answer_block, report_command

    flags = collect(results, studies, bayes, failed_share)
    report_cmd = report_cmd or report_command()
    bar = "=" * width
    lines = [bar, "simcalib: what to trust" + (" (the run FAILED; results so far)"
                                               if failed else ""), bar]
    warns = log_warnings(logs, since) if logs is not None else []
    repeated = [w for w in warns if covered(w.first, flags)]
    warns = [w for w in warns if w not in repeated]
    if warns:
        lines.append(f"Warnings in this run's job logs ({sum(w.count for w in warns)} lines"
                     + (f"; {len(repeated)} more log file(s) repeat the flags below"
                        if repeated else "") + "):")
        for w in warns[:MAX_LOGS]:
            lines.append(f"  {w.file} ({w.count}): {w.first[:140]}")
        if len(warns) > MAX_LOGS:
            lines.append(f"  ... and {len(warns) - MAX_LOGS} more log files")
    for f in flags:
        lines.append(f"FLAG {f.line()}")
        lines.append(f"     open {f.file}")
    lines += answer_block(results, studies)
    if failed:
        lines.append("The run is partial: `snakemake --report` needs every result of the "
                     f"config; `{report_cmd} results/<study>/all.done` reports the studies "
                     "that finished.")
    elif page and Path(page).is_file():
        lines.append(f"The answer, first: {page} (or `{report_cmd}`)")
    lines.append(count_line(len(flags)))
    return "\n".join(lines)


def now() -> float:
    """A time stamp for ``since`` (the ``onstart`` handler records it), a second early
    so that file systems with coarse time stamps keep the first job's log."""
    return math.floor(time.time()) - 1.0


__all__ = ["Flag", "LogWarnings", "bayes_flags", "collect", "console_summary", "count_line",
           "log_warnings", "now", "raw_warning_count"]

