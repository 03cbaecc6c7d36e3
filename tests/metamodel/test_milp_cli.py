"""The train and optimize verbs end to end on a tiny synthetic study."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from simcalib import timing
from simcalib.cli import main

SPACE = {"parameters": {"x": {"lower": 0.0, "upper": 1.0},
                        "k": {"lower": 0, "upper": 3, "integer": True}},
         "contexts": {"c": {"values": [1.0, 2.0]}}, "constraints": []}


def _dataset(path, n=300):
    r = np.random.default_rng(0)
    df = pd.DataFrame({"x": r.random(n), "k": r.integers(0, 4, n).astype(float),
                       "c": r.choice([1.0, 2.0], n)})
    df["y1"] = df.x * df.c + 0.1 * df.k
    df["y2"] = np.sin(3 * df.x) + df.k
    df["status"] = "ok"
    df.to_csv(path, index=False)
    return df


def test_train_then_optimize(tmp_path, capsys):
    df = _dataset(tmp_path / "dataset.csv")
    params = {"metamodel": {"hidden": [8], "epochs": 30, "batch_size": 32, "threads": 1},
              "inputs": ["x", "k", "c"], "outputs": ["y1", "y2"]}
    rc = main(["mm-train", "--study", "toy", "--params", json.dumps(params), "--seed", "1",
               "--dataset", str(tmp_path / "dataset.csv"), "--output-dir", str(tmp_path / "mm")])
    assert rc == 0
    meta = json.loads((tmp_path / "mm" / "metamodel.json").read_text())
    assert set(meta["test_r2"]) == {"y1", "y2"}
    targets = df.head(3).copy()
    targets.insert(0, "target_id", range(3))
    targets.to_csv(tmp_path / "targets.csv", index=False)
    op = {"space": SPACE, "optimize": {"weights": {"y2": 0.5}},
          "solver": {"backend": "highs", "time_limit": 20, "threads": 1,
                     "warm_start": {"samples": 500, "local": 1}}}
    rc = main(["mm-optimize", "--study", "toy", "--params", json.dumps(op), "--seed", "1",
               "--metamodel", str(tmp_path / "mm"), "--targets", str(tmp_path / "targets.csv"),
               "--output", str(tmp_path / "op.csv")])
    assert rc == 0
    assert "seconds" not in pd.read_csv(tmp_path / "op.csv")  # timings beside, not inside
    out = timing.read_csv(tmp_path / "op.csv")  # op.csv joined with op_timing.csv
    assert len(out) == 3 and (out["status"] == "optimal").all()
    assert {"target_id", "x", "k", "c", "pred_y1", "objective", "gap", "seconds"} <= set(out)
    assert (out["k"] == out["k"].round()).all()
    # trust signals: a proven optimum of a good metamodel carries no flag
    assert not out["low_r2"].any() and out["flag"].isna().all()
    assert (out["c"].to_numpy() == targets["c"].to_numpy()).all()
    # a metamodel from another study: one clear line, exit 2
    rc = main(["mm-optimize", "--study", "other", "--params", json.dumps(op), "--seed", "1",
               "--metamodel", str(tmp_path / "mm"), "--targets", str(tmp_path / "targets.csv"),
               "--output", str(tmp_path / "op2.csv")])
    assert rc == 2
    assert "trained for study 'toy'" in capsys.readouterr().err
    # targets without an output column: clear data error
    targets.drop(columns=["y2"]).to_csv(tmp_path / "bad.csv", index=False)
    rc = main(["mm-optimize", "--study", "toy", "--params", json.dumps(op), "--seed", "1",
               "--metamodel", str(tmp_path / "mm"), "--targets", str(tmp_path / "bad.csv"),
               "--output", str(tmp_path / "op3.csv")])
    assert rc == 2
    assert "y2" in capsys.readouterr().err


def test_trust_flag_names_low_r2_and_unproven_results():
    from simcalib.metamodel.trust import default_min_r2, judge, op_flag

    good = judge({"test_r2": {"p": 0.99, "q": 0.95}, "min_r2": 0.9})
    weak = judge({"test_r2": {"p": 0.99, "q": 0.5}, "min_r2": 0.9})
    assert good.ok and good.weak_outputs == [] and good.warning() is None
    assert not weak.ok and weak.weak_outputs == ["q"] and "0.500" in weak.warning()
    assert op_flag("optimal", 0.0, good) == ""
    assert op_flag("time_limit", 0.0421, good) == "unproven(time_limit, gap 0.0421)"
    assert op_flag("time_limit", 0.0421, weak) == "low_r2; unproven(time_limit, gap 0.0421)"
    # the threshold recorded at training decides, not today's default
    assert judge({"test_r2": {"p": 0.95}, "min_r2": 0.97}).weak_outputs == ["p"]
    # no recorded threshold: the schema's default; no metrics at all is not a pass
    assert judge({"test_r2": {"p": default_min_r2() - 1e-9}}).weak_outputs == ["p"]
    assert not judge({}).ok and "no test R" in judge({}).warning()
