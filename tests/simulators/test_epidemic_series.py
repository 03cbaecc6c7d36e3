"""The epidemic simulator's case curve (issue 42, item 5's series output): the scalar
outputs keep their bits, the curve obeys the model's bookkeeping, and the wide
``cases@<day>`` columns pass through the simulation stages (journal, chunk CSV, merge)
unchanged."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import qmc

from simcalib.errors import ConfigError
from simcalib.io import write_csv
from simcalib.simulators import build_simulator
from simcalib.simulators.epidemic import (
    INPUTS,
    OUTPUTS,
    EpidemicOptions,
    curve_days,
    simulate_batch,
    simulate_batch_curves,
)
from simcalib.simulators.epidemic_adapter import EpidemicSimulator
from simcalib.study.merge import merge_chunks
from simcalib.study.simulation import run_chunk

#: sha256 of the (8, 9) scalar outputs of the batch below, computed with the model as it
#: was before the curve existed (commit a6937d0): the curve must not change a bit.  The
#: expected-value recursion's bits depend on numpy's SIMD code path for exp and power:
#: a6937d0 itself gives the second digest on a CPU with AVX512_ICL (checked 7 Dec 2026),
#: so either digest is the model before the curve, each on its own kind of CPU.
BEFORE = {
    "stochastic": {"29faf853353aad43546879e0452f5affd3158e09c1f2667d15130edaefb64b7a"},
    "expected": {"092256cb52bc7d28036475c16bfa32b90a0b960143d385f4b5cb5fe45226f6ce",
                 "92bb6bf05b01308d25096625f9d79dbd12f914eb6bfcd3ffcb8bc60ce089a2f6"},
}
OPTS = {"stochastic": {"population": 20000, "replicates": 2},
        "expected": {"population": 20000, "stochastic": False}}


def design(n: int = 8) -> pd.DataFrame:
    d = qmc.Sobol(6, seed=5).random(8)[:n]  # the first n of the 8 the digests used
    lo = np.array([v[0] for v in INPUTS.values()])
    hi = np.array([v[1] for v in INPUTS.values()])
    return pd.DataFrame(lo + d * (hi - lo), columns=list(INPUTS))


SEEDS = np.arange(8, dtype=np.int64) * 7919 + 3


@pytest.mark.parametrize("mode", ["stochastic", "expected"])
def test_scalar_outputs_are_the_same_bits_as_before_the_curve(mode):
    o = EpidemicOptions(**OPTS[mode])
    plain = simulate_batch(design(), o, SEEDS)
    with_curve, curves = simulate_batch_curves(design(), o, SEEDS)
    assert hashlib.sha256(plain[OUTPUTS].to_numpy().tobytes()).hexdigest() in BEFORE[mode]
    pd.testing.assert_frame_equal(plain, with_curve, check_exact=True)
    assert curves.shape == (8, o.max_days)
    # the adapter: without a series the frame is exactly the model's; with one, the
    # scalar columns are still the same bits
    none = EpidemicSimulator(o).run(design(), SEEDS)
    assert list(none.columns) == [*OUTPUTS, "status", "message"]
    some = EpidemicSimulator(o, {"cases": np.array([5, 10])}).run(design(), SEEDS)
    assert np.array_equal(some[OUTPUTS].to_numpy(), none[OUTPUTS].to_numpy())


def test_curve_bookkeeping_stochastic_counts():
    """Onsets are integer counts per day; when the epidemic ends before max_days
    every symptomatic infection has had its onset, so the days sum to the attack rate
    exactly (counts), and the days after the end hold 0."""
    o = EpidemicOptions(population=20000, max_days=300)
    res, curves = simulate_batch_curves(design(4), o, SEEDS[:4])
    counts = curves * 20000
    assert np.allclose(counts, np.round(counts), atol=1e-7)
    assert (curves >= 0).all()
    assert np.allclose(counts.sum(axis=1), res["symptomatic_attack_rate"] * 20000, atol=1e-6)
    for c in counts:
        last = np.flatnonzero(c)[-1]
        assert last < 299 and not c[last + 1:].any()
    assert np.array_equal(curve_days(o), np.arange(1, 301))


def test_curve_expected_mode_peaks_earlier_and_higher_with_r0():
    o = EpidemicOptions(population=100_000, stochastic=False, max_days=250)
    base = {"vaccinationfraction": 0.5, "responsedelay": 10, "ascertainmentdelay": 5,
            "ascertainmentfraction": 0.4, "vaccinedosesdaily": 390}
    df = pd.DataFrame([{**base, "R0": 1.4}, {**base, "R0": 2.2}])
    res, curves = simulate_batch_curves(df, o, np.zeros(2, dtype=np.int64))
    assert curves[1].argmax() < curves[0].argmax()
    assert curves[1].max() > curves[0].max()
    # deterministic: the sum matches the attack rate up to the 1e-6 people left at the end
    assert np.allclose(curves.sum(axis=1), res["symptomatic_attack_rate"], atol=1e-9)


def test_invalid_row_gives_nan_curve_and_nan_output_status():
    df = design(2)
    df.loc[1, "R0"] = -1.0
    res, curves = simulate_batch_curves(df, EpidemicOptions(population=5000), SEEDS[:2])
    assert np.isfinite(curves[0]).all() and np.isnan(curves[1]).all()
    assert res["status"].tolist() == ["ok", "invalid_input"]


def study_cfg(series=None, outputs=None, max_days=120) -> dict:
    cfg = {"simulator": {"type": "epidemic", "options": {"population": 5000,
                                                         "max_days": max_days}},
           "parameters": {n: {"lower": lo, "upper": hi} for n, (lo, hi, _) in INPUTS.items()}}
    if series is not None:
        cfg["series"] = series
    if outputs is not None:
        cfg["outputs"] = outputs
    return cfg


def test_declared_series_becomes_point_columns():
    sim = build_simulator(study_cfg({"cases": {"index": "day", "points": {"from": 7, "to": 98,
                                                                          "step": 7}}}),
                          "studies.flu")
    assert sim.outputs[:9] == OUTPUTS
    assert sim.outputs[9:] == [f"cases@{d}" for d in range(7, 99, 7)]
    full = build_simulator(study_cfg({"cases": "day"}, max_days=50), "studies.flu")
    assert full.outputs[9:] == [f"cases@{d}" for d in range(1, 51)]
    # the points picked are the curve's days
    res = sim.run(design(2), SEEDS[:2])
    _, curves = simulate_batch_curves(design(2), sim.options, SEEDS[:2])
    assert np.array_equal(res[[f"cases@{d}" for d in range(7, 99, 7)]].to_numpy(),
                          curves[:, 6:98:7])
    # replicates through the shared layer: a mean and an _sd per point
    cfg = study_cfg({"cases": {"index": "day", "points": [10, 20]}})
    cfg["simulator"]["replicates"] = 3
    rep = build_simulator(cfg, "studies.flu")
    assert {"cases@10", "cases@20", "cases@10_sd"} <= set(rep.outputs) | set(rep.extra_columns)


@pytest.mark.parametrize("series, key, words", [
    ({"deaths": "day"}, "studies.flu.series.deaths", "no series 'deaths'"),
    ({"cases": {"index": "day", "points": [5, 130]}}, "studies.flu.series.cases.points",
     "does not produce (130)"),
    ({"cases": {"index": "day", "points": [5, 5]}}, "studies.flu.series.cases.points",
     "listed twice"),
    ({"cases": {"index": "day", "points": [9, 5]}}, "studies.flu.series.cases.points",
     "increasing"),
    ({"cases": {"points": [1]}}, "studies.flu.series.cases.index", "required"),
    ({"cases": {"index": "R0"}}, "studies.flu.series.cases.index", "already"),
])
def test_bad_series_declaration_names_the_key(series, key, words):
    with pytest.raises(ConfigError) as exc:
        build_simulator(study_cfg(series), "studies.flu")
    assert exc.value.path == key and words in exc.value.message


def test_point_columns_pass_journal_chunks_and_merge_unchanged(tmp_path):
    """run_chunk (journaled, then resumed from the journal), the chunk CSV and
    merge_chunks keep every cases@<day> value to the bit."""
    cfg = study_cfg({"cases": {"index": "day", "points": {"from": 1, "to": 60}}})
    sim = build_simulator(cfg, "studies.flu")
    names = list(INPUTS)
    study = SimpleNamespace(name="flu", cfg=cfg, simulator=sim, outputs=list(sim.outputs),
                            input_names=names)
    rows = design(6).assign(run_id=np.arange(6))[["run_id", *names]]
    chunks, direct = [], []
    for i in range(2):
        part = rows.iloc[3 * i:3 * i + 3]
        journal = tmp_path / f"chunk{i}.jsonl"
        out, _ = run_chunk(study, part, seed=11, journal=journal)
        again, summary = run_chunk(study, part, seed=11, journal=journal)
        assert summary["resumed"] == 3
        pd.testing.assert_frame_equal(out, again, check_exact=True)
        path = tmp_path / f"chunk{i}.csv"
        write_csv(out, path)
        chunks.append(path)
        direct.append(out)
    merged = merge_chunks(chunks, rows, 3)
    cols = [c for c in sim.outputs if c.startswith("cases@")]
    assert len(cols) == 60 and list(merged.columns) == ["run_id", *names, *sim.outputs,
                                                        "status", "message"]
    want = pd.concat(direct, ignore_index=True)
    assert np.array_equal(merged[cols].to_numpy(), want[cols].to_numpy())
    assert (merged["status"] == "ok").all() and merged[cols].to_numpy().sum() > 0
