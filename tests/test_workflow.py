"""The whole workflow on the tiny config, end to end: every stage's files appear, a
second run recomputes nothing, and a config change reruns exactly what it touches."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import TINY, run_snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workflow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wd = tmp_path_factory.mktemp("workflow")
    run_snakemake(wd, timeout=1500)
    return wd


def _jobs_planned(workdir: Path, cfg: Path, *extra: str) -> dict[str, int]:
    """Rule name -> job count that a dry run would execute."""
    proc = run_snakemake(workdir, "-n", "--quiet", "rules", *extra, configfile=cfg)
    counts: dict[str, int] = {}
    in_table = False
    for line in proc.stdout.splitlines():
        if re.match(r"^\s*job\s+count", line):
            in_table = True
            continue
        m = re.match(r"^\s*([A-Za-z_][\w]*)\s+(\d+)\s*$", line)
        if in_table and m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def test_every_study_has_dataset_and_targets(workflow_dir: Path) -> None:
    cfg = yaml.safe_load(TINY.read_text())
    for study, scfg in cfg["studies"].items():
        data = pd.read_csv(workflow_dir / "results" / study / "dataset.csv")
        names = list(scfg["parameters"]) + list(scfg.get("contexts", {}))
        assert {"run_id", *names, "status", "message"} <= set(data.columns)
        assert (data["status"] == "ok").mean() > 0.9
        targets = pd.read_csv(workflow_dir / "results" / study / "targets.csv")
        assert len(targets) == scfg["targets"]["n"]
        assert {"target_id", *names, "status"} <= set(targets.columns)


def test_second_run_recomputes_nothing(workflow_dir: Path) -> None:
    proc = run_snakemake(workflow_dir, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def _changed_config(tmp: Path, edit) -> Path:  # noqa: ANN001
    cfg = copy.deepcopy(yaml.safe_load(TINY.read_text()))
    edit(cfg)
    path = tmp / "changed.yaml"
    # keep the key order: parameters' order is meaningful and part of the params
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_metamodel_width_change_retrains_without_resimulating(workflow_dir: Path,
                                                              tmp_path: Path) -> None:
    def edit(cfg: dict) -> None:
        cfg["studies"]["rosenbrock"]["metamodel"]["hidden"] = [12, 12]

    jobs = _jobs_planned(workflow_dir, _changed_config(tmp_path, edit))
    assert jobs.get("mm_train", 0) == 1, jobs
    for rule in ("sim_design", "sim_run", "sim_merge", "sim_targets"):
        assert rule not in jobs, f"{rule} would rerun: {jobs}"


def test_proximity_change_does_not_retrain(workflow_dir: Path, tmp_path: Path) -> None:
    def edit(cfg: dict) -> None:
        cfg["studies"]["rosenbrock"]["calibration"]["proximity"] = 0.123

    jobs = _jobs_planned(workflow_dir, _changed_config(tmp_path, edit))
    assert jobs.get("cal_run", 0) >= 1, jobs
    for rule in ("mm_train", "sim_run", "sim_design", "mm_optimize"):
        assert rule not in jobs, f"{rule} would rerun: {jobs}"


def test_summary_and_html_report(workflow_dir: Path) -> None:
    summary = (workflow_dir / "results" / "report" / "summary.md").read_text()
    assert "Paper 1" in summary and "Paper 2" in summary and "Paper 3" in summary
    assert "Runtime" in summary
    runtime = pd.read_csv(workflow_dir / "results" / "report" / "runtime.csv")
    assert runtime["jobs"].sum() > 10 and (runtime["wall_s_total"] > 0).all()
    out = workflow_dir / "report.html"
    run_snakemake(workflow_dir, "--report", str(out))
    html = out.read_text(errors="replace")
    for category in ("Paper 1", "Paper 2", "Paper 3"):
        assert category in html, category
