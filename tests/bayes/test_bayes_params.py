"""Rule params carry what a job reads, not where the config lies (issue 40, item 6).

The same config from another folder, or loaded and dumped again (keys sorted), gives
the same params, so Snakemake replans nothing; a user model is named by the
directory it was found in and its content hash, so editing it reruns its fits.
"""

from __future__ import annotations

import copy
import json

import yaml

from simcalib.bayes.params import data_params, replication_params, run_params
from simcalib.config import schema_defaults
from tests.fixtures.bayes_data import DECAY


def _config(bayes: dict) -> dict:
    return {"bayes": schema_defaults("bayes.schema.yaml", base=bayes)}


def test_a_config_from_another_folder_gives_the_same_params(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "decaymodel.py").write_text(DECAY)
    (project / "decay.csv").write_text("time,x\n0,1\n1,2\n2,3\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = _config({"settings": ["two_mass", "decay"], "setting_options": {
        "decay": {"model": "decaymodel:setting", "data": "project/decay.csv"}}})
    here = run_params(cfg, "decay", [str(project)])
    there = run_params(cfg, "decay", [str(elsewhere), str(project)])
    assert here == there
    assert here["search_dirs"] == ["project"] and here["options"]["data"] == "project/decay.csv"
    assert len(here["model_sha256"]) == 64
    # a built-in setting reads no user file: nothing of the folders
    assert run_params(cfg, "two_mass", [str(project)]) == run_params(cfg, "two_mass", [])
    assert data_params(cfg, "two_mass", [str(project)])["search_dirs"] == []
    # editing the model changes its hash (its fits rerun)
    (project / "decaymodel.py").write_text(DECAY + "\n# edited\n")
    assert run_params(cfg, "decay", [str(project)])["model_sha256"] != here["model_sha256"]


def test_a_yaml_round_trip_gives_the_same_params():
    raw = {"settings": ["two_mass"], "sampler": {"iterations": 300, "burn_in": 100,
                                                 "theta_kernel": "hmc",
                                                 "leapfrog_steps": {"mos": 3, "koh": 6}},
           "setting_options": {"two_mass": {"bounds": {"k2": [1, 9], "k1": [2, 8]},
                                            "sampler": {"thin": 2}}}}
    dumped = yaml.safe_load(yaml.safe_dump(copy.deepcopy(raw)))    # sort_keys=True
    assert list(dumped["sampler"]) != list(raw["sampler"])
    for fn in (run_params, data_params):
        assert json.dumps(fn(_config(raw), "two_mass")) == json.dumps(
            fn(_config(dumped), "two_mass"))
    assert json.dumps(replication_params(_config(raw))) == json.dumps(
        replication_params(_config(dumped)))
