"""Paper 3's replication study (bayes-run-batch, bayes-replication-tables) on a tiny
scale: which runs share a block never changes a number, the tables carry both subsets
under one convergence rule, and the workflow's metrics apply the same rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.bayes.metrics import apply_convergence_rule, parameter_metrics
from simcalib.bayes.replication import blocks, parse_reps, run_block
from simcalib.cli import main

SAMPLER = {"iterations": 60, "burn_in": 30, "chains": 2, "adapt_every": 20}
SEED = 20261202


def test_reps_and_blocks():
    assert parse_reps("0-3") == [0, 1, 2, 3]
    assert parse_reps("5") == [5]
    assert parse_reps("1,4-5") == [1, 4, 5]
    with pytest.raises(ValueError):
        parse_reps("4-2")
    assert blocks(10, 4) == ["0-3", "4-7", "8-9"]
    assert blocks(4, 25) == ["0-3"]


@pytest.fixture(scope="module")
def records() -> dict[str, list[dict]]:
    """Three replications of two-mass KOH: one block of three, and blocks of one and two."""
    one = run_block("two_mass", "honest", "koh", [0, 1, 2], SAMPLER, SEED, output=False)
    split = (run_block("two_mass", "honest", "koh", [0], SAMPLER, SEED, output=False)
             + run_block("two_mass", "honest", "koh", [1, 2], SAMPLER, SEED, output=False))
    return {"one": one, "split": split}


def test_blocks_do_not_change_the_draws(records):
    for a, b in zip(records["one"], records["split"], strict=True):
        assert a["rep"] == b["rep"]
        assert a["batched_runs"] == 3 and b["batched_runs"] in (1, 2)
        for p in a["params"]:
            for k in ("mean", "lo", "hi", "truth"):
                assert a["params"][p][k] == pytest.approx(b["params"][p][k], rel=1e-9,
                                                          abs=1e-12)
        assert a["r_hat_max"] == pytest.approx(b["r_hat_max"], rel=1e-9)
    # different replications are different data sets
    truths = [r["params"]["k1"]["truth"] for r in records["one"]]
    assert len(set(truths)) == 3


def test_tables_from_blocks(records, tmp_path: Path):
    mos = run_block("two_mass", "honest", "mos", [0, 1, 2], SAMPLER, SEED, output=False)
    files = []
    for name, recs in (("koh", records["one"]), ("mos", mos)):
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps({"records": recs}))
        files.append(str(f))
    # a rule no 60-iteration chain meets, and one every chain meets
    for label, conv in (("strict", {"r_hat": 1.01, "ess_bulk": 400}),
                        ("loose", {"r_hat": 100.0, "ess_bulk": 0})):
        out = tmp_path / label
        params = json.dumps({"sampler": SAMPLER, "convergence": conv})
        assert main(["bayes-replication-tables", "--params", params, "--seed", str(SEED),
                     "--records", *files, "--output-dir", str(out), "--output-figure",
                     str(out / "paired.png")]) == 0
        t = pd.read_csv(out / "bayes_two_mass_honest_params.csv")
        assert {"setting", "protocol", "method", "parameter", "subset", "bias", "rmse",
                "rmse_se", "coverage", "width", "replications",
                "excluded_unconverged"} <= set(t.columns)
        allr, conv_r = t[t["subset"] == "all"], t[t["subset"] == "converged"]
        assert (allr["replications"] == 3).all() and set(allr["method"]) == {"koh", "mos"}
        if label == "strict":
            assert (conv_r["excluded_unconverged"] == 3).all()
            assert (conv_r["replications"] == 0).all()
        else:
            # nothing excluded: both subsets are the same numbers
            np.testing.assert_allclose(conv_r["rmse"].to_numpy(), allr["rmse"].to_numpy())
        # RMSE is the root mean square of the posterior means' errors
        k1 = [r["params"]["k1"]["mean"] - r["params"]["k1"]["truth"] for r in records["one"]]
        row = allr[(allr["method"] == "koh") & (allr["parameter"] == "k1")].iloc[0]
        assert row["rmse"] == pytest.approx(float(np.sqrt(np.mean(np.square(k1)))))
        paired = pd.read_csv(out / "bayes_two_mass_honest_paired.csv")
        if label == "loose":
            assert {"rmse_diff", "rmse_diff_se", "mos_smaller_error_share"} <= set(paired)
            np.testing.assert_allclose(paired["rmse_diff"],
                                       paired["rmse_mos"] - paired["rmse_koh"])
            assert (out / "paired.png").stat().st_size > 0
        meta = json.loads((out / "bayes_two_mass_honest_meta.json").read_text())
        assert meta["replications"] == 3
        assert meta["unconverged"]["koh"] == (3 if label == "strict" else 0)


def test_the_workflow_metrics_use_the_same_rule():
    """bayes-metrics keeps unconverged chain sets (flagged) or, with
    bayes.exclude_unconverged, leaves them out: the rule of the 'converged' subset."""
    per_rep = pd.DataFrame({
        "method": "koh", "parameter": "k1", "rep": [0, 1, 2], "truth": 1.0,
        "mean": [1.1, 0.9, 3.0], "lower95": 0.5, "upper95": 1.5,
        "r_hat": [1.0, 1.0, 1.2], "ess_bulk": [900, 800, 50],
        "converged": [True, True, False]})
    keep = parameter_metrics(per_rep).iloc[0]
    drop = parameter_metrics(per_rep, exclude_unconverged=True).iloc[0]
    assert keep["replications"] == 3 and keep["unconverged"] == 1
    assert drop["replications"] == 2 and drop["unconverged"] == 1
    assert drop["rmse"] == pytest.approx(0.1) and keep["rmse"] > 1.0
    recs = [{"r_hat_max": 1.005, "ess_bulk_min": 500}, {"r_hat_max": 1.02, "ess_bulk_min": 900},
            {"r_hat_max": 1.0, "ess_bulk_min": 100}]
    assert [r["converged"] for r in apply_convergence_rule(recs, 1.01, 400)] == [True, False,
                                                                               False]
