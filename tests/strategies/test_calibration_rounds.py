"""``sequential`` as a chain of round jobs (:mod:`simcalib.metamodel.strategies.rounds`)
gives the one-job search's records bit for bit; a study needs no design and no
metamodel (Delta's scale from its start runs, or the observations' sd); a design's
failed runs train the failure classifier; large batches stay diverse; the trust
counts of the records and the log agree."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.metamodel.strategies import rounds
from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from tests.cal_fixtures import SEQ_SMALL as SMALL
from tests.cal_fixtures import warped_plane_study as _study
from tests.fixtures.round_chain import run_chain

SEED = 11

SOLVER = {"backend": "highs"}
TIMING = ["seconds", "sim_seconds", "op_seconds"]


def _targets(n: int = 2, sd: bool = False) -> pd.DataFrame:
    xs = np.array([[0.62, 0.27], [0.2, 0.8], [0.45, 0.5]])[:n]
    df = pd.DataFrame({"target_id": np.arange(n), "x": xs[:, 0], "y": xs[:, 1],
                       "a": xs[:, 0] + 0.5 * xs[:, 1] ** 2,
                       "b": xs[:, 1] + 0.5 * xs[:, 0] ** 2})
    if sd:
        df["sd_a"], df["sd_b"] = 0.05, 0.1
    return df


def _scale() -> RunScale:
    return RunScale(["x", "y"], ["a", "b"], study="wp")


def _chain(study, tdf, cal, chunk_size: int, tmp: Path):
    """The workflow's chain in this process (tests/fixtures/round_chain.py)."""
    return run_chain(study, _scale, tdf, cal, chunk_size, tmp, SOLVER, SEED)


@pytest.mark.parametrize("n_targets", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_round_jobs_give_the_one_job_records_bit_for_bit(tmp_path: Path, n_targets: int
                                                         ) -> None:
    """A failing region (so the classifier is on), chunks of 3 runs, one target or two
    sharing rounds: every run, record and history as the one-job search's."""
    cal = {"budget": 9, **SMALL}
    tdf = _targets(n_targets)
    one = calibrate(_study({"x": [0.7, 1.0]}), _scale(), tdf, "sequential", cal, SOLVER, SEED)
    rec, runs = _chain(_study({"x": [0.7, 1.0]}), tdf, cal, 3, tmp_path)
    rec, runs = pd.DataFrame(rec), pd.DataFrame(runs)
    pd.testing.assert_frame_equal(rec.drop(columns=TIMING), one[0].drop(columns=TIMING))
    pd.testing.assert_frame_equal(runs, one[1])
    assert list(rec["runs"]) == [9] * n_targets and (runs["status"] != "ok").any()
    assert {"round0", "round1"} <= set(runs["phase"])
    # Delta's scale: no metamodel, no sd given: the start runs', said in the record
    assert rec["delta_scale"].str.startswith("sd of the").all()


def test_plan_counts_the_one_job_rounds() -> None:
    # one target, 28 runs, 2 inputs x 5: a start of 10, then 18 runs in rounds of 4
    assert rounds.plan(1, 28, 2, 5, 4, exact_start=True) == [10, 4, 4, 4, 4, 2]
    # three targets share each round's batch of 4 (one each), then the last ones more
    steps = rounds.plan(3, 12, 2, 5, 4, exact_start=True)
    assert steps[0] == 10 and sum(steps) == 36
    # unknown start: an upper bound on the steps, each round at most max(batch, K)
    bound = rounds.plan(3, 12, 2, 5, 4, exact_start=False)
    assert len(bound) >= len(steps) and all(b >= 4 for b in bound[1:])


def test_observed_sd_is_the_scale_without_a_metamodel() -> None:
    rec, _ = calibrate(_study(), _scale(), _targets(1, sd=True), "sequential",
                       {"budget": 8, **SMALL}, SOLVER, SEED)
    r = rec.iloc[0]
    assert r["delta_scale"].startswith("observed sd")
    # Delta is in measurement sds: |a - a*| / 0.05 + |b - b*| / 0.1 at the answer
    x, y = r["x_x"], r["x_y"]
    a, b = x + 0.5 * y * y, y + 0.5 * x * x
    assert np.isclose(r["error"], abs(a - r["target_a"]) / 0.05 + abs(b - r["target_b"]) / 0.1)


def test_design_failures_train_the_classifier_without_use_design(caplog) -> None:
    """A design that mapped a failing region (x > 0.75): its failed runs reach the
    classifier although use_design is false (the log counts them), and none of its runs
    is adopted or counted."""
    import re

    from simcalib.study.simulation import simulate_rows

    study = _study({"x": [0.75, 1.0]})
    g = np.random.default_rng(3)
    design = pd.DataFrame({"run_id": np.arange(40), "x": g.random(40), "y": g.random(40)})
    design = simulate_rows(study, design, SEED, stream="design")
    n_failed = int((design["status"] != "ok").sum())
    assert n_failed >= 5
    cal = {"budget": 9, **SMALL}
    pattern = re.compile(r"failure classifier on \((\d+) failed runs\)")
    with caplog.at_level(logging.INFO, logger="simcalib.metamodel.strategies.sequential"):
        _, runs = calibrate(study, _scale(), _targets(1), "sequential", cal, SOLVER, SEED,
                            design=design)
    counts = [int(m) for m in pattern.findall(caplog.text)]
    own = int((runs["status"] != "ok").sum())
    assert counts and counts[0] >= n_failed and max(counts) <= n_failed + own
    assert len(runs) == 9 and "design" not in set(runs["phase"])


def test_big_batch_proposals_stay_distinct() -> None:
    """A batch of 12 with 3 configured members: the ensemble grows to the batch's 11
    member proposals, so no proposal repeats another or needs a random nudge."""
    cal = {"budget": 26, **SMALL, "sequential": {**SMALL["sequential"], "batch": 12,
                                                 "initial_per_input": 1}}
    rec, runs = calibrate(_study(), _scale(), _targets(1), "sequential", cal, SOLVER, SEED)
    r0 = runs[runs["phase"] == "round0"][["x", "y"]].to_numpy()
    assert len(r0) == 12
    d = np.abs(r0[:, None, :] - r0[None, :, :]).max(axis=2) + np.eye(len(r0))
    assert d.min() > 1e-3
    start = runs[runs["phase"] == "sobol"]["error"].min()
    assert rec["error"].iloc[0] < start / 2


def test_op_unproven_counts_what_the_log_counts(caplog) -> None:
    """A node limit of 1 stops proposal MILPs unproven: the record's op_unproven is the
    number the history and the log report."""
    cal = {"budget": 10, **SMALL, "sequential": {**SMALL["sequential"],
                                                 "solver": {"options": {"mip_max_nodes": 1}}}}
    with caplog.at_level(logging.INFO):
        rec, _ = calibrate(_study(), _scale(), _targets(1), "sequential", cal, SOLVER, SEED)
    r = rec.iloc[0]
    stopped = int(r["history"].split("stopped unproven (node/time limit): ")[1].split()[0])
    assert r["op_unproven"] == stopped > 0
    logged = [int(m.split("stopped unproven so far: ")[1].split()[0])
              for m in caplog.messages if "stopped unproven so far" in m]
    assert logged[-1] == stopped


def _five_sections(jobs: str, chunk_size: int = 2, step_local: bool = False,
                   isolate: bool = False) -> dict:
    """A new user's study: simulator, parameters, outputs, targets, calibration (the
    job layout keys as given)."""
    from tests.conftest import REPO

    opts = {"function": "tests.sim_fixtures:warped_plane", "path": str(REPO),
            "outputs": ["a", "b"]}
    if isolate:
        opts["isolate"] = True
    return {"seed": 3, "studies": {"wp": {
        "simulator": {"type": "python", "options": opts},
        "parameters": {"x": {"lower": 0.0, "upper": 1.0}, "y": {"lower": 0.0, "upper": 1.0}},
        "outputs": ["a", "b"],
        "targets": {"n": 1},
        "calibration": {"strategies": ["sequential"], "budget": 10,
                        "sequential": {"batch": 3, "jobs": jobs, "chunk_size": chunk_size,
                                       "step_local": step_local,
                                       "ensemble": {"members": 2, "hidden": [8],
                                                    "epochs": 100, "warm_epochs": 50}}}}}}


def _job_stats(text: str) -> dict[str, int]:
    """Snakemake's "Job stats" table: rule -> jobs."""
    stats = text.split("Job stats:")[1].split("total")[0]
    return {p[0]: int(p[1]) for p in (line.split() for line in stats.splitlines())
            if len(p) == 2 and p[1].isdigit()}


def test_step_local_and_chunk_size_choose_the_round_jobs(tmp_path: Path) -> None:
    """sequential.step_local makes every step the local rule cal_seq_step_local and the
    last cal_seq_final_local (no cal_seq_step or cal_seq_final job); chunk_size 3 (the
    batch) makes one simulation job a round, whose runs run side by side (threads = the
    chunk's runs) where isolate runs them in workers, one at a time in process.  Budget
    10, start 5, rounds of 3 and 2: 3 steps."""
    import yaml

    from tests.conftest import run_snakemake

    seen = {}
    for name, local, isolate in (("remote", False, False), ("local", True, True)):
        cfg = tmp_path / f"{name}.yaml"
        cfg.write_text(yaml.safe_dump(_five_sections("rounds", 3, local, isolate)))
        proc = run_snakemake(tmp_path / name, "-n", "--cores", "16",
                             "results/wp/calibration/sequential.csv", configfile=cfg)
        text = proc.stdout + proc.stderr
        seen[name] = (_job_stats(text), text)
    # simulation jobs: the start's 5 runs in 2 (3 + 2), then one of 3, one of 2
    stats, text = seen["remote"]
    assert stats.get("cal_seq_step") == 3 and "cal_seq_step_local" not in stats
    assert stats.get("cal_seq_final") == 1 and "cal_seq_final_local" not in stats
    assert stats["cal_seq_sim"] == 4 and "threads:" not in text   # in process: 1 each
    stats, text = seen["local"]
    assert stats.get("cal_seq_step_local") == 3 and "cal_seq_step" not in stats
    assert stats.get("cal_seq_final_local") == 1 and "cal_seq_final" not in stats
    assert stats["cal_seq_sim"] == 4
    assert text.count("threads: 3") == 2 and text.count("threads: 2") == 2


#: job layouts of the same search: (jobs, chunk_size, step_local, isolate)
LAYOUTS = {"rounds": ("rounds", 2, False, False), "one": ("one", 2, False, False),
           # a local step and one simulation job a round, its 3 runs side by side
           "rounds_local": ("rounds", 3, True, True)}


@pytest.mark.slow
def test_five_section_study_runs_sequential_with_no_design(tmp_path: Path) -> None:
    """The workflow on a five-section study: 0 design runs, no metamodel; as round jobs
    (a step job per round, 2 runs a simulation job; or the step as a local rule and
    one simulation job a round running its runs side by side) the records and run log
    are the one job's, byte for byte."""
    import yaml

    from tests.conftest import run_snakemake

    out = {}
    for name, (jobs, size, local, isolate) in LAYOUTS.items():
        cfg = tmp_path / f"{name}.yaml"
        cfg.write_text(yaml.safe_dump(_five_sections(jobs, size, local, isolate)))
        wd = tmp_path / name
        proc = run_snakemake(wd, "results/wp/calibration/summary.csv", configfile=cfg,
                             timeout=1200)
        res = wd / "results" / "wp"
        assert not (res / "dataset.csv").exists() and not (res / "metamodel").exists()
        assert not (res / "chunks").exists()
        out[name] = [(res / "calibration" / f).read_bytes()
                     for f in ("sequential.csv", "runs/sequential.csv")]
        sims = list((res / "calibration" / "rounds" / "sequential").glob("sim_*"))
        if name == "rounds":   # 3 steps (start 5, rounds of 3 and 2), 6 simulation jobs
            assert len(sims) == 6
            assert "cal_seq_step " in proc.stderr and "cal_seq_step_local" not in proc.stderr
        if name == "rounds_local":   # the same 3 steps; 3 + 2 start runs, 3, 2
            assert len(sims) == 4
            assert "cal_seq_step_local" in proc.stderr and "cal_seq_step " not in proc.stderr
    assert out["rounds"] == out["one"]
    assert out["rounds_local"] == out["one"]
    # how the search is cut into jobs is no reason to rerun: the other step rule, same runs
    cfg = tmp_path / "rounds_flip.yaml"
    cfg.write_text(yaml.safe_dump(_five_sections("rounds", 2, True)))
    dry = run_snakemake(tmp_path / "rounds", "-n", "results/wp/calibration/summary.csv",
                        configfile=cfg)
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-3000:]
    rec = pd.read_csv(tmp_path / "one" / "results" / "wp" / "calibration" / "sequential.csv")
    assert rec["runs"].iloc[0] == 10 and rec["delta_scale"].iloc[0].startswith("sd of the")
