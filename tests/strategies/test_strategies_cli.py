"""The calibration verbs end to end with a real (tiny) metamodel and the real MILP:
anchors -> strategies -> summary / sweep / contexts / noise tables and figures, and
the one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib import io
from simcalib.cli import main
from simcalib.metamodel.training import train_metamodel
from simcalib.study import Study
from simcalib.study.simulation import make_design, make_targets, simulate_rows
from tests.fixtures.rosen_cli import CFG

SEED = 3
SOLVER = {"time_limit": 10, "obbt": {"enabled": False}, "warm_start": {"samples": 500}}


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("cal")
    study = Study("rosen", CFG)
    ds = simulate_rows(study, make_design(study, SEED), SEED)
    mm, _ = train_metamodel(ds, study.input_names, study.outputs,
                                      {"hidden": [8, 8], "epochs": 40, "patience": 40,
                                       "threads": 1}, SEED, "rosen")
    mm.save(d / "mm")
    for which, name in (("targets", "targets.csv"), ("oos", "targets_oos.csv")):
        t = simulate_rows(study, make_targets(study, SEED, which), SEED,
                          stream=f"targets:{which}", id_column="target_id")
        io.write_csv(t, d / name)
    params = {**{k: CFG[k] for k in ("simulator", "parameters", "contexts", "constraints")},
              "calibration": {"budget": 8, "proximity": 0.05,
                              "adaptive": {"rounds": 2, "update": "both", "epochs": 2}},
              "metamodel": {"threads": 1}}
    (d / "params.json").write_text(json.dumps(params))
    return {"dir": d, "params": f"@{d / 'params.json'}"}


def _cal(setup, *extra: str, targets: str = "targets.csv") -> int:
    d = setup["dir"]
    return main(["cal-run", "--study", "rosen", "--params", setup["params"], "--seed",
                 str(SEED), "--solver", json.dumps(SOLVER), "--metamodel", str(d / "mm"),
                 "--targets", str(d / targets), *extra])


@pytest.mark.slow
def test_pipeline(setup):
    d: Path = setup["dir"]
    common = ["--study", "rosen", "--params", setup["params"], "--seed", str(SEED),
              "--solver", json.dumps(SOLVER), "--metamodel", str(d / "mm")]
    assert main(["cal-anchors", *common, "--targets", str(d / "targets.csv"),
                 "--output", str(d / "anchors.csv")]) == 0
    anchors = pd.read_csv(d / "anchors.csv")
    assert len(anchors) == 2 and {"x_x", "x_y", "status"} <= set(anchors.columns)
    strategies = ["rs", "op", "stp", "pts", "adaptive", "blackbox"]
    for s in strategies:
        args = ["--strategy", s, "--output", str(d / f"{s}.csv"), "--output-runs",
                str(d / "runs" / f"{s}.csv")]
        if s in ("op", "pts", "adaptive"):
            args += ["--anchors", str(d / "anchors.csv")]
        assert _cal(setup, *args) == 0
        rec = pd.read_csv(d / f"{s}.csv")
        assert (rec["runs"] == (1 if s == "op" else 8)).all()
        assert len(pd.read_csv(d / "runs" / f"{s}.csv")) == rec["runs"].sum()
    pairs = [f"{s}={d / f'{s}.csv'}" for s in strategies]
    assert main(["cal-summary", "--records", *pairs, "--output", str(d / "summary.csv"),
                 "--output-figure", str(d / "strategies.png"), "--output-figure-rs-op",
                 str(d / "rs_vs_op.png")]) == 0
    summ = pd.read_csv(d / "summary.csv")
    assert list(summ["strategy"]) == strategies
    for s in strategies:
        rec = pd.read_csv(d / f"{s}.csv")
        row = summ.set_index("strategy").loc[s]
        assert np.isclose(row["mean_error"], rec["error"].mean())
        assert np.isclose(row["median_error"], rec["error"].median())
    assert (d / "strategies.png").stat().st_size > 0 and (d / "rs_vs_op.png").exists()
    # PtS never worse than its OP anchor here (deterministic simulator, anchor run kept)
    # -- checked on adaptive, which runs the anchor itself
    ad, op = pd.read_csv(d / "adaptive.csv"), pd.read_csv(d / "op.csv")
    assert (ad["error"] <= op["error"] + 1e-12).all()

    # proximity sweep
    sweep = []
    for r in ("0.01", "1"):
        assert _cal(setup, "--strategy", "pts", "--proximity", r, "--anchors",
                    str(d / "anchors.csv"), "--output", str(d / f"pts_R{r}.csv")) == 0
        sweep.append(f"{r}={d / f'pts_R{r}.csv'}")
    assert main(["cal-sweep", "--records", *sweep, "--output", str(d / "sweep.csv"),
                 "--output-figure", str(d / "sweep.png")]) == 0
    assert list(pd.read_csv(d / "sweep.csv")["proximity"]) == [0.01, 1.0]

    # out-of-sample contexts
    assert _cal(setup, "--strategy", "pts", "--output", str(d / "oos_pts.csv"),
                targets="targets_oos.csv") == 0
    assert main(["cal-contexts", "--insample", str(d / "pts.csv"), "--outofsample",
                 str(d / "oos_pts.csv"), "--strategy", "pts", "--output",
                 str(d / "ctx.csv"), "--output-figure", str(d / "ctx.png")]) == 0
    ctx = pd.read_csv(d / "ctx.csv")
    assert list(ctx["set"]) == ["in-sample", "out-of-sample"]

    # noise table (two "levels" from the same records are enough to exercise it)
    assert main(["cal-noise", "--records", f"a:0={d / 'pts.csv'}",
                 f"b:0.1={d / 'oos_pts.csv'}", "--output", str(d / "noise.csv"),
                 "--output-figure", str(d / "noise.png")]) == 0
    assert list(pd.read_csv(d / "noise.csv")["noise_level"]) == [0.0, 0.1]


def test_bad_proximity_is_one_line_error(setup, capsys):
    rc = _cal(setup, "--strategy", "pts", "--proximity", "1.5", "--output",
              str(setup["dir"] / "bad.csv"))
    assert rc == 2
    assert "proximity" in capsys.readouterr().err


def test_budget_too_small_is_one_line_error(setup, tmp_path, capsys):
    p = json.loads(Path(setup["params"][1:]).read_text())
    p["calibration"]["budget"] = 1
    (tmp_path / "p.json").write_text(json.dumps(p))
    d = setup["dir"]
    rc = main(["cal-run", "--study", "rosen", "--params", f"@{tmp_path / 'p.json'}",
               "--seed", "1", "--metamodel", str(d / "mm"), "--targets",
               str(d / "targets.csv"), "--strategy", "stp", "--output", str(tmp_path / "o.csv")])
    assert rc == 2
    assert "budget" in capsys.readouterr().err


def test_mismatched_targets_is_one_line_error(setup, tmp_path, capsys):
    t = pd.read_csv(setup["dir"] / "targets.csv").rename(columns={"f": "g"})
    t.to_csv(tmp_path / "t.csv", index=False)
    rc = _cal(setup, "--strategy", "rs", "--output", str(tmp_path / "o.csv"),
              targets=str(tmp_path / "t.csv"))
    assert rc == 2
    assert "does not match the metamodel" in capsys.readouterr().err


# ---- cal-score: another tool's answer, scored as the strategies are ---------------------

def test_cal_score_scores_given_inputs_like_a_strategy(setup, tmp_path: Path, capsys) -> None:
    d = setup["dir"]
    params = json.loads((d / "params.json").read_text())
    params["calibration"]["rescore"] = 2
    (tmp_path / "p.json").write_text(json.dumps(params))
    common = ["--study", "rosen", "--params", f"@{tmp_path / 'p.json'}", "--seed", str(SEED),
              "--metamodel", str(d / "mm"), "--targets", str(d / "targets.csv")]
    assert main(["cal-run", *common, "--solver", json.dumps(SOLVER), "--strategy", "rs",
                 "--output", str(tmp_path / "rs.csv")]) == 0
    rs = pd.read_csv(tmp_path / "rs.csv")
    # 1. a strategy's own answer (x_ columns), scored again: the same Δ and re-scored Δ
    assert main(["cal-score", *common, "--inputs", str(tmp_path / "rs.csv"),
                 "--name", "again", "--output", str(tmp_path / "again.csv")]) == 0
    again = pd.read_csv(tmp_path / "again.csv")
    assert list(again["strategy"].unique()) == ["again"]
    np.testing.assert_allclose(again["error"], rs["error"], rtol=1e-9)
    np.testing.assert_allclose(again["rescored_error"], rs["rescored_error"], rtol=1e-9)
    np.testing.assert_allclose(again["distance"], rs["distance"], rtol=1e-9)
    # 2. the true inputs (plain input names, rows in another order) score Δ = 0
    truth = pd.read_csv(d / "targets.csv")[["target_id", "x", "y"]].iloc[::-1]
    truth.to_csv(tmp_path / "truth.csv", index=False)
    assert main(["cal-score", *common, "--inputs", str(tmp_path / "truth.csv"),
                 "--name", "truth", "--output", str(tmp_path / "truth_rec.csv")]) == 0
    best = pd.read_csv(tmp_path / "truth_rec.csv")
    assert list(best["target_id"]) == list(rs["target_id"])
    assert best["error"].max() < 1e-9 and best["distance"].max() < 1e-12
    assert (best["runs"] == 1).all()
    truth.iloc[:1].to_csv(tmp_path / "one.csv", index=False)   # a target left out: failed
    assert main(["cal-score", *common, "--inputs", str(tmp_path / "one.csv"),
                 "--output", str(tmp_path / "one_rec.csv")]) == 0
    one = pd.read_csv(tmp_path / "one_rec.csv")
    assert list(one["status"].sort_values()) == ["no_inputs", "ok"]
    assert one["error"].isna().sum() == 1
    # 3. cal-summary puts it beside the strategies
    assert main(["cal-summary", "--records", f"rs={tmp_path / 'rs.csv'}",
                 f"truth={tmp_path / 'truth_rec.csv'}",
                 "--output", str(tmp_path / "summary.csv")]) == 0
    summ = pd.read_csv(tmp_path / "summary.csv").set_index("strategy")
    assert summ.loc["truth", "median_error"] < summ.loc["rs", "median_error"]
    # 4. bad input names the file and what is wrong
    capsys.readouterr()
    truth.drop(columns="y").to_csv(tmp_path / "bad.csv", index=False)
    assert main(["cal-score", *common, "--inputs", str(tmp_path / "bad.csv"),
                 "--output", str(tmp_path / "x.csv")]) == 2
    assert "bad.csv" in capsys.readouterr().err
    far = truth.assign(x=truth["x"] + 5.0)
    far.to_csv(tmp_path / "far.csv", index=False)
    assert main(["cal-score", *common, "--inputs", str(tmp_path / "far.csv"),
                 "--output", str(tmp_path / "x.csv")]) == 2
    assert "outside its bounds" in capsys.readouterr().err
