"""Runs inside a target on several threads (issue 26 item 5): a command simulator's
batch (RS's runs, PtS's box, the re-scoring replicates) runs in parallel, and since
each run's seed comes from its run id the records are those of a serial run."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.metamodel import strategies as st
from simcalib.study import Study
from simcalib.study.simulation import simulate_rows
from tests.fixtures.quad import CFG, QuadMM


def test_threads_give_the_serial_records():
    study = Study("quad", CFG)
    t = study.space.sample_tunables(2, np.random.default_rng(4), "uniform", {})
    t.insert(0, "target_id", np.arange(2))
    targets = simulate_rows(study, t, 3, stream="targets", id_column="target_id")
    settings = {"budget": 12, "rescore": 2}
    out = [st.calibrate(study, QuadMM(), targets, "rs", settings, {}, 3, threads=k)
           for k in (1, 3)]
    drop = ["seconds", "sim_seconds", "op_seconds"]
    pd.testing.assert_frame_equal(out[0][0].drop(columns=drop), out[1][0].drop(columns=drop))
    pd.testing.assert_frame_equal(out[0][1], out[1][1])
    assert (out[0][1]["status"] == "ok").all() and (out[0][0]["runs"] == 12).all()
    assert out[0][1]["q"].nunique() == len(out[0][1])      # the seeds differ per run
    assert (out[0][1]["phase"] == "select").any()           # stochastic: by mean too
