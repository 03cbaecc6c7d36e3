"""benchmarks/noisy.py's oracle (the headroom of the noisy-simulator benchmark): each
candidate's replicate runs are scored against every target, and each target's choice
is the candidate with the best mean, re-scored like the strategies' answers.  A tiny
deterministic epidemic makes the answer known: a candidate at a target's true inputs
scores exactly 0."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pandas as pd

from simcalib.metamodel.strategies.ledger import output_scale, read_targets
from simcalib.metamodel.training import train_metamodel
from simcalib.seeds import int_seed
from simcalib.simulators.epidemic import simulate_replicates
from simcalib.study import Study
from simcalib.study.simulation import make_design, make_targets, simulate_rows
from tests.fixtures.benchmarks import load_benchmark


def _noisy():
    return load_benchmark("noisy")


def _setup(noisy, stochastic: bool):
    cfg = noisy.study_cfg(3000, 24, 3)
    cfg["simulator"]["options"]["stochastic"] = stochastic
    cfg["metamodel"] = {"hidden": [4], "epochs": 3, "patience": 3}
    study = Study("oracle_test", cfg)
    design = make_design(study, 5)
    data = simulate_rows(study, design, 5)
    mm, _ = train_metamodel(data, study.input_names, study.outputs, cfg["metamodel"], 5,
                            study.name)
    targets = simulate_rows(study, make_targets(study, 5), 5, stream="targets",
                            id_column="target_id")
    return study, design, mm, targets


def test_replicate_deltas_score_every_target_from_the_same_runs():
    noisy = _noisy()
    study, design, mm, targets = _setup(noisy, stochastic=True)
    scale = output_scale(mm)
    Z = np.array([t.z for t in read_targets(targets, study, mm)])
    X = design.iloc[:3]
    D = noisy.replicate_deltas(study, X, 4, 5, "oracle", Z, scale)
    assert D.shape == (3, 3, 4)
    opts = dataclasses.replace(study.simulator.options, replicates=4)
    row = X[study.input_names].to_dict("records")[1]
    Y = simulate_replicates(row, opts, int_seed(5, "oracle", study.name, 1))
    for k in range(3):   # one set of runs, scored against each target
        assert np.allclose(D[k, 1], (np.abs(Y - Z[k]) / scale).sum(axis=1))
    assert D[0, 1].std() > 0   # noisy replicates, not one run repeated
    again = noisy.replicate_deltas(study, X, 4, 5, "oracle", Z, scale)
    assert np.array_equal(D, again)


def test_oracle_picks_the_true_inputs_when_they_are_a_candidate():
    noisy = _noisy()
    study, design, mm, targets = _setup(noisy, stochastic=False)
    # the targets' true inputs join the design's candidates (after 24 design points)
    cands = pd.concat([design[study.input_names], targets[study.input_names]],
                      ignore_index=True)
    args = argparse.Namespace(oracle_extra=8, oracle_reps=2, oracle_top=3, oracle_big=2,
                              rescore=2, oracle_model_top=4, budget=5)
    every = pd.DataFrame(noisy.oracle(study, mm, targets, cands, 5, args, output_scale(mm)))
    assert list(every["select"].unique()) == ["screen", "true_mean", "model", "model_top4x1"]
    rows = every[every["select"].isin(["screen", "true_mean"])]
    assert len(rows) == 2 * len(targets)
    # deterministic runs: the true inputs score exactly 0, and so does their re-score
    assert np.allclose(rows["estimate"], 0.0) and np.allclose(rows["rescored"], 0.0)
    assert np.allclose(rows["distance"], 0.0)
    # a choice by runs is re-scored at its runs' Delta (deterministic); none beats 0
    few = every[every["select"] == "model_top4x1"]
    assert np.allclose(few["estimate"], few["rescored"])
    assert (every["rescored"] >= 0).all()
