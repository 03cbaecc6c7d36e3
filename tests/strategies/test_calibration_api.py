"""One call from Python (``sequential_calibrate``): a function, a box, one observed
row -> the answer, by the workflow's own code path (issue 41, item 6)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.api import sequential_calibrate
from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from simcalib.study import Study
from tests.cal_fixtures import SEQ_SMALL


def plane(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"a": df["x"] + 0.5 * df["y"] ** 2, "b": df["y"] + 0.5 * df["x"] ** 2})


BOX = {"x": (0.0, 1.0), "y": (0.0, 1.0)}
OBS = {"a": 0.62 + 0.5 * 0.27 ** 2, "b": 0.27 + 0.5 * 0.62 ** 2}


def test_one_call_recovers_the_inputs_as_the_workflow_does() -> None:
    res = sequential_calibrate(plane, BOX, OBS, budget=16, seed=4, settings=SEQ_SMALL,
                               posterior=False)
    assert set(res.x) == {"x", "y"} and len(res.runs) == 16 and res.posterior is None
    assert res.error < 0.1 and abs(res.x["x"] - 0.62) < 0.1 and abs(res.x["y"] - 0.27) < 0.1
    # the same study through the workflow's function: the same record
    study = Study("model", {"simulator": {"type": "python",
                                          "options": {"function": plane, "outputs": ["a", "b"]}},
                            "parameters": {k: {"lower": lo, "upper": hi}
                                           for k, (lo, hi) in BOX.items()},
                            "outputs": ["a", "b"]})
    rec, runs = calibrate(study, RunScale(["x", "y"], ["a", "b"]),
                          pd.DataFrame([{"target_id": 0, **OBS}]), "sequential",
                          {**SEQ_SMALL, "budget": 16, "strategies": ["sequential"]},
                          {"backend": "highs"}, 4)
    np.testing.assert_array_equal(runs[["x", "y", "a", "b"]].to_numpy(),
                                  res.runs[["x", "y", "a", "b"]].to_numpy())
    assert rec["error"].iloc[0] == res.error


def test_bad_calls_name_what_is_wrong() -> None:
    with pytest.raises(ConfigError, match="parameters.x"):
        sequential_calibrate(plane, {"x": 3, "y": (0, 1)}, OBS)
    with pytest.raises(ConfigError, match="budgt"):
        sequential_calibrate(plane, BOX, OBS, settings={"budgt": 3})
    with pytest.raises(ConfigError, match="simulator"):
        sequential_calibrate(42, BOX, OBS)  # type: ignore[arg-type]


@pytest.mark.slow
def test_one_call_returns_the_posterior_from_the_same_runs() -> None:
    """``res.posterior`` is sequential's own posterior (``cal_seq_posterior``'s), on the
    runs of this call: every tunable input summarised, chains checked, the answer (the
    best run of a deterministic function) judged against the intervals."""
    post = {"chains": 2, "warmup": 150, "draws": 200, "max_draws": 400, "init_draws": 200,
            "calibration_targets": 6, "calibration_draws": 100, "ppc_draws": 0}
    res = sequential_calibrate(plane, BOX, OBS, budget=16, seed=4,
                               settings={**SEQ_SMALL, "posterior": post})
    s = res.posterior.summary.set_index("input")
    assert {"x", "y"} <= set(s.index) and {"q5", "q50", "q95", "r_hat"} <= set(s.columns)
    for name, truth in (("x", 0.62), ("y", 0.27)):  # the data were made at (0.62, 0.27)
        assert s.loc[name, "q5"] <= truth <= s.loc[name, "q95"], s
    a = res.posterior.answers.iloc[0]
    assert (a["x_x"], a["x_y"]) == (res.x["x"], res.x["y"])  # deterministic: the best run
    assert "inside_90" in res.posterior.answers.columns
