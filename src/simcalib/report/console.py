"""The answer in the console's end block: per study, the recommended strategy's
calibrated inputs per target, each with its 90 % interval where a posterior was
sampled, and where the answer lies outside its posterior, why (the same check and
words as the read-me-first page, :mod:`simcalib.report.agree`); then the report
command that works as printed (with the ``--configfile`` the run used).

Why in the console: a newcomer reads the last screen of the run first; it should hold
the answer, not only the flags.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib.report import agree
from simcalib.report.recommend import study_pick
from simcalib.report.sections import read_if_exists

#: targets listed per study (the page has them all)
MAX_TARGETS = 6


def _fmt(v: float) -> str:
    return f"{v:.4g}" if np.isfinite(v) else "nan"


def _target_line(tid: int, xs: dict[str, float], iv: dict[str, tuple[float, float]],
                 note: str, why: str) -> str:
    parts = []
    for n, v in xs.items():
        lo_hi = iv.get(n)
        parts.append(f"{n} {_fmt(v)}" + (f" [{_fmt(lo_hi[0])}, {_fmt(lo_hi[1])}]"
                                        if lo_hi else ""))
    line = f"    target {tid}: " + ", ".join(parts) + (f" ({note})" if note else "")
    if why:
        line += f"\n      OUTSIDE its 90 % region: {why}"
    return line


def _intervals(post: pd.DataFrame | None, tid: int) -> dict[str, tuple[float, float]]:
    if post is None or not {"target_id", "input", "q5", "q95"} <= set(post.columns):
        return {}
    p = post[post["target_id"] == tid]
    return {str(r.input): (float(r.q5), float(r.q95)) for r in p.itertuples()}


def study_lines(results: Path, study: str) -> list[str]:
    """The study's answer lines (empty without a calibration summary)."""
    cal = results / study / "calibration"
    got = study_pick(cal)
    if got is None:
        return []
    summ, pick = got
    if pick is None:
        return [f"  {study}: no strategy calibrated any target"]
    best, why = pick
    rec = read_if_exists(cal / f"{best}.csv")
    if rec is None or "target_id" not in rec:
        return []
    seq = agree.seq_answers(results, study) if best == "sequential" else None
    if seq is not None:
        rows, post = seq, read_if_exists(agree.seq_dir(results, study) / "posterior_summary.csv")
        source = "sequential's posterior"
    else:
        rows = rec
        post = read_if_exists(agree.design_dir(results, study) / "posterior_summary.csv")
        check = agree.design_check(results, study, rec) if post is not None else None
        if check is not None:
            rows = rec.merge(check, on="target_id", how="left")
        source = "the metamodel posterior" if post is not None else ""
    names = [c[2:] for c in rows.columns if c.startswith("x_")]
    head = f"  {study}: {best} ({why})"
    if source:
        head += f"; 90 % intervals of {source}"
    out = [head]
    for r in rows.head(MAX_TARGETS).itertuples(index=False):
        d = r._asdict()
        tid = int(d["target_id"])
        xs = {n: float(d[f"x_{n}"]) for n in names}
        bad = str(d.get("why_outside", "") or "")
        bad = "" if bad.lower() == "nan" else bad
        out.append(_target_line(tid, xs, _intervals(post, tid),
                                str(d.get("answer_rule", "") or ""), bad))
    if len(rows) > MAX_TARGETS:
        out.append(f"    ... {len(rows) - MAX_TARGETS} more targets on the read-me-first page")
    curves = results / study / "curves"
    fig = curves / f"{best}.png"
    if fig.is_file():   # a series study: the curves, the answer's and the observed
        out.append(f"    curves (observed vs {best}'s answer, with the band of re-runs): {fig}")
    # the extra target sets' curves (targets_<name>/), as the read-me-first page shows
    for extra in sorted(curves.glob(f"targets_*/{best}.png")):
        out.append(f"    curves of target set {extra.parent.name[len('targets_'):]!r}: {extra}")
    return out


def answer_block(results: str | Path, studies: Sequence[str]) -> list[str]:
    """Every study's answer lines under one heading (empty when none has an answer)."""
    lines: list[str] = []
    for s in studies:
        lines += study_lines(Path(results), s)
    return (["The answer (per study: the recommended strategy's inputs per target):"]
            + lines) if lines else []


def report_command(configfiles: Sequence[str] = (), snakefile: str | None = None,
                   directory: str | None = None) -> str:
    """``snakemake --report results/report.html`` with the options that make it find
    this run's results: the ``--configfile`` the run used (the default config
    otherwise: "Missing metadata" for every file of the quick run), and ``-s``/``-d``
    when the run named them."""
    cmd = ["snakemake"]
    if snakefile:
        cmd += ["-s", snakefile]
    if directory:
        cmd += ["-d", directory]
    cmd += ["--report", "results/report.html"]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    return " ".join(shlex.quote(c) for c in cmd)
