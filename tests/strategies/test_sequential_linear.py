"""``sequential``'s local linear proposals (proposals.local_linear): a Gauss-Newton
step from a linear fit of the outputs on the runs nearest the best run, in the rounds
of a batch of 8 and more, or of 4 and more on a deterministic simulator
(proposals.linear_slots).  Known answers on the warped plane
(tests/sim_fixtures.py), whose Delta is 0 at x* only."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.metamodel import strategies as st
from simcalib.metamodel.strategies import proposals
from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.metamodel.strategies.proposals import linear_slots, local_linear
from simcalib.metamodel.strategies.runner import default_optimize
from simcalib.metamodel.strategies.settings import merged_settings
from tests.cal_fixtures import SEQ_SMALL, warped_plane_study

XSTAR = np.array([0.62, 0.27])
SEED = 11


def _plane(v: np.ndarray) -> np.ndarray:
    return np.array([v[0] + 0.5 * v[1] ** 2, v[1] + 0.5 * v[0] ** 2])


class ScaleMM:
    """No design metamodel: the ledger needs only Delta's output scale."""

    input_names = ["x", "y"]
    output_names = ["a", "b"]
    y_std = np.array([0.3, 0.3])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full((len(np.atleast_2d(X)), 2), np.nan)


def _ledger(budget: int, batch: int, noisy_sd: float | None = None) -> TargetRun:
    t = Target(0, XSTAR.copy(), {}, _plane(XSTAR))
    settings = merged_settings({"budget": budget, **SEQ_SMALL})
    settings["sequential"]["batch"] = batch
    return TargetRun(warped_plane_study(noisy_sd=noisy_sd), ScaleMM(), t, budget, 0.05,
                     settings,
                     {"backend": "highs"}, SEED, "sequential", default_optimize())


def _runs(center: np.ndarray, spread: float, n: int, seed: int = 0) -> list[dict]:
    r = np.random.default_rng(seed)
    X = np.vstack([center, center + r.uniform(-spread, spread, (n - 1, 2))])
    return [{"x": x, "y": _plane(x), "status": "ok"} for x in X]


def test_linear_slots_grow_with_the_batch_and_batch_4_has_one_if_deterministic() -> None:
    assert [linear_slots(b) for b in (1, 2, 4, 7, 8, 16, 32, 64)] == [0, 0, 0, 0, 1, 2, 3, 4]
    assert [linear_slots(b, True) for b in (1, 2, 3, 4, 7, 8, 16, 32, 64)] == \
        [0, 0, 0, 1, 1, 1, 2, 3, 4]


@pytest.mark.parametrize("which", [0, 1])
def test_one_step_from_near_runs_lands_far_closer_to_the_answer(which: int) -> None:
    p = _ledger(40, 16)
    # the runs span more than the way to x*: the step is not capped by their box
    runs = _runs(XSTAR + np.array([0.006, -0.005]), 0.01, 12)
    best = min(runs, key=lambda q: float(p.err(q["y"])[0]))
    x = local_linear(p, runs, best, which, radius=0.1, fm=None)
    assert x is not None
    e_best, e_new = float(p.err(best["y"])[0]), float(p.err(_plane(x))[0])
    # Newton on a smooth map: the misfit falls by the step's relative curvature error
    assert e_new < e_best / 5
    assert np.abs(x - XSTAR).max() < np.abs(best["x"] - XSTAR).max() / 3


def test_step_stays_in_the_box_the_runs_span() -> None:
    p = _ledger(40, 16)
    runs = _runs(np.array([0.2, 0.8]), 0.002, 6)      # far from x*: the step is capped
    x = local_linear(p, runs, runs[0], 0, radius=0.1, fm=None)
    assert x is not None
    span = np.abs(np.array([q["x"] for q in runs]) - runs[0]["x"]).max()
    assert np.abs(x - runs[0]["x"]).max() <= span + 1e-12


def test_no_proposal_without_enough_runs_or_where_failure_is_predicted() -> None:
    p = _ledger(40, 16)
    runs = _runs(XSTAR + 0.01, 0.004, 2)
    assert local_linear(p, runs, runs[0], 0, 0.1, None) is None      # d + 1 = 3 needed
    line = [{"x": XSTAR + t * np.array([1.0, 1.0]), "y": _plane(XSTAR + t), "status": "ok"}
            for t in (0.01, 0.012, 0.014, 0.016)]
    assert local_linear(p, line, line[0], 0, 0.1, None) is None       # no slope across

    class AllFail:
        input_names = ["x", "y"]

        def ok(self, X: np.ndarray) -> np.ndarray:
            return np.zeros(len(X), dtype=bool)

    runs = _runs(XSTAR + 0.01, 0.004, 8)
    assert local_linear(p, runs, runs[0], 0, 0.1, AllFail()) is None


def _record_linear_steps(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """The linear steps a search proposes (``local_linear``'s non-None answers), in
    order, into the returned list."""
    made: list[np.ndarray] = []
    real = proposals.local_linear

    def recording(*a, **k):  # noqa: ANN002, ANN003, ANN202
        x = real(*a, **k)
        if x is not None:
            made.append(x)
        return x

    monkeypatch.setattr(proposals, "local_linear", recording)
    return made


@pytest.mark.slow
def test_batch_4_never_uses_the_linear_step_on_a_noisy_simulator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The start's repeated point finds the noisy plane stochastic: a round of 4 keeps
    every slot for the ensemble (a fit anchored at the best run would chase noise)."""
    def boom(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("local_linear called at batch 4 on a noisy simulator")

    monkeypatch.setattr(proposals, "local_linear", boom)
    p = _ledger(18, 4, noisy_sd=0.01)
    search_noise = []
    real_slots = proposals.linear_slots

    def slots(batch, deterministic=False):  # noqa: ANN001, ANN202
        search_noise.append(deterministic)
        return real_slots(batch, deterministic)

    monkeypatch.setattr(proposals, "linear_slots", slots)
    st.get("sequential").fn(p)
    assert p.used == 18 and search_noise and not any(search_noise)


@pytest.mark.slow
def test_batch_4_uses_the_linear_step_on_a_deterministic_simulator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The start's repeat finds the plane deterministic: one slot of each round of 4
    is a linear step, and the search ends on one (before: members only, ~1e-2 here)."""
    made = _record_linear_steps(monkeypatch)
    p = _ledger(26, 4)
    st.get("sequential").fn(p)
    assert p.used == 26 and len(made) >= 2
    assert p.best_run()["error"] < 1e-3


@pytest.mark.slow
def test_batch_8_search_uses_linear_steps_and_reaches_the_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made = _record_linear_steps(monkeypatch)
    p = _ledger(34, 8)
    st.get("sequential").fn(p)
    assert p.used == 34
    assert len(made) >= 2                        # one slot a round of 8, 3 rounds
    best = p.best_run()
    # the members reach ~1e-2 in this budget (test_sequential); the best run is a step
    assert best["error"] < 1e-3
    assert any(np.array_equal(best["x"], x) for x in made)


class _SlowClock:
    """``time`` for milp.bounds whose clock runs ``step`` s fast on every read: the
    bound tightening sees a machine many times slower than this one."""

    def __init__(self, step: float) -> None:
        import time

        self._time, self.step, self.reads = time, step, 0

    def perf_counter(self) -> float:
        self.reads += 1
        return self._time.perf_counter() + self.step * self.reads


@pytest.mark.slow
def test_mean_proposal_tightening_does_not_depend_on_the_clock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ensemble mean's proposal tightens its bounds by a fixed number of LPs: on a
    clock running 0.05 s fast per read (the former 2 s limit stopped it after 40 LPs,
    short of this net's ~60-90) it still completes every tightening, and the search
    makes the same runs.  (The cap left is the solve's: 30 % of what is left of its
    time_limit, so a machine ~4x slower than this clock would still cut it.)"""
    from simcalib.metamodel.milp import bounds, boxbounds

    def search(slow: bool) -> tuple[list[np.ndarray], list[bool]]:
        boxbounds.clear_cache()
        done: list[bool] = []
        real = bounds.tighten_bounds

        def spy(*a, **k):  # noqa: ANN002, ANN003, ANN202
            nb = real(*a, **k)
            done.append(bool(nb.complete))
            return nb

        with monkeypatch.context() as m:
            m.setattr(bounds, "tighten_bounds", spy)
            m.setattr(boxbounds, "tighten_bounds", spy)
            if slow:
                m.setattr(bounds, "time", _SlowClock(0.05))
            p = _ledger(14, 4)
            st.get("sequential").fn(p)
        return [r["x"] for r in p.runs], done

    fast_x, fast_done = search(False)
    slow_x, slow_done = search(True)
    assert slow_done and all(slow_done) and all(fast_done)
    assert len(slow_x) == len(fast_x) == 14
    assert all(np.array_equal(a, b) for a, b in zip(fast_x, slow_x, strict=True))


def _chain(study, tdf, cal, chunk_size: int, tmp):  # noqa: ANN001, ANN202
    """The workflow's round jobs in this process (tests/fixtures/round_chain.py)."""
    from simcalib.metamodel.strategies.scale import RunScale
    from tests.fixtures.round_chain import run_chain

    return run_chain(study, lambda: RunScale(["x", "y"], ["a", "b"], study="wp"), tdf, cal,
                     chunk_size, tmp, {"backend": "highs"}, SEED)


@pytest.mark.slow
def test_round_jobs_with_linear_steps_give_the_one_job_runs(tmp_path) -> None:  # noqa: ANN001
    """A batch of 8 (one linear slot a round) cut into round jobs: the same runs and
    records as one job (the step reads only the restored runs: no clock, no stream)."""
    import pandas as pd

    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.metamodel.strategies.scale import RunScale

    x, y = XSTAR
    tdf = pd.DataFrame({"target_id": [0], "x": [x], "y": [y], "a": [x + 0.5 * y * y],
                        "b": [y + 0.5 * x * x]})
    cal = {"budget": 22, **SEQ_SMALL, "sequential": {**SEQ_SMALL["sequential"], "batch": 8}}
    one = calibrate(warped_plane_study(), RunScale(["x", "y"], ["a", "b"], study="wp"), tdf,
                    "sequential", cal, {"backend": "highs"}, SEED)
    rec, runs = _chain(warped_plane_study(), tdf, cal, 3, tmp_path)
    timing = ["seconds", "sim_seconds", "op_seconds"]
    pd.testing.assert_frame_equal(pd.DataFrame(rec).drop(columns=timing),
                                  one[0].drop(columns=timing))
    pd.testing.assert_frame_equal(pd.DataFrame(runs), one[1])
    assert {"round0", "round1"} <= set(one[1]["phase"])
