"""Series outputs through the study (issue 42): declaration -> simulator -> observations
-> metamodel on basis weights -> strategies that score real runs, with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel import curves, trust
from simcalib.metamodel.basis import fit_basis
from simcalib.metamodel.model import Metamodel, build_net
from simcalib.study.model import Study
from simcalib.study.observations import output_weights, read_observations
from simcalib.study.simulation import FINGERPRINT_KEYS, simulate_rows
from tests.fixtures.curves import lin_curve as lin_sequences  # y_t = a + b t, one list a run

T = np.arange(0, 10)
PARAMS = {"a": {"lower": 0.0, "upper": 1.0}, "b": {"lower": -1.0, "upper": 1.0}}


def lin_wide(df: pd.DataFrame) -> pd.DataFrame:
    a, b = df["a"].to_numpy(), df["b"].to_numpy()
    out = {f"y@{t}": a + b * t for t in T}
    out["mean_y"] = a + b * T.mean()
    return pd.DataFrame(out)


def lin_long(df: pd.DataFrame) -> pd.DataFrame:
    rows = [{"t": t, "y": r.a + r.b * t, "mean_y": r.a + r.b * T.mean()}
            for lab, r in df.iterrows() for t in T[::-1][::-1]]
    labels = [lab for lab in df.index for _ in T]
    return pd.DataFrame(rows, index=labels)


def noisy(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """A stochastic toy: the linear curve plus N(0, 0.1^2) per point, seeded per run."""
    out = []
    for (_, r), s in zip(df.iterrows(), seeds, strict=True):
        e = np.random.default_rng(int(s)).normal(0.0, 0.1, len(T))
        out.append(list(r.a + r.b * T + e))
    return pd.DataFrame({"y": out})


def study(fn=lin_sequences, outputs=("mean_y",), series=None, **extra) -> Study:
    cfg = {"simulator": {"type": "python", "options": {"function": fn}},
           "parameters": PARAMS,
           "series": series or {"y": {"index": "t", "points": T.tolist()}}, **extra}
    if outputs:
        cfg["outputs"] = list(outputs)
    return Study("lin", cfg)


def design(n: int, seed: int = 0) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    return pd.DataFrame({"run_id": np.arange(n), "a": r.uniform(0, 1, n),
                         "b": r.uniform(-1, 1, n)})


FAST = {"hidden": [16], "epochs": 150, "patience": 40}


# ----------------------------------------------------------------------------- study
def test_outputs_are_scalars_then_points_and_fingerprinted():
    st = study()
    assert st.outputs == ["mean_y", *(f"y@{t}" for t in T)]
    assert st.scalar_outputs == ["mean_y"]
    assert "series" in FINGERPRINT_KEYS
    # no outputs listed: the series only (a summary of the same curve is not added)
    assert study(outputs=()).outputs == [f"y@{t}" for t in T]


@pytest.mark.parametrize("fn", [lin_sequences, lin_wide, lin_long])
def test_every_python_result_form_gives_the_same_wide_columns(fn):
    rows = design(5)
    out = simulate_rows(study(fn), rows, 1)
    assert (out["status"] == "ok").all()
    want = rows["a"].to_numpy()[:, None] + rows["b"].to_numpy()[:, None] * T
    np.testing.assert_allclose(out[[f"y@{t}" for t in T]].to_numpy(), want, rtol=0,
                               atol=1e-12)


def test_a_curve_of_the_wrong_length_fails_its_run_naming_key_and_run():
    def ragged(df):  # the run with a < 0.2 returns 7 values for 10 points
        return pd.DataFrame({"y": [list(range(7 if a < 0.2 else 10)) for a in df["a"]]})

    rows = pd.DataFrame({"run_id": [0, 1, 2], "a": [0.1, 0.5, 0.9], "b": [0.0, 0.0, 0.0]})
    out = simulate_rows(study(ragged, outputs=()), rows, 1)
    assert out["status"].tolist() == ["parse_error", "ok", "ok"]
    msg = out["message"].iloc[0]
    assert "studies.lin.simulator.options.function" in msg and "7 values" in msg


def test_undeclared_points_without_observations_is_a_keyed_error():
    with pytest.raises(ConfigError, match=r"studies\.lin\.series\.y\.points"):
        study(series={"y": "t"})


# ----------------------------------------------------------------------------- observations
def _long_file(tmp_path, text: str):
    p = tmp_path / "obs.csv"
    p.write_text(text)
    return p


OBS = "target_id,t,y\n0,1,1.0\n0,2,2.0\n0,3,3.0\n1,2,5.0\n"


def test_long_observations_become_one_row_per_target_with_unobserved_points(tmp_path):
    p = _long_file(tmp_path, OBS)
    st = study(series={"y": "t"}, outputs=(), targets={"file": str(p)})
    assert st.outputs == ["y@1", "y@2", "y@3"]          # the observed points
    from simcalib.study.series_study import series_params

    assert series_params(st.cfg, st.key) == {"y": {"index": "t", "points": [1.0, 2.0, 3.0]}}
    tab = read_observations(p, st.outputs, [], st.space.tunable_names, "k", series=st.series)
    assert tab["target_id"].tolist() == [0, 1]
    assert tab.loc[1, "y@2"] == 5.0 and np.isnan(tab.loc[1, "y@1"])
    w = output_weights(tab, st.outputs, np.ones(3))
    # each series counts once: 1/m at the m observed points, 0 where unobserved
    np.testing.assert_allclose(w, [[1 / 3, 1 / 3, 1 / 3], [0.0, 1.0, 0.0]])


@pytest.mark.parametrize("text, match", [
    ("target_id,t,y\n0,1,1\n0,1,2\n", "appears twice"),
    ("target_id,t,y\n0,2,1\n0,1,2\n", "not sorted"),
    ("target_id,t,y\n0,1,nan\n", "not a finite number"),
    ("target_id,t,y\n0,11,1\n", "does not produce"),
])
def test_bad_observations_name_the_file(tmp_path, text, match):
    p = _long_file(tmp_path, text)
    st = study(outputs=())
    with pytest.raises(DataError, match=match) as err:
        read_observations(p, st.outputs, [], st.space.tunable_names, "studies.lin.targets.file",
                          series=st.series)
    assert str(p) in str(err.value)


def test_scalars_cannot_hide_in_a_long_file(tmp_path):
    p = _long_file(tmp_path, "target_id,t,y\n0,1,1\n")
    st = study()
    with pytest.raises(DataError, match="scalar output"):
        read_observations(p, st.outputs, [], st.space.tunable_names, series=st.series)


# ----------------------------------------------------------------------------- metamodel
def test_fold_decodes_the_weights_exactly():
    """The folded last layer is the decode: prediction == mean + B w(inner), and
    weight_head recovers the inner network's weights."""
    rows = design(40)
    Y = rows["a"].to_numpy()[:, None] + rows["b"].to_numpy()[:, None] * T
    basis = fit_basis(Y, T, "y")
    assert basis.k == 2 and basis.error["max_abs"] < 1e-10   # linear curves: exact
    names = ["y#0", "y#1"]
    inner = Metamodel(build_net(2, [8], 2), ["a", "b"], names, np.zeros(2), np.ones(2),
                      np.array([0.3, -0.2]), np.array([2.0, 0.5]))
    outputs = [f"y@{t}" for t in T]
    info = {"series": {"y": {"basis": basis.to_json(), "test_r2": 1.0}}}
    mm = curves.fold(inner, outputs, {"y": basis}, info)
    X = rows[["a", "b"]].to_numpy()
    w = inner.predict(X)
    np.testing.assert_allclose(mm.predict(X), basis.decode(w), rtol=0, atol=1e-10)
    W, b = curves.weight_head(mm, "y")
    h = X.copy()
    for Wl, bl in mm.linear_layers()[:-1]:
        h = np.maximum(0.0, ((h - mm.x_mean) / mm.x_std if h is X else h) @ Wl.T + bl)
    np.testing.assert_allclose(h @ W.T + b, w, rtol=0, atol=1e-10)


def test_linear_curve_recovered_through_training_and_decode(tmp_path):
    st = study()
    data = simulate_rows(st, design(120), 1)
    from simcalib.metamodel.training import train_metamodel

    mm, m = train_metamodel(data, st.input_names, st.outputs, FAST, 0, "lin")
    rec = m["series"]["y"]
    assert rec["components"] == 2 and rec["basis_cv_relative"] < 1e-9
    assert rec["test_r2"] > 0.99 and m["r2_ok"]
    from simcalib.metamodel.training import heldout_rows

    assert len(heldout_rows(data, mm, 0)) == m["n_test"]   # the posterior's test rows
    assert set(m["test_r2"]) == set(st.outputs)        # per point, as for any output
    verdict = trust.judge(mm.info)
    assert "y" in verdict.test_r2 and "y@3" not in verdict.test_r2   # judged per series
    assert verdict.basis_error["y"] < 1e-9
    # y_std of a point is the series' one scale; the prediction is the curve
    scale = curves.bases_of(mm)["y"].scale
    np.testing.assert_allclose(mm.y_std[1:], scale)
    x = np.array([[0.4, 0.6]])
    err = np.abs(mm.predict(x)[0, 1:] - (0.4 + 0.6 * T)).max()
    assert err < 0.15 * scale          # a ReLU net on a line: R² > 0.99, not exact
    mm.save(tmp_path)
    back = Metamodel.load(tmp_path)
    np.testing.assert_array_equal(back.predict(x), mm.predict(x))
    assert curves.bases_of(back)["y"].k == 2


def test_stochastic_curve_is_judged_against_its_noise_ceiling():
    from simcalib.metamodel.training import train_metamodel
    from simcalib.study.noise import noise_from_probe

    st = study(noisy, outputs=())
    rows = design(120)
    data = simulate_rows(st, rows, 1)
    rerun = simulate_rows(st, rows.head(30), 2)
    probe = data.head(30).copy()
    for o in st.outputs:
        probe[f"{o}_rerun"] = rerun[o].to_numpy()
    probe["pair"] = np.arange(30)
    noise = noise_from_probe(probe, st.outputs)
    assert set(noise["series_diff"]) == {"y"}
    np.testing.assert_allclose(np.mean(list(noise["var"].values())), 0.01, rtol=0.3)
    # a variance threshold that keeps noise components: the probe cuts them (the
    # curve is a + b t: two components of signal, the rest is the N(0, 0.1^2) noise)
    loose = {**FAST, "epochs": 60, "series": {"variance": 0.999999}}
    Y = data[st.outputs].to_numpy()
    k0 = curves.fit_bases(Y, st.outputs, np.arange(len(Y)), loose)["y"].k
    _, m = train_metamodel(data, st.input_names, st.outputs, loose, 0, "noisy",
                           noise={**noise, "stochastic": True})
    assert k0 > 2 and m["series"]["y"]["components"] == 2
    rec = m["series"]["y"]["noise"]
    assert rec["cut_from_components"] > 2
    # the curve's spread is ~3 per point against noise 0.1: a ceiling near 1
    assert 0.99 < rec["ceiling"] < 1.0
    assert len(rec["weight_ceiling"]) == m["series"]["y"]["components"]
    assert "series_diff" not in m["noise"]


def test_too_few_runs_for_a_basis_names_the_series():
    st = study(outputs=())
    data = simulate_rows(st, design(10), 1)
    from simcalib.metamodel.training import train_metamodel

    with pytest.raises(DataError, match="series 'y'.*at least 8.*training split: 6 of"):
        train_metamodel(data, st.input_names, st.outputs, FAST, 0, "lin")


# ----------------------------------------------------------------------------- strategies
def test_random_search_scores_curves_with_per_series_weights():
    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.metamodel.training import train_metamodel

    st = study(outputs=())
    data = simulate_rows(st, design(60), 1)
    mm, _ = train_metamodel(data, st.input_names, st.outputs, {**FAST, "epochs": 30}, 0, "lin")
    truth = pd.DataFrame({"target_id": [0], "a": [0.2], "b": [0.5]})
    targets = simulate_rows(st, truth, 5, stream="targets", id_column="target_id")
    rec, runs = calibrate(st, mm, targets, "rs", {"budget": 12}, {}, 3)
    best = runs.loc[runs["error"].idxmin()]
    z = targets[st.outputs].to_numpy()[0]
    y = best[st.outputs].to_numpy(dtype=float)
    want = (np.abs(y - z) / mm.y_std).sum() / len(T)    # the series counts once
    assert rec["error"].iloc[0] == pytest.approx(want, rel=1e-12)
    assert rec["status"].iloc[0] == "ok" and np.isfinite(rec["distance"].iloc[0])
    from simcalib.metamodel.strategies.score import score_inputs

    scored = score_inputs(st, mm, targets, truth, {"budget": 12}, 3)
    assert scored["error"].iloc[0] == pytest.approx(0.0, abs=1e-12)   # the true inputs
    assert scored["distance"].iloc[0] == pytest.approx(0.0, abs=1e-12)


def test_a_basis_that_must_truncate_reports_its_error():
    from simcalib.metamodel.training import train_metamodel

    st = study(outputs=())
    data = simulate_rows(st, design(60), 1)
    cfg = {**FAST, "epochs": 20, "series": {"max_components": 1}}
    _, m = train_metamodel(data, st.input_names, st.outputs, cfg, 0, "lin")
    rec = m["series"]["y"]
    assert rec["components"] == 1
    # a + b t: one component leaves a's direction out, a small share of the variance
    # (b t dominates) but a recorded error, where two components have none (< 1e-9)
    assert 1e-4 < rec["basis_unexplained"] < 0.01
    assert 0.02 < rec["basis_cv_relative"] < 0.2


def test_op_on_the_folded_metamodel_finds_the_curve_inputs():
    """The MILP sees an ordinary ReLU metamodel (the decode is its last layer): OP on a
    curve works unchanged, one |.| term per point."""
    from simcalib.config import load_config
    from simcalib.io import PACKAGE_ROOT
    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.metamodel.training import train_metamodel

    st = study(outputs=())
    data = simulate_rows(st, design(100), 1)
    mm, _ = train_metamodel(data, st.input_names, st.outputs, FAST, 0, "lin")
    truth = pd.DataFrame({"target_id": [0], "a": [0.2], "b": [0.5]})
    targets = simulate_rows(st, truth, 5, stream="targets", id_column="target_id")
    solver = load_config(PACKAGE_ROOT / "config/config.yaml")["solvers"]["highs-default"]
    rec, _ = calibrate(st, mm, targets, "op", {"budget": 1}, solver, 3)
    assert rec["op_unproven"].iloc[0] == 0
    assert rec["predicted_error"].iloc[0] < 1e-6       # the metamodel's curve hits z
    assert rec["distance"].iloc[0] < 0.1


def test_observed_days_the_epidemic_lacks_name_the_observations_file(tmp_path):
    from simcalib.simulators import epidemic

    p = _long_file(tmp_path, "target_id,day,cases\n0,5,10\n0,400,3\n")
    ps = {n: {"lower": lo, "upper": hi, "integer": it}
          for n, (lo, hi, it) in epidemic.INPUTS.items()}
    with pytest.raises(DataError, match=r"obs\.csv \(studies\.ep\.targets\.file\).*400"):
        Study("ep", {"simulator": {"type": "epidemic"}, "parameters": ps,
                     "series": {"cases": "day"}, "targets": {"file": str(p)}})


def test_a_nan_in_a_simulated_curve_is_a_failed_run_not_data():
    def hole(df):
        return pd.DataFrame({"y": [[np.nan if (a > 0.5 and t == 3) else t for t in T]
                                   for a in df["a"]]})

    rows = pd.DataFrame({"run_id": [0, 1], "a": [0.1, 0.9], "b": [0.0, 0.0]})
    out = simulate_rows(study(hole, outputs=()), rows, 1)
    assert out["status"].tolist() == ["ok", "nan_output"]
    assert "y@3" in out["message"].iloc[1]


def test_sim_targets_writes_observed_curves_one_row_per_target(tmp_path):
    """The CLI's sim-targets on a long observations file (the workflow's path)."""
    import json

    from simcalib import io
    from simcalib.cli import main
    from simcalib.simulators import epidemic

    p = _long_file(tmp_path, "target_id,day,cases,sd_cases\n3,7,10,2\n3,14,30,3\n"
                   "5,14,25,3\n")
    ps = {n: {"lower": lo, "upper": hi, "integer": it}
          for n, (lo, hi, it) in epidemic.INPUTS.items()}
    params = {"simulator": {"type": "epidemic"}, "parameters": ps,
              "series": {"cases": "day"}, "targets": {"file": str(p)}}
    out = tmp_path / "targets.csv"
    assert main(["sim-targets", "--study", "ep", "--params", json.dumps(params), "--seed", "1",
                 "--output", str(out)]) == 0
    tab = io.read_csv(out)
    assert tab["target_id"].tolist() == [3, 5]
    assert tab["cases@14"].tolist() == [30.0, 25.0] and np.isnan(tab["cases@7"].iloc[1])
    w = output_weights(tab, ["cases@7", "cases@14"], np.array([4.0, 4.0]))
    np.testing.assert_allclose(w, [[0.5 * 4 / 2, 0.5 * 4 / 3], [0.0, 4 / 3]])


def test_targets_that_observe_different_points_are_calibrated_on_their_own_points():
    """Two observed targets of one curve, each with points the other lacks: every
    target is usable (before: a NaN at an unobserved point failed the target) and its
    Delta is the 1/m-weighted sum over its own points only."""
    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.metamodel.training import train_metamodel

    st = study(outputs=())
    data = simulate_rows(st, design(60), 1)
    mm, _ = train_metamodel(data, st.input_names, st.outputs, {**FAST, "epochs": 30}, 0, "lin")
    truth = pd.DataFrame({"target_id": [0, 1], "a": [0.2, 0.7], "b": [0.5, -0.3]})
    targets = simulate_rows(st, truth, 5, stream="targets", id_column="target_id")
    cols = list(st.outputs)
    targets.loc[0, cols[:4]] = np.nan       # target 0 observes t = 4..9
    targets.loc[1, cols[6:]] = np.nan       # target 1 observes t = 0..5
    rec, runs = calibrate(st, mm, targets, "rs", {"budget": 8}, {}, 3)
    assert (rec["status"] == "ok").all()
    for tid, seen in ((0, slice(4, 10)), (1, slice(0, 6))):
        r = runs[runs["target_id"] == tid].iloc[0]
        z = targets[cols].to_numpy(dtype=float)[tid][seen]
        y = r[cols].to_numpy(dtype=float)[seen]
        want = (np.abs(y - z) / mm.y_std[seen]).sum() / len(z)
        assert r["error"] == pytest.approx(want, rel=1e-12)


def test_an_empty_sd_cell_is_an_sd_not_given_not_a_dropped_output():
    """A DataFrame target with ``sd_b`` empty on one row: that row's b is divided by
    the output's scale (weight 1), as if the column were absent (before: weight 0,
    b silently left out of that target's Delta)."""
    tab = pd.DataFrame({"target_id": [0, 1], "a": [1.0, 2.0], "b": [3.0, 4.0],
                        "sd_b": [0.5, np.nan]})
    w = output_weights(tab, ["a", "b"], np.array([2.0, 2.0]))
    np.testing.assert_allclose(w, [[1.0, 4.0], [1.0, 1.0]])
