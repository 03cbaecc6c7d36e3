"""The ``sequential`` strategy: Thompson sampling through the MILP of a net ensemble.

Tiny ensembles (3 nets of 8 x 8, few epochs) and budgets of a few dozen Rosenbrock
runs keep each test at a few seconds; the benchmark (benchmarks/breakeven.py) measures
the strategy at real sizes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simcalib.errors import ConfigError
from simcalib.metamodel import strategies as st
from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.metamodel.strategies.runner import default_optimize
from simcalib.metamodel.strategies.sequential import initial_runs
from simcalib.metamodel.strategies.settings import check_settings, merged_settings
from simcalib.study import Study

SEED = 11
SMALL = {"sequential": {"ensemble": {"members": 3, "hidden": [8, 8], "epochs": 300,
                                     "warm_epochs": 100, "patience": 50},
                        "solver": {"options": {"mip_max_nodes": 200}}}}


XSTAR = np.array([0.62, 0.27])


def _study(fail: dict | None = None) -> Study:
    from tests.conftest import REPO

    sim: dict = {"type": "python", "options": {"function": "tests.sim_fixtures:warped_plane",
                                               "path": str(REPO), "outputs": ["a", "b"]}}
    if fail is not None:
        sim["fail_region"] = fail
    return Study("wp", {"simulator": sim, "outputs": ["a", "b"],
                        "parameters": {"x": {"lower": 0.0, "upper": 1.0},
                                       "y": {"lower": 0.0, "upper": 1.0}},
                        "constraints": []})


class ScaleMM:
    """No design metamodel: the strategy trains its own; the ledger needs the output
    scale of Delta (and a predict for the predicted-error column, NaN)."""

    input_names = ["x", "y"]
    output_names = ["a", "b"]
    y_std = np.array([0.3, 0.3])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full((len(np.atleast_2d(X)), 2), np.nan)


def _run(study: Study, budget: int, strategy: str = "sequential", journal: Path | None = None,
         extra: dict | None = None) -> TargetRun:
    x, y = XSTAR
    t = Target(0, XSTAR.copy(), {}, np.array([x + 0.5 * y * y, y + 0.5 * x * x]))
    settings = merged_settings({"budget": budget, **SMALL, **(extra or {})})
    p = TargetRun(study, ScaleMM(), t, budget, 0.05, settings, {"backend": "highs"}, SEED,
                  strategy, default_optimize(), journal=journal)
    st.get(strategy).fn(p)
    return p


def test_reaches_the_known_optimum_and_beats_random_search() -> None:
    p = _run(_study(), 28)
    rs = _run(_study(), 28, "rs")
    assert p.used == 28 and all(r["status"] == "ok" for r in p.runs)
    best, rs_best = p.best_run()["error"], rs.best_run()["error"]
    assert best < 0.01                  # Delta = 0 at x* only; about 1 in the box
    x = p.best_run()["x"]
    assert np.abs(x - XSTAR).max() < 0.02
    assert best < rs_best / 5
    # the rounds found it, not the Sobol start
    start = min(r["error"] for r in p.runs if r["phase"] == "sobol")
    assert best < start / 5
    assert {r["phase"] for r in p.runs} >= {"sobol", "round0", "round1"}


def test_same_seed_same_runs() -> None:
    a, b = _run(_study(), 16), _run(_study(), 16)
    np.testing.assert_array_equal(np.array([r["x"] for r in a.runs]),
                                  np.array([r["x"] for r in b.runs]))


def test_failure_region_is_avoided_once_runs_fail() -> None:
    # every run with x > 0.75 fails (a quarter of the box), away from x* = (0.62, 0.27)
    p = _run(_study({"x": [0.75, 1.0]}), 28)
    start = [r for r in p.runs if r["phase"] == "sobol"]
    rounds = [r for r in p.runs if r["phase"] != "sobol"]
    share_start = np.mean([r["status"] != "ok" for r in start])
    share_rounds = np.mean([r["status"] != "ok" for r in rounds])
    assert share_start > 0.15
    assert share_rounds <= share_start / 3
    assert p.best_run()["error"] < 0.05


def test_resume_after_a_kill_mid_round_replays_the_journal(tmp_path: Path) -> None:
    full = _run(_study(), 16)
    study = _study()
    calls = {"n": 0}
    run = study.simulator.run

    def dying(batch, seeds, threads=1):  # noqa: ANN001 - the simulator protocol
        calls["n"] += len(batch)
        if calls["n"] > 13:              # killed in the second round
            raise KeyboardInterrupt
        return run(batch, seeds, threads)

    study.simulator.run = dying
    jpath = tmp_path / "seq_0.jsonl"
    with pytest.raises(KeyboardInterrupt):
        _run(study, 16, journal=jpath)
    study.simulator.run = run
    again = _study()
    counted = {"n": 0}
    run2 = again.simulator.run

    def counting(batch, seeds, threads=1):  # noqa: ANN001
        counted["n"] += len(batch)
        return run2(batch, seeds, threads)

    again.simulator.run = counting
    resumed = _run(again, 16, journal=jpath)
    assert counted["n"] == 16 - 13      # only the runs the journal did not hold
    np.testing.assert_array_equal(np.array([r["x"] for r in resumed.runs]),
                                  np.array([r["x"] for r in full.runs]))
    np.testing.assert_allclose([r["error"] for r in resumed.runs],
                               [r["error"] for r in full.runs])


def test_initial_runs_and_settings_checks() -> None:
    assert initial_runs(100, 6, 5) == 30
    assert initial_runs(20, 6, 5) == 10      # at most half the budget
    assert initial_runs(4, 6, 5) == 2
    with pytest.raises(ConfigError, match="sequential.local_share"):
        merged_settings({"budget": 10, "sequential": {"local_share": 1.5}})
    s = merged_settings({"budget": 10, "sequential": {"solver": {"time_limt": 3}}})
    with pytest.raises(ConfigError, match="sequential.solver"):
        check_settings("sequential", 10, 0.05, s)
    with pytest.raises(ConfigError, match="sequential.ensemble.members"):
        merged_settings({"budget": 10, "sequential": {"ensemble": {"members": 0}}})
