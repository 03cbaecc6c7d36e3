"""``sequential`` on a simulator declared stochastic (issue 41): its start repeats two
points with fresh seeds, so the run-to-run noise is measured from its own runs (the
record's noise sd, a curve's noise ceiling, the posterior's replicate term); on one
declared deterministic no run is spent on a repeat."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.metamodel.ensemble import EnsembleSettings
from simcalib.metamodel.posterior.emulator import fit_emulator
from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from simcalib.metamodel.strategies.search import STOCHASTIC_REPEATS
from simcalib.study import Study
from tests.cal_fixtures import (
    SEQ_SMALL,
    plane_target,
    run_plane_sequential,
    warped_plane_study,
)

SEED = 5
SD = 0.05
#: 20 runs: 6 re-run the best points after the search on a stochastic study
#: (``select``), 14 for the search, whose start is 7 points, 2 of them repeats
CAL = {"budget": 20, **SEQ_SMALL}
T = np.arange(12)


def _declared(study: Study, stochastic: bool) -> Study:
    return Study(study.name, {**study.cfg, "noise": {"stochastic": stochastic}})


def _run(study: Study, caplog) -> tuple[pd.Series, pd.DataFrame]:
    return run_plane_sequential(study, CAL, SEED, caplog)


def _repeated_pairs(runs: pd.DataFrame, cols: list[str]) -> list[list[int]]:
    start = runs[runs["phase"] == "sobol"]
    groups = start.groupby(cols, sort=False)["run_id"].apply(list)
    return [g for g in groups if len(g) > 1]


def test_declared_stochastic_start_repeats_two_points_and_measures_the_noise(caplog) -> None:
    rec, runs = _run(_declared(warped_plane_study(noisy_sd=SD), True), caplog)
    start = runs[runs["phase"] == "sobol"]
    assert len(start) == 7 and len(runs) == 20
    # the last two start points repeat the first two, with fresh seeds
    assert _repeated_pairs(runs, ["x", "y"]) == [[0, 5], [1, 6]]
    for i, j in ((0, 5), (1, 6)):
        a, b = (runs.loc[runs["run_id"] == k, ["a", "b"]].to_numpy(float)[0] for k in (i, j))
        assert not np.allclose(a, b)
    # the record carries the measured noise sd per output: finite, of the right size
    ev = rec["stochastic"]
    assert ev.startswith(f"declared stochastic; run-to-run noise sd from "
                         f"{STOCHASTIC_REPEATS} repeated point(s) (runs 0 and 5, 1 and 6")
    sds = [float(w.split()[-1]) for w in ev.split(": ", 1)[1].split(", ")]
    assert len(sds) == 2 and all(0 < s < 5 * SD for s in sds)
    assert "run-to-run noise sd from 2 repeated point(s)" in caplog.text
    # the posterior's noise term is measured from the search's runs (the ``select``
    # re-runs after it left out here): the replicate variance of the two pairs
    ok = runs[(runs["status"] == "ok") & (runs["phase"] != "select")]
    es = EnsembleSettings.from_config({"members": 2, "hidden": [8], "epochs": 50})
    emu = fit_emulator(ok, ["x", "y"], ["a", "b"], es, SEED, "wp")
    assert emu.replicate_points == 2 and emu.stochastic_evidence
    assert emu.replicate_var is not None
    assert np.isfinite(emu.replicate_var).all() and (emu.replicate_var > 0).all()


def test_declared_deterministic_start_spends_no_run_on_a_repeat(caplog) -> None:
    rec, runs = _run(_declared(warped_plane_study(noisy_sd=SD), False), caplog)
    # every run is the search's (no re-runs), the start's 10 points all distinct
    assert len(runs) == 20 and "select" not in set(runs["phase"])
    assert (runs["phase"] == "sobol").sum() == 10
    assert not runs.duplicated(["x", "y"]).any()
    assert "stochastic" not in rec and "repeated point" not in caplog.text


def noisy_line(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """y_t = a + b t / 10 + noise of sd 0.05 per point, from each run's seed."""
    a, b = df["a"].to_numpy(), df["b"].to_numpy()
    e = [np.random.default_rng(int(s)).normal(0, SD, len(T)) for s in seeds]
    return pd.DataFrame({"y": [list(a[i] + b[i] * T / 10.0 + e[i]) for i in range(len(df))]},
                        index=df.index)


def test_declared_stochastic_curve_reports_a_finite_noise_ceiling() -> None:
    """A curve declared stochastic: the start's two repeated points give its noise
    ceiling (no longer "n/a (no repeated point)"), in the record and the history."""
    study = Study("curve", {
        "simulator": {"type": "python", "options": {"function": noisy_line}},
        "parameters": {"a": {"lower": 0.0, "upper": 1.0}, "b": {"lower": -1.0, "upper": 1.0}},
        "series": {"y": {"index": "t", "points": T.tolist()}},
        "noise": {"stochastic": True}})
    truth = np.array([0.3, 0.6])
    tdf = pd.DataFrame([truth[0] + truth[1] * T / 10.0], columns=[f"y@{t}" for t in T])
    tdf.insert(0, "target_id", [0])
    rec, runs = calibrate(study, RunScale(["a", "b"], list(study.outputs), study="curve"),
                          tdf, "sequential", CAL,
                          {"backend": "highs"}, SEED)
    r = rec.iloc[0]
    assert len(_repeated_pairs(runs, ["a", "b"])) == 2
    ceil = float(r["series_y_noise_ceiling"])
    # noise variance 0.05^2 against the spread of the start's lines: close to 1, below it
    assert np.isfinite(ceil) and 0.5 < ceil < 1.0
    assert "noise ceiling n/a" not in r["history"] and "(2 replicate pairs)" in r["history"]
    assert "y (rms over its 12 points)" in r["stochastic"]


def test_round_jobs_repeat_the_same_points_bit_for_bit(tmp_path) -> None:
    """Resumable: the workflow's chain of round jobs (state pickled between jobs) makes
    the one job's repeats, runs and records, the measured noise included."""
    from tests.fixtures.round_chain import run_chain

    study = _declared(warped_plane_study(noisy_sd=SD), True)
    cal = {**CAL, "budget": 14}

    def scale() -> RunScale:
        return RunScale(["x", "y"], ["a", "b"], study="wp")

    one = calibrate(study, scale(), plane_target(), "sequential", cal, {"backend": "highs"}, SEED)
    rec, runs = run_chain(study, scale, plane_target(), cal, 3, tmp_path, {"backend": "highs"},
                          SEED)
    timing = ["seconds", "sim_seconds", "op_seconds"]
    pd.testing.assert_frame_equal(pd.DataFrame(rec).drop(columns=timing),
                                  one[0].drop(columns=timing))
    pd.testing.assert_frame_equal(pd.DataFrame(runs), one[1])
    assert len(_repeated_pairs(one[1], ["x", "y"])) == 2
    assert one[0].iloc[0]["stochastic"].startswith("declared stochastic; run-to-run noise")
