"""``sequential`` on a curve (issue 42): its ensemble on the basis weights, with known
answers: a curve linear in the inputs recovered, a curve that needs truncation
reporting its basis error, the round jobs' records the one job's bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from simcalib.study.model import Study
from tests.fixtures.curve_sims import T
from tests.fixtures.round_chain import run_chain

SEED = 5
SOLVER = {"backend": "highs"}
TIMING = ["seconds", "sim_seconds", "op_seconds"]
SMALL = {"sequential": {"ensemble": {"members": 3, "hidden": [8, 8], "epochs": 300,
                                     "warm_epochs": 100, "patience": 50},
                        "solver": {"options": {"mip_max_nodes": 200}}}}


def _study(fn: str = "linear_curve") -> Study:
    from tests.conftest import REPO

    return Study("curve", {
        "simulator": {"type": "python", "options": {
            "function": f"tests.fixtures.curve_sims:{fn}", "path": str(REPO)}},
        "parameters": {"a": {"lower": 0.0, "upper": 1.0}, "b": {"lower": -1.0, "upper": 1.0}},
        "series": {"y": {"index": "t", "points": T.tolist()}}})


def _targets(study: Study, truth: list[tuple[float, float]]) -> pd.DataFrame:
    from tests.fixtures import curve_sims

    fn = getattr(curve_sims, study.cfg["simulator"]["options"]["function"].split(":")[1])
    X = pd.DataFrame(truth, columns=["a", "b"])
    Y = np.array([np.asarray(v) for v in fn(X)["y"]])
    df = pd.DataFrame(Y, columns=[f"y@{t}" for t in T])
    df.insert(0, "target_id", np.arange(len(X)))
    return df


def _scale(study: Study) -> RunScale:
    return RunScale(list(study.input_names), list(study.outputs), study=study.name)


@pytest.mark.slow
def test_a_linear_curve_is_recovered() -> None:
    st = _study()
    tdf = _targets(st, [(0.3, 0.6)])
    rec, runs = calibrate(st, _scale(st), tdf, "sequential", {"budget": 40, **SMALL},
                          SOLVER, SEED)
    r = rec.iloc[0]
    assert abs(r["x_a"] - 0.3) < 1e-2 and abs(r["x_b"] - 0.6) < 1e-2
    assert r["error"] < 1e-2
    # the ensemble ran on the curve's basis: two components, reconstructed exactly
    assert "series y: 2 basis components of 20 points" in r["history"]
    assert "one per series" in r["delta_scale"]
    assert len(runs) == 40


@pytest.mark.slow
def test_a_curve_that_needs_truncation_reports_its_basis_error() -> None:
    st = _study("moving_bump")
    tdf = _targets(st, [(0.4, 0.5)])
    rec, _ = calibrate(st, _scale(st), tdf, "sequential", {"budget": 16, **SMALL}, SOLVER,
                       SEED)
    h = rec.iloc[0]["history"]
    import re

    m = re.search(r"series y: (\d+) basis components of 20 points on (\d+) runs, held-out "
                  r"reconstruction error ([0-9.e+-]+) of its scale", h)
    assert m, h
    k, n, err = int(m.group(1)), int(m.group(2)), float(m.group(3))
    # a moving bump is no low-rank family: fewer components than points, and the
    # held-out error of the truncated basis says so
    assert k < 20 and k <= n - 1 and err > 0.05


def _chain(study: Study, tdf: pd.DataFrame, cal: dict, chunk_size: int, tmp: Path):
    """The workflow's chain of round jobs in this process (tests/fixtures/round_chain.py)."""
    return run_chain(study, lambda: _scale(study), tdf, cal, chunk_size, tmp, SOLVER, SEED)


@pytest.mark.slow
def test_round_jobs_give_the_one_job_records_on_a_curve(tmp_path: Path) -> None:
    st = _study("moving_bump")
    tdf = _targets(st, [(0.4, 0.5)])
    cal = {"budget": 14, **SMALL}
    one = calibrate(st, _scale(st), tdf, "sequential", cal, SOLVER, SEED)
    rec, runs = _chain(st, tdf, cal, 3, tmp_path)
    rec, runs = pd.DataFrame(rec), pd.DataFrame(runs)
    pd.testing.assert_frame_equal(rec.drop(columns=TIMING), one[0].drop(columns=TIMING))
    pd.testing.assert_frame_equal(runs, one[1])
    assert "basis components" in rec["history"].iloc[0]
    assert {"round0", "round1"} <= set(runs["phase"])


@pytest.mark.slow
def test_one_call_from_python_on_a_curve_and_its_trust_columns() -> None:
    """``sequential_calibrate`` with a study mapping declaring a series: the observed
    point columns come with the series (before: refused as outputs named 'y@0'), and
    the record carries the curve's trust (basis size and error, OOB R²)."""
    from simcalib.metamodel.strategies.api import sequential_calibrate
    from tests.conftest import REPO

    st = _study()
    observed = _targets(st, [(0.3, 0.6)]).iloc[0].drop("target_id")
    study = {"simulator": {"type": "python", "options": {
        "function": "tests.fixtures.curve_sims:linear_curve", "path": str(REPO)}},
        "series": {"y": {"index": "t", "points": T.tolist()}}}
    res = sequential_calibrate(study, {"a": (0.0, 1.0), "b": (-1.0, 1.0)}, observed,
                               budget=40, seed=SEED, settings=SMALL, posterior=False)
    assert res.x["a"] == pytest.approx(0.3, abs=0.05)
    assert res.x["b"] == pytest.approx(0.6, abs=0.05)
    assert int(res.record["series_y_components"]) == 2
    assert float(res.record["series_y_basis_error"]) < 1e-6
