"""Calibration to observed targets, end to end at the CLI: an observations file (no
true inputs, per-output sds and weights) -> sim-targets -> cal-anchors / cal-run ->
cal-summary, and the errors for bad observation files before any job runs."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib import io
from simcalib.cli import main
from simcalib.config import validate_config
from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.model import Metamodel
from simcalib.metamodel.training import train_metamodel
from simcalib.study import Study
from simcalib.study.simulation import make_design, simulate_rows
from tests.fixtures.rosen_cli import CFG

SEED = 5
# the Rosenbrock study of test_strategies_cli.py, without its simulated targets
BASE = {k: v for k, v in CFG.items() if k != "targets"}
SOLVER = {"time_limit": 10, "obbt": {"enabled": False}, "warm_start": {"samples": 500}}
# hidden true inputs of the "measurements" (never written to the file)
TRUE = [(5.3, 27.0, 5.0, 10.0), (9.6, 95.0, 10.0, 20.0)]
SD = 2.0          # measurement sd of f


def _observations(path: Path) -> Path:
    """f(x, y; a, b) + N(0, SD) at TRUE, with the sd column (no input columns)."""
    r = np.random.default_rng(0)
    rows = []
    for i, (x, y, a, b) in enumerate(TRUE):
        f = (a - x) ** 2 + b * (y - x * x) ** 2
        rows.append({"target_id": 10 + i, "a": a, "b": b, "f": f + r.normal(0, SD),
                     "sd_f": SD})
    io.write_csv(pd.DataFrame(rows), path)
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("obs")
    study = Study("rosen", BASE)
    ds = simulate_rows(study, make_design(study, SEED), SEED)
    mm, _ = train_metamodel(ds, study.input_names, study.outputs,
                                      {"hidden": [8, 8], "epochs": 40, "patience": 40,
                                       "threads": 1}, SEED, "rosen")
    mm.save(d / "mm")
    obs = _observations(d / "obs.csv")
    cfg = {**BASE, "targets": {"file": str(obs)}}
    params = {**{k: cfg[k] for k in ("simulator", "parameters", "contexts", "constraints",
                                     "targets")},
              "calibration": {"budget": 6, "proximity": 0.05}}
    (d / "params.json").write_text(json.dumps(params))
    return {"dir": d, "params": f"@{d / 'params.json'}", "obs": obs, "cfg": cfg}


def _common(setup) -> list[str]:
    d = setup["dir"]
    return ["--study", "rosen", "--params", setup["params"], "--seed", str(SEED),
            "--solver", json.dumps(SOLVER), "--metamodel", str(d / "mm")]


def test_observed_pipeline(setup, caplog):
    d: Path = setup["dir"]
    assert main(["sim-targets", "--study", "rosen", "--params", setup["params"], "--seed",
                 str(SEED), "--output", str(d / "targets.csv")]) == 0
    t = pd.read_csv(d / "targets.csv")
    assert list(t["target_id"]) == [10, 11] and (t["status"] == "ok").all()
    assert "x" not in t and "y" not in t and {"a", "b", "f", "sd_f"} <= set(t.columns)

    common = _common(setup)
    assert main(["cal-anchors", *common, "--targets", str(d / "targets.csv"),
                 "--output", str(d / "anchors.csv")]) == 0
    recs = {}
    for s in ("rs", "op", "pts"):
        extra = ["--anchors", str(d / "anchors.csv")] if s != "rs" else []
        assert main(["cal-run", *common, "--strategy", s, "--targets", str(d / "targets.csv"),
                     *extra, "--output", str(d / f"{s}.csv"),
                     "--output-runs", str(d / f"runs_{s}.csv")]) == 0
        rec = pd.read_csv(d / f"{s}.csv")
        recs[s] = rec
        # no truth: no distance-to-truth columns at all
        assert not {"distance", "anchor_distance", "true_x", "true_y"} & set(rec.columns)
        assert (rec["status"] == "ok").all() and np.isfinite(rec["error"]).all()
        # Delta in measurement sds: |S(x) - z| / sd_f of the re-simulated chosen point
        expect = np.abs(rec["sim_f"] - rec["target_f"]) / SD
        np.testing.assert_allclose(rec["error"], expect, rtol=1e-9)
        assert (rec["op_unproven"] >= 0).all()
        runs = pd.read_csv(d / f"runs_{s}.csv")
        assert len(runs) == (1 if s == "op" else 6) * 2
        # the answer is the best re-simulated run of the target, scored the same way
        best = runs.groupby("target_id")["error"].min()
        np.testing.assert_allclose(rec.set_index("target_id")["error"], best, rtol=1e-12)
        np.testing.assert_allclose(runs["error"],
                                   np.abs(runs["f"] - t.set_index("target_id").loc[
                                       runs["target_id"], "f"].to_numpy()) / SD, rtol=1e-9)

    pairs = [f"{s}={d / f'{s}.csv'}" for s in recs]
    info = json.loads((d / "mm" / "metamodel.json").read_text())
    r2 = min(info["test_r2"].values())

    def info_with(min_r2: float) -> str:
        """metamodel.json as if trained under another threshold (the summary reads the
        threshold recorded in the file, never one passed again)."""
        path = d / f"meta_{min_r2}.json"
        path.write_text(json.dumps({**info, "min_r2": min_r2}))
        return str(path)

    caplog.set_level(logging.WARNING)
    assert main(["cal-summary", "--records", *pairs, "--output", str(d / "summary.csv"),
                 "--output-figure", str(d / "strategies.png"), "--metamodel-info",
                 info_with(1.01)]) == 0
    summ = pd.read_csv(d / "summary.csv")
    assert "median_distance" not in summ
    assert list(summ["strategy"]) == ["rs", "op", "pts"]
    np.testing.assert_allclose(summ["metamodel_min_test_r2"], r2)
    assert not summ["metamodel_ok"].any()       # R2 <= 1 < 1.01: flagged
    assert "below metamodel.min_r2" in caplog.text
    assert (d / "strategies.png").stat().st_size > 0
    assert main(["cal-summary", "--records", *pairs, "--output", str(d / "summary2.csv"),
                 "--metamodel-info", info_with(r2 - 1e-6)]) == 0
    assert pd.read_csv(d / "summary2.csv")["metamodel_ok"].all()


def test_weights_enter_delta_and_op(setup):
    """A weight of 3 triples Delta (on top of the sd) and is handed to OP as the
    objective weight (in units of the metamodel's training sd)."""
    from simcalib.metamodel.strategies.ledger import (
        TargetRun,
        op_unproven,
        output_scale,
        read_targets,
    )

    d: Path = setup["dir"]
    t = pd.read_csv(d / "targets.csv")
    t["weight_f"] = 3.0
    study = Study("rosen", setup["cfg"])
    mm = Metamodel.load(d / "mm")
    tgt = read_targets(t, study, mm)
    assert tgt[0].x_true is None
    seen = {}

    def fake_opt(mm_, space, target, context, solver, box=None, seed=0, weights=None):
        seen["weights"] = weights
        return None

    p = TargetRun(study, mm, tgt[0], 2, 0.1, {"sampling": "uniform"}, {}, SEED, "op", fake_opt)
    s = output_scale(mm)[0]
    np.testing.assert_allclose(p.scale, [SD / 3.0])
    np.testing.assert_allclose(p.err(np.array([[tgt[0].z[0] + 1.0]])), [3.0 / SD])
    p.op(None, "full")
    assert seen["weights"] == {"f": pytest.approx(3.0 * s / SD)}
    assert p.op_calls[-1]["fallback"]          # fake solver returned nothing: fallback
    assert op_unproven(p.op_calls) == 1


def _config(study_cfg: dict) -> dict:
    return {"seed": 1, "studies": {"rosen": study_cfg}}


@pytest.mark.parametrize("edit, column", [
    (lambda df: df.drop(columns=["f"]), "f"),
    (lambda df: df.assign(colour=1.0), "colour"),
    (lambda df: df.assign(x=5.0), "x"),
    (lambda df: df.assign(f=["1.0", "abc"]), "f"),
    (lambda df: df.assign(b=[10.0, np.nan]), "b"),
    (lambda df: df.assign(sd_f=[1.0, 0.0]), "sd_f"),
    (lambda df: df.assign(weight_f=[1.0, 0.0]), "row 2"),
    (lambda df: df.drop(columns=["a"]), "a"),
])
def test_bad_observation_files_fail_at_validation(setup, tmp_path, edit, column):
    bad = edit(pd.read_csv(setup["obs"]))
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    cfg = copy.deepcopy({**BASE, "targets": {"file": str(path)}})
    with pytest.raises(DataError) as exc:
        validate_config(_config(cfg))
    msg = str(exc.value)
    assert str(path) in msg and column in msg and "studies.rosen.targets.file" in msg


def test_targets_need_n_or_file(setup):
    for targets in ({}, {"n": 2, "file": str(setup["obs"])}):
        with pytest.raises(ConfigError, match="studies.rosen.targets"):
            validate_config(_config({**copy.deepcopy(BASE), "targets": targets}))
    with pytest.raises(DataError, match="not found"):
        validate_config(_config({**copy.deepcopy(BASE), "targets": {"file": "no/such.csv"}}))
