"""``sequential``'s trust counts (issue 41): where solves are forced to stop unproven
(a node limit of 1, or a time limit of 1 ms), the records' ``op_unproven`` /
``op_solves``, the history's "X of Y" and the log's round lines give one count, on one
job with two targets and on the chain of round jobs."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest

from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from tests.cal_fixtures import SEQ_SMALL, warped_plane_study

SEED = 11
SOLVER = {"backend": "highs"}
#: a node limit of 1: most proposal MILPs (members' and the ensemble mean's) stop
#: unproven, deterministically (a time limit would depend on the machine's load)
CAL = {"budget": 12, **SEQ_SMALL,
       "sequential": {**SEQ_SMALL["sequential"], "solver": {"options": {"mip_max_nodes": 1}}}}
ROUND = re.compile(r"stopped unproven so far: (\d+) of (\d+)")
HISTORY = re.compile(r"stopped unproven \(node/time limit\): (\d+) of (\d+)")


@pytest.fixture(autouse=True)
def _members_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No linear-step slots: on the deterministic plane a round of 4 would give one
    to a Gauss-Newton step (an LP, no MILP), whose runs leave the members' MILPs easy
    enough to finish at the root; these tests need solves that stop unproven."""
    from simcalib.metamodel.strategies import proposals

    monkeypatch.setattr(proposals, "linear_slots", lambda batch, deterministic=False: 0)


def _targets(n: int) -> pd.DataFrame:
    xs = np.array([[0.62, 0.27], [0.2, 0.8]])[:n]
    return pd.DataFrame({"target_id": np.arange(n), "x": xs[:, 0], "y": xs[:, 1],
                         "a": xs[:, 0] + 0.5 * xs[:, 1] ** 2,
                         "b": xs[:, 1] + 0.5 * xs[:, 0] ** 2})


def _scale() -> RunScale:
    return RunScale(["x", "y"], ["a", "b"], study="wp")


def _last_round(caplog) -> tuple[int, int]:
    found = [ROUND.search(m) for m in caplog.messages]
    last = [m for m in found if m][-1]
    return int(last.group(1)), int(last.group(2))


def _check(rec: pd.DataFrame, caplog) -> None:
    unproven, solves = _last_round(caplog)
    assert 0 < unproven <= solves
    # each record: its history's count is its op_unproven, of its op_solves
    for r in rec.itertuples():
        h = HISTORY.search(r.history)
        assert h and (int(h.group(1)), int(h.group(2))) == (r.op_unproven, r.op_solves)
    # the log's last round line: the records summed (as the strategies' summary sums
    # op_unproven over the targets)
    assert (int(rec["op_unproven"].sum()), int(rec["op_solves"].sum())) == (unproven, solves)


def test_one_job_two_targets_records_and_log_agree(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="simcalib.metamodel.strategies.sequential"):
        rec, _ = calibrate(warped_plane_study(), _scale(), _targets(2), "sequential", CAL,
                           SOLVER, SEED)
    _check(rec, caplog)
    assert "(the 2 targets' records summed)" in caplog.text


def test_round_jobs_records_and_step_logs_agree(tmp_path, caplog) -> None:
    """The chain: each step job logs its round; the last step's line and the final
    job's record are one count (the op calls travel in the state between jobs)."""
    from tests.fixtures.round_chain import run_chain

    with caplog.at_level(logging.INFO, logger="simcalib.metamodel.strategies.sequential"):
        rec, _ = run_chain(warped_plane_study(), _scale, _targets(1), CAL, 3, tmp_path,
                           SOLVER, SEED)
    rec = pd.DataFrame(rec)
    _check(rec, caplog)
    one = calibrate(warped_plane_study(), _scale(), _targets(1), "sequential", CAL, SOLVER,
                    SEED)[0]
    assert int(one["op_unproven"].iloc[0]) == int(rec["op_unproven"].iloc[0])


def test_a_tiny_time_limit_records_what_the_log_counts(caplog) -> None:
    """A 1 ms time limit: how many solves it stops depends on the machine, but the
    record and the log count the same ones."""
    cal = {**CAL, "sequential": {**SEQ_SMALL["sequential"], "solver": {"time_limit": 0.001}}}
    with caplog.at_level(logging.INFO, logger="simcalib.metamodel.strategies"):
        rec, _ = calibrate(warped_plane_study(), _scale(), _targets(1), "sequential", cal,
                           SOLVER, SEED)
    _check(rec, caplog)
    # the time limit's stops are counted apart (a rerun at another load may differ),
    # in the record, the log and the summary's trust lines
    timed = int(rec["op_time_limited"].iloc[0])
    assert 0 < timed <= int(rec["op_unproven"].iloc[0])
    assert f"{timed} of them stopped at the time limit" in caplog.text
    from simcalib.metamodel.strategies.summary import trust_warnings

    lines = trust_warnings(pd.DataFrame([{"strategy": "sequential",
                                          "op_unproven": int(rec["op_unproven"].iloc[0]),
                                          "op_time_limited": timed}]))
    assert any(f"{timed} of them stopped at the time limit" in ln for ln in lines)


def test_a_node_limit_is_no_time_limit() -> None:
    """Solves stopped by the node limit (fixed work: the same on any machine) are
    unproven but not time-limited."""
    rec, _ = calibrate(warped_plane_study(), _scale(), _targets(1), "sequential", CAL,
                       SOLVER, SEED)
    assert int(rec["op_unproven"].iloc[0]) > 0 and int(rec["op_time_limited"].iloc[0]) == 0
