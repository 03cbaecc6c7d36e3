"""``sequential`` finds out whether an undeclared simulator is stochastic: its start
runs one point twice with different seeds (issue 41, item 5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.study import Study
from tests.cal_fixtures import (
    SEQ_SMALL,
    run_plane_sequential,
    warped_plane_study,
)

SEED = 5
CAL = {"budget": 8, **SEQ_SMALL}


def _run(study: Study, caplog) -> tuple[pd.Series, pd.DataFrame]:
    return run_plane_sequential(study, CAL, SEED, caplog)


def _repeated(runs: pd.DataFrame) -> pd.DataFrame:
    start = runs[runs["phase"] == "sobol"]
    dup = start[start.duplicated(["x", "y"], keep=False)]
    assert len(dup) == 2 and dup["run_id"].tolist() == [0, len(start) - 1]
    return dup


def test_a_noisy_simulator_is_detected_stochastic(caplog) -> None:
    rec, runs = _run(warped_plane_study(noisy_sd=0.05), caplog)
    dup = _repeated(runs)
    assert not np.allclose(dup[["a", "b"]].iloc[0], dup[["a", "b"]].iloc[1])
    assert rec["stochastic"].startswith("detected stochastic: runs 0 and")
    assert "the simulator is detected stochastic" in caplog.text
    # a stochastic simulator's answer is the ensemble's pick (final: auto)
    assert "final pick by the ensemble mean" in rec["history"]


def test_a_deterministic_simulator_is_detected_deterministic(caplog) -> None:
    rec, runs = _run(warped_plane_study(), caplog)
    dup = _repeated(runs)
    np.testing.assert_array_equal(dup[["a", "b"]].iloc[0], dup[["a", "b"]].iloc[1])
    assert rec["stochastic"].startswith("detected deterministic")
    assert "final pick" not in rec["history"]


def test_a_declared_simulator_is_not_probed(caplog) -> None:
    study = warped_plane_study(noisy_sd=0.05)
    study = Study("wp", {**study.cfg, "noise": {"stochastic": False}})
    rec, runs = _run(study, caplog)
    start = runs[runs["phase"] == "sobol"]
    assert not start.duplicated(["x", "y"]).any() and "stochastic" not in rec
