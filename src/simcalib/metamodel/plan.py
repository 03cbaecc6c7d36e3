"""How many calibration jobs a config plans, checked before Snakemake builds its graph.

Each strategy's targets are split into blocks of ``calibration.block_size``, one
``cal_run_block`` job each (workflow/rules/calibrate.smk).  100,000 generated targets,
or an observations file of 200,000 rows, made ~300,000 jobs and left ``snakemake -n``
at "Building DAG of jobs..." for minutes with no word; ``max_chunks`` counted
simulation jobs only.  The top-level ``max_cal_jobs`` caps one study's calibration
jobs, and the message names ``block_size``, the target count and the block size that
fits.  Registered on import (``simcalib.config.CHECK_MODULES``), after the study
checks, so an observations file is known to be readable when its rows are counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcalib.config import semantic_check
from simcalib.errors import ConfigError
from simcalib.study.observations import resolve, target_sets


def count_targets(tcfg: Mapping[str, Any]) -> int:
    """Targets of one target set: ``n``, or the data rows of its observations file
    (lines that are neither blank nor ``#`` comments, less the header)."""
    if "n" in tcfg:
        return int(tcfg["n"])
    with open(resolve(tcfg["file"]), encoding="utf-8", errors="replace") as fh:
        rows = sum(1 for line in fh if line.strip() and not line.lstrip().startswith("#"))
    return max(rows - 1, 1)


def target_counts(cfg: Mapping[str, Any]) -> dict[str, tuple[int, list[str]]]:
    """Per calibrated target set (by its key in the study), the number of targets and
    the strategies run on it: the study's targets (and each PtS sweep value, which
    recalibrates them), the extra target sets calibration lists."""
    cal = cfg.get("calibration") or {}
    sets = target_sets(cfg)
    out = {"targets": (count_targets(sets["targets"]), list(cal.get("strategies") or []))}
    for r in cal.get("sweep") or []:
        out[f"sweep R={r:g}"] = (out["targets"][0], ["pts"])
    for which in cal.get("extra_targets") or []:
        if which in sets:
            out[f"extra_targets.{which}"] = (count_targets(sets[which]),
                                             list(cal.get("extra_strategies") or []))
    return out


def calibration_jobs(counts: Mapping[str, tuple[int, list[str]]], block_size: int) -> int:
    """``cal_run``/``cal_run_block`` jobs: ceil(targets / block_size) per strategy and
    target set, one for a joint strategy (it searches all its targets at once)."""
    from simcalib.metamodel.strategies.registry import registry

    reg = registry()
    total = 0
    for n, strategies in counts.values():
        for s in strategies:
            joint = s in reg and reg[s].joint is not None
            total += 1 if joint else max(1, -(-n // max(1, block_size)))
    return total


def smallest_block_size(counts: Mapping[str, tuple[int, list[str]]], cap: int) -> int | None:
    """The smallest ``block_size`` whose jobs fit under ``cap`` (None: none does)."""
    hi = max([n for n, _ in counts.values()] or [1])
    if calibration_jobs(counts, hi) > cap:
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if calibration_jobs(counts, mid) > cap else (lo, mid)
    return lo


@semantic_check
def check_calibration_jobs(config: Mapping[str, Any]) -> None:
    """At most ``max_cal_jobs`` calibration jobs per study."""
    cap = int(config["max_cal_jobs"])
    for name, cfg in (config.get("studies") or {}).items():
        cal = cfg.get("calibration") or {}
        if not cal.get("enabled"):  # a study without the section: schema-defaulted off
            continue
        counts = target_counts(cfg)
        size = int(cal["block_size"])
        jobs = calibration_jobs(counts, size)
        if jobs <= cap:
            continue
        fit = smallest_block_size(counts, cap)
        sets = ", ".join(f"{n:,} targets ({k}) x {len(s)} strategies" for k, (n, s) in
                         counts.items())
        fix = (f"raise block_size to at least {fit}" if fit else
               "calibrate fewer targets or strategies")
        raise ConfigError(f"studies.{name}.calibration.block_size",
                          f"{sets}, in blocks of {size}, make {jobs:,} calibration jobs, over "
                          f"the cap max_cal_jobs = {cap:,} (a graph that size takes Snakemake "
                          f"minutes to plan); {fix} (or the top-level 'max_cal_jobs' if you "
                          "mean it)")
