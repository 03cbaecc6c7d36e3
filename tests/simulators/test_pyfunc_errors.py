"""A Python simulator that raises on some rows fails exactly those rows (issue 41,
item 4), whichever path calls it: the batch API, the design's chunks, a strategy's
ledger, the Python API; and its message names the exception type once."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.simulators.factory import build_simulator
from simcalib.study import Study
from simcalib.study.simulation import make_design, run_chunk, simulate_rows

KEY = "studies.half.simulator.options"


def half_bad(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """Raises on any batch holding a row with x < 0.5 (naming its smallest x); else
    y = 2x + seed mod 7 (so a row's output shows which seed it got)."""
    if (df["x"] < 0.5).any():
        raise ValueError(f"x={df['x'].min():.3f} < 0.5")
    return pd.DataFrame({"y": 2 * df["x"].to_numpy() + np.asarray(seeds) % 7})


def _cfg() -> dict:
    return {"simulator": {"type": "python", "options": {"function": half_bad,
                                                        "outputs": ["y"]}},
            "parameters": {"x": {"lower": 0.0, "upper": 1.0}}, "outputs": ["y"],
            "design": {"n": 16, "chunk_size": 16, "method": "sobol"}}


def _study() -> Study:
    return Study("half", _cfg())


def _check(frame: pd.DataFrame, x: np.ndarray) -> None:
    """Exactly the rows with x < 0.5 failed, each with its own one-prefix message."""
    bad = x < 0.5
    assert 0 < bad.sum() < len(x)
    assert (frame["status"].to_numpy() == np.where(bad, "error", "ok")).all()
    for xi, msg in zip(x[bad], frame["message"].to_numpy()[bad], strict=True):
        assert msg == f"ValueError: x={xi:.3f} < 0.5"
    assert np.isfinite(frame["y"].to_numpy()[~bad]).all()
    assert np.isnan(frame["y"].to_numpy()[bad]).all()


def test_batch_retried_row_by_row_with_each_rows_seed(caplog: pytest.LogCaptureFixture) -> None:
    sim = build_simulator(_cfg(), "studies.half")
    x = np.linspace(0.05, 0.95, 10)
    seeds = np.arange(100, 110)
    with caplog.at_level(logging.INFO):
        res = sim.run(pd.DataFrame({"x": x}), seeds)
    _check(res, x)
    ok = x >= 0.5
    # the retried ok rows got their own seeds: the same numbers as a batch of them alone
    alone = sim.run(pd.DataFrame({"x": x[ok]}), seeds[ok])
    np.testing.assert_array_equal(res["y"].to_numpy()[ok], alone["y"].to_numpy())
    np.testing.assert_allclose(alone["y"], 2 * x[ok] + seeds[ok] % 7)
    assert "retrying row by row" in caplog.text


def test_design_chunk_fails_exactly_the_raising_rows() -> None:
    study = _study()
    rows = make_design(study, 3)
    out, summary = run_chunk(study, rows, 3)
    _check(out, rows["x"].to_numpy())
    assert summary["failures"] == int((rows["x"] < 0.5).sum())


def test_strategy_ledger_batch_fails_exactly_the_raising_rows() -> None:
    """Through the ledger's own call (TargetRun.simulate -> simulate_rows on a batch),
    as sequential, gpbo and the other strategies spend their runs."""

    class Scale:
        input_names, output_names, y_std = ["x"], ["y"], np.array([1.0])

        def predict(self, X: np.ndarray) -> np.ndarray:
            return np.full((len(np.atleast_2d(X)), 1), np.nan)

    run = TargetRun(_study(), Scale(), Target(0, np.array([0.7]), {}, np.array([1.4])), 8,
                    0.05, {"sampling": "uniform"}, {}, 5, "sequential", lambda *a, **k: None)
    X = np.array([[0.1], [0.6], [0.3], [0.9], [0.45], [0.55]])
    errs = run.simulate(X, "explore")
    frame = pd.DataFrame({"status": [r["status"] for r in run.runs],
                          "message": [r["message"] for r in run.runs],
                          "y": [float(r["y"][0]) for r in run.runs]})
    _check(frame, X[:, 0])
    assert np.isinf(errs[X[:, 0] < 0.5]).all() and np.isfinite(errs[X[:, 0] >= 0.5]).all()


def test_python_api_simulate_rows_fails_exactly_the_raising_rows() -> None:
    study = _study()
    rows = make_design(study, 4)          # docs/api.md: make_design, then simulate_rows
    out = simulate_rows(study, rows, 4)
    _check(out, rows["x"].to_numpy())


def test_a_function_raising_on_every_row_fails_every_row_once_prefixed() -> None:
    def always(df: pd.DataFrame) -> pd.DataFrame:
        raise RuntimeError("boom")

    cfg = _cfg()
    cfg["simulator"]["options"]["function"] = always
    res = build_simulator(cfg, "studies.half").run(pd.DataFrame({"x": [0.2, 0.8]}), [1, 2])
    assert res["status"].tolist() == ["error", "error"]
    assert res["message"].tolist() == ["RuntimeError: boom", "RuntimeError: boom"]
