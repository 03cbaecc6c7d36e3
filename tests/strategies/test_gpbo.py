"""The ``gpbo`` strategy (GP Bayesian optimisation, BoTorch optional extra).

Budgets are tiny and the acquisition optimiser is cut down (few restarts, few raw
samples) so the GP tests stay at a few seconds; the missing-extra test needs no BoTorch.
"""

from __future__ import annotations

import builtins
import importlib.util

import numpy as np
import pandas as pd
import pytest

from simcalib.config import validate_config
from simcalib.errors import ConfigError
from simcalib.metamodel import strategies as st
from simcalib.metamodel.strategies import gpbo
from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.metamodel.strategies.settings import check_settings, merged_settings
from simcalib.study import Study

SEED = 5
FAST = {"gpbo": {"n_init": 5, "num_restarts": 2, "raw_samples": 64, "pool": 128}}

ROSEN = {
    "simulator": {"type": "rosenbrock", "options": {}},
    "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                   "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
    "contexts": {"a": {"values": [2, 3]}, "b": {"values": [10]}},
    "constraints": [],
}

# integer input, a log input and a linear constraint: what rounding and the
# feasibility filter must respect
MIXED = {
    "simulator": {"type": "rosenbrock", "options": {}},
    "parameters": {"x": {"lower": -3, "upper": 3, "integer": True},
                   "y": {"lower": 0.1, "upper": 10.0, "log": True}},
    "contexts": {"a": {"values": [1]}, "b": {"values": [2]}},
    "constraints": ["x + y <= 4"],
}


class ScaleMM:
    """No metamodel: gpbo never predicts; the runner's Delta only needs the output
    scale (and a predict for its predicted-error column, here NaN)."""

    input_names = ["x", "y", "a", "b"]
    output_names = ["f"]
    y_std = np.array([100.0])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full((len(np.atleast_2d(X)), 1), np.nan)


def _target(a: float, b: float, tid: int = 0) -> Target:
    # z = 0: Rosenbrock's minimum, at (a, a^2); Delta = f(x) / 100
    return Target(tid, np.array([a, a * a]), {"a": a, "b": b}, np.array([0.0]))


def _run(study, target, strategy, budget, seed=SEED, settings=FAST):
    rec, runs = st.calibrate_target(study, ScaleMM(), target, strategy, budget, 0.05,
                                    settings, {}, seed, optimize_fn=lambda *a, **k: None)
    return rec, pd.DataFrame(runs)


def test_missing_extra_named_at_validation_and_run_time(monkeypatch):
    """Without BoTorch: config validation of a study listing gpbo and a direct run both
    fail with a ConfigError naming the extra."""
    real_find, real_import = importlib.util.find_spec, builtins.__import__
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "botorch" else real_find(name, *a))

    def no_botorch(name, *a, **k):
        if name == "botorch" or name.startswith("botorch."):
            raise ImportError("No module named 'botorch'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_botorch)
    settings = merged_settings({"budget": 10})
    with pytest.raises(ConfigError, match=r"simcalib\[bo\]") as e:
        check_settings("gpbo", 10, 0.05, settings, "studies.s.calibration")
    assert e.value.args and "studies.s.calibration.strategies" in str(e.value)
    cfg = {"seed": 1, "studies": {"s": {
        **ROSEN, "design": {"n": 16}, "targets": {"n": 2},
        "metamodel": {"enabled": True},
        "calibration": {"enabled": True, "budget": 10, "strategies": ["rs", "gpbo"]}}}}
    with pytest.raises(ConfigError, match=r"studies\.s\.calibration\.strategies.*simcalib\[bo\]"):
        validate_config(cfg)
    # without gpbo the same config is fine: the extra is optional
    cfg["studies"]["s"]["calibration"]["strategies"] = ["rs"]
    validate_config(cfg)
    # run time (a caller that skipped the checks): the import fails with the same message
    study = Study("s", ROSEN)
    p = TargetRun(study, ScaleMM(), _target(2, 10), 6, 0.05, merged_settings(FAST), {}, SEED,
                  "gpbo", lambda *a, **k: None)
    with pytest.raises(ConfigError, match=r"simcalib\[bo\]"):
        gpbo.strategy_gpbo(p)
    assert p.used == 0


def test_registered_off_by_default():
    """gpbo is a known strategy (schema enum) but not in the default list: the default
    DAG must not need the optional extra."""
    spec = st.get("gpbo")
    assert spec.default is False and "gpbo" in spec.reads
    cfg = {"seed": 1, "studies": {"s": {
        **ROSEN, "design": {"n": 16}, "targets": {"n": 2},
        "metamodel": {"enabled": True}, "calibration": {"enabled": True, "budget": 10}}}}
    validate_config(cfg)
    listed = cfg["studies"]["s"]["calibration"].get("strategies",
                                                    merged_settings({})["strategies"])
    assert "blackbox" in listed and "gpbo" not in listed
    assert merged_settings({"gpbo": {"n_init": 3}})["gpbo"]["raw_samples"] == 512


def test_settings_checked():
    if not gpbo.botorch_available():
        pytest.skip("the check of the extra comes last; needs botorch to reach here")
    # merged_settings checks the section against the schema (the same key is named)
    with pytest.raises(ConfigError, match="gpbo.n_init"):
        check_settings("gpbo", 10, 0.05, merged_settings({"gpbo": {"n_init": 0}}),
                       "calibration")


def test_exact_budget_integers_and_constraints():
    """Exactly r runs, every run feasible, integer inputs integral, no repeated run."""
    pytest.importorskip("botorch")
    study = Study("mixed", MIXED)
    t = Target(0, np.array([1.0, 1.0]), {"a": 1.0, "b": 2.0}, np.array([0.0]))
    rec, runs = _run(study, t, "gpbo", 12)
    assert rec["runs"] == 12 and len(runs) == 12
    X = runs[["x", "y"]].to_numpy()
    assert np.all(X[:, 0] == np.round(X[:, 0]))
    assert np.all((X[:, 0] >= -3) & (X[:, 0] <= 3) & (X[:, 1] >= 0.1) & (X[:, 1] <= 10))
    assert np.all(X[:, 0] + X[:, 1] <= 4 + 1e-9)
    assert len(np.unique(X, axis=0)) == 12
    assert set(runs["phase"]) <= {"sobol", "gp", "pool"}
    assert (runs["phase"] == "sobol").sum() == 5
    assert rec["error"] == pytest.approx(runs["error"].min())


def test_reproducible_with_seed():
    pytest.importorskip("botorch")
    study = Study("rosen", ROSEN)
    t = _target(2, 10)
    a, ra = _run(study, t, "gpbo", 9)
    b, rb = _run(study, t, "gpbo", 9)
    c, rc = _run(study, t, "gpbo", 9, seed=SEED + 1)
    np.testing.assert_array_equal(ra[["x", "y"]].to_numpy(), rb[["x", "y"]].to_numpy())
    assert a["error"] == b["error"]
    assert not np.array_equal(ra[["x", "y"]].to_numpy(), rc[["x", "y"]].to_numpy())


@pytest.mark.slow
def test_beats_random_search_on_rosenbrock():
    """Known optimum (a, a^2) with f = 0: at 20 runs GP-BO gets far closer than RS on
    both targets, and its mean error is at least 5x lower."""
    pytest.importorskip("botorch")
    study = Study("rosen", ROSEN)
    err: dict[str, list[float]] = {"gpbo": [], "rs": []}
    dist: dict[str, list[float]] = {"gpbo": [], "rs": []}
    for tid, a in enumerate((2.0, 3.0)):
        for s in err:
            rec, _ = _run(study, _target(a, 10, tid), s, 20)
            err[s].append(rec["error"])
            dist[s].append(rec["distance"])  # unit-scaled distance to (a, a^2)
    assert all(g < r for g, r in zip(err["gpbo"], err["rs"], strict=True))
    # the valley is flat along its length, so "closer" is loose: closer than RS
    assert all(g < r for g, r in zip(dist["gpbo"], dist["rs"], strict=True))
    assert max(dist["gpbo"]) < 0.2
    assert np.mean(err["gpbo"]) * 5 < np.mean(err["rs"])
