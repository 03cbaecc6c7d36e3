"""A user's own model and data through Snakemake: model module and data
file beside the user's config file, no PYTHONPATH, no truth; every output appears and
the figures and tables say that the truth is unknown."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import TINY, run_snakemake
from tests.fixtures.bayes_data import DECAY, _decay_data

pytestmark = pytest.mark.slow


def test_real_data_setting_runs_through_the_workflow(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "decaymodel.py").write_text(DECAY)
    _decay_data(project / "decay.csv")
    cfg = copy.deepcopy(yaml.safe_load(TINY.read_text()))
    cfg["bayes"]["settings"] = ["decay"]
    cfg["bayes"]["setting_options"] = {"decay": {"model": "decaymodel:setting",
                                                 "data": "decay.csv", "positive": True}}
    (project / "config.yaml").write_text(yaml.safe_dump(cfg))
    work = tmp_path / "work"
    work.mkdir()
    base = "results/bayes/decay"
    targets = [f"{base}/table_params.md", f"{base}/table_output.md",
               f"{base}/figures/predictive.png", f"{base}/mos/figures/pair.png",
               f"{base}/koh/figures/trace.png"]
    run_snakemake(work, *targets, configfile=project / "config.yaml", timeout=900)
    for t in targets:
        assert (work / t).stat().st_size > 500, t
    for m in ("koh", "mos"):
        summ = pd.read_csv(work / base / m / "summary.csv")
        assert summ["parameter"].tolist()[:3] == ["gamma", "delta", "x0"]
        assert {"r_hat", "ess_bulk", "converged"} <= set(summ.columns)
        pred = pd.read_csv(work / base / m / "predictive.csv")
        assert (pred["xi_lo"] > 0).all()  # positive: bands stay above zero
    assert not (work / base / "data").exists()  # nothing simulated
    md = (work / base / "table_params.md").read_text()
    assert "truth is unknown" in md
    # 200 iterations cannot converge: the table says so
    assert "not converged" in md.lower()


def test_bad_user_model_stops_the_workflow_before_any_job(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "decaymodel.py").write_text(DECAY)
    pd.DataFrame({"time": [0.0, 1.0, 2.0], "x": [1.0, 2.0, 3.0], "zz": [1, 2, 3]}).to_csv(
        project / "bad.csv", index=False)
    cfg = copy.deepcopy(yaml.safe_load(TINY.read_text()))
    cfg["bayes"]["settings"] = ["decay"]
    cfg["bayes"]["setting_options"] = {"decay": {"model": "decaymodel:setting",
                                                 "data": "bad.csv"}}
    (project / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run_snakemake(tmp_path, "-n", configfile=project / "config.yaml", check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "bayes.setting_options.decay.data" in out and "zz" in out


def test_identical_config_from_another_folder_or_a_yaml_round_trip_reruns_nothing(
        tmp_path: Path) -> None:
    """Rule params used to carry the config's folder (``search_dirs``): the same config
    copied elsewhere replanned every Bayes job.  Now they carry what a job reads."""
    import shutil

    work = tmp_path / "work"
    work.mkdir()
    base = "results/bayes/two_mass"
    targets = [f"{base}/metrics.csv", f"{base}/table_params.md",
               f"{base}/figures/output_uq_rep0.png"]
    run_snakemake(work, *targets, timeout=900)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for f in TINY.parent.iterdir():         # the config and the files it names
        shutil.copy(f, elsewhere / f.name)
    copied = elsewhere / TINY.name
    round_trip = elsewhere / "round_trip.yaml"
    round_trip.write_text(yaml.safe_dump(yaml.safe_load(TINY.read_text())))  # keys sorted
    for cfg in (copied, round_trip):
        proc = run_snakemake(work, *targets, "-n", configfile=cfg)
        assert "Nothing to be done" in proc.stdout + proc.stderr, (cfg, proc.stdout[-3000:])
