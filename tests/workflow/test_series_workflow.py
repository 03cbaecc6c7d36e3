"""A study with a curve in the workflow (issue 42): every rule that rebuilds the study
carries its `series` with the points resolved, so a change of the points reruns the
simulations, while new observed values at the same points rerun only the targets.

The study is the shipped logistic-curve program (a command, the curve read from its
CSV rows) with its points taken from an observations file, as a user's would be."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.slow

SIM_OUTPUTS = ["results/curve/dataset.csv", "results/curve/targets.csv"]


def observations(path: Path, days: list[int], scale: float = 1.0) -> Path:
    rows = [f"0,{d},{scale * (0.5 + 0.1 * d):.4f},0.1" for d in days]
    path.write_text("target_id,day,cases,sd_cases\n" + "\n".join(rows) + "\n")
    return path


def config(path: Path, obs: Path, **study: object) -> Path:
    cfg = {
        "seed": 3,
        "threads": 1,
        "studies": {"curve": {
            "simulator": {"type": "command", "options": {
                "command": [sys.executable,
                            str(REPO / "resources/example_simulator/logistic_curve.py"),
                            "--config", "{input_file}", "--output", "{output_file}"],
                "input_file": {"format": "lines", "extra": {"seed": "{seed}"}},
                "output_file": "Summary0", "parser": "csv", "timeout": 20}},
            "parameters": {"rate": {"lower": 0.2, "upper": 0.5},
                           "capacity": {"lower": 50.0, "upper": 150.0}},
            "series": {"cases": "day"},
            "design": {"method": "sobol", "n": 16, "chunk_size": 8},
            "targets": {"file": str(obs)},
            "metamodel": {"hidden": [4], "epochs": 5},
            "optimize": {"solver": "highs-default"},
            "calibration": {"enabled": True, "strategies": ["rs", "op"], "budget": 2},
            **study}},
        "solvers": {"highs-default": {"backend": "highs"}},
        "bayes": {"settings": []},
        "multisource": {"analytic": {"enabled": False}, "hardening": {"enabled": False}},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def snakemake(workdir: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d",
           str(workdir), "--configfile", str(cfg), "--cores", "1", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    return proc


def planned(workdir: Path, cfg: Path, *targets: str) -> dict[str, int]:
    """Rule -> jobs a dry run would execute."""
    out = snakemake(workdir, cfg, *targets, "-n", "--quiet", "rules").stdout
    counts = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([A-Za-z_]\w*)\s+(\d+)\s*$", line)
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def params_of(workdir: Path, cfg: Path, rule: str) -> str:
    """The JSON a dry run hands one of ``rule``'s jobs in --params."""
    out = snakemake(workdir, cfg, *SIM_OUTPUTS, "-n", "-p", "--forceall").stdout
    line = next(ln for ln in out.splitlines() if f"simcalib {rule.replace('_', '-')} "
                in ln)
    return line


def test_series_study_plans_its_chain_and_reruns_what_a_points_change_touches(
        tmp_path: Path) -> None:
    wd = tmp_path / "wf"
    wd.mkdir()
    obs = observations(tmp_path / "obs.csv", [2, 4, 6, 8])
    cfg = config(tmp_path / "c.yaml", obs)
    # the whole chain of the study is planned: design, runs, targets, metamodel, calibration
    jobs = planned(wd, cfg)
    assert jobs["sim_design"] == 1 and jobs["sim_run"] == 2 and jobs["sim_targets"] == 1
    assert jobs["mm_train"] == 1 and jobs["sim_merge"] == 1, jobs
    assert any(r.startswith("cal_") for r in jobs), jobs
    # the simulate rules carry the series with the observed points (not the file)
    line = params_of(wd, cfg, "sim_run")
    assert '"series":{"cases":{"index":"day","points":[2.0,4.0,6.0,8.0]}}' in line, line

    snakemake(wd, cfg, *SIM_OUTPUTS)
    assert planned(wd, cfg, *SIM_OUTPUTS) == {}
    # new observed values at the same days: the targets only, no simulation
    observations(obs, [2, 4, 6, 8], scale=2.0)
    jobs = planned(wd, cfg, *SIM_OUTPUTS)
    assert jobs == {"sim_targets": 1}, jobs
    snakemake(wd, cfg, *SIM_OUTPUTS)
    # another day observed: the points change, every run and the targets are redone
    observations(obs, [2, 4, 6, 8, 10], scale=2.0)
    jobs = planned(wd, cfg, *SIM_OUTPUTS)
    assert jobs.get("sim_run") == 2 and jobs.get("sim_targets") == 1, jobs
    assert "sim_design" not in jobs, jobs        # the design does not depend on the curve
    # declared points instead of observed ones (the same days): nothing to redo
    snakemake(wd, cfg, *SIM_OUTPUTS)
    same = config(tmp_path / "d.yaml", obs, series={
        "cases": {"index": "day", "points": [2, 4, 6, 8, 10]}})
    assert planned(wd, same, *SIM_OUTPUTS) == {}
    # a metamodel setting never re-simulates a curve study
    other = config(tmp_path / "e.yaml", obs, metamodel={"hidden": [6], "epochs": 5})
    assert not {"sim_run", "sim_targets"} & set(planned(wd, other, *SIM_OUTPUTS))
    shutil.rmtree(wd / "results", ignore_errors=True)
