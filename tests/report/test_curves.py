"""What users of a curve study look at (issue 42, item 4): the curves table and figure
of ``cal-curves`` (observed curve, the answer's curve, the band of re-runs at the
answer, the misfit per point and series), the read-me-first page and the console that
show them, and the workflow's job for it.

Known answers: on a deterministic curve linear in the inputs the re-run equals the
simulator's curve at the answer and the misfit is the weighted L1 recomputed here
(summing, with the scalar's term, to the strategy's own Δ); on a stochastic stand-in
the band holds the median, has the requested replicates, and its mean misfit is the
records' re-scored Δ (the same seeds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.commands.curves import main as curves_main
from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.scale import RunScale
from simcalib.report import answer, console, first_page
from simcalib.report.curves import (
    DESIGN_POSTERIOR,
    SEQUENTIAL_POSTERIOR,
    Band,
    band_sentence,
    curve_table,
    delta_scale,
    posterior_runs,
    replicates_at,
    series_misfit,
)
from simcalib.report.sections import Figure, Table
from simcalib.study.model import Study
from tests.conftest import REPO
from tests.fixtures.curve_case import SEED, observed_targets, run_case, study_cfg
from tests.fixtures.curves import T, curve, noisy_curve

POINTS = [f"y@{t}" for t in T]


#: posterior draws (a, b) per target of a stand-in predictive check
DRAWS = {0: [(0.2, 0.1), (0.4, 0.05), (0.3, 0.2), (0.35, 0.0)], 1: [(0.6, -0.1), (0.5, 0.0)]}


def ppc_runs(failed: int = 1) -> pd.DataFrame:
    """The predictive check's run log as cal-posterior writes it (a failed run too)."""
    rows = [{"target_id": t, "run_id": i, "status": "ok", "a": a, "b": b,
             **dict(zip(POINTS, curve(a, b), strict=True))}
            for t, d in DRAWS.items() for i, (a, b) in enumerate(d)]
    rows += [{"target_id": 0, "run_id": 9, "status": "crashed", "a": 0.9, "b": 0.9,
              **dict.fromkeys(POINTS, np.nan)}] * failed
    return pd.DataFrame(rows)


#: a small ``sequential`` (2 members, few epochs): what it answers is not under test here
SEQ = {"sequential": {"ensemble": {"members": 2, "hidden": [8], "epochs": 100,
                                   "warm_epochs": 50, "patience": 20},
                      "solver": {"options": {"mip_max_nodes": 100}}}}


@pytest.fixture(scope="module")
def linear(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_case(tmp_path_factory.mktemp("lin"), "lin_curve", ("mean_y",),
                    {"budget": 6}, replicates=5, ppc=ppc_runs())


def test_deterministic_curve_is_the_simulator_at_the_answer(linear: dict) -> None:
    tab, rec = linear["table"], linear["rec"].set_index("target_id")
    assert list(tab["target_id"].unique()) == [0, 1] and len(tab) == 2 * len(T)
    for tid, part in tab.groupby("target_id"):
        a, b = rec.at[tid, "x_a"], rec.at[tid, "x_b"]
        np.testing.assert_array_equal(part["point"], T)
        # the answer's own run and the fresh re-run: both the curve at the answer
        np.testing.assert_allclose(part["answer"], curve(a, b), rtol=0, atol=1e-12)
        np.testing.assert_allclose(part["resim_median"], curve(a, b), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(part["band_low"], part["band_high"])
    # a deterministic simulator (found out by two identical seeds) is run once
    assert (tab["replicates"] == 1).all() and not tab["stochastic"].any()


def test_posterior_predictive_band_is_the_checks_runs(linear: dict) -> None:
    tab = linear["table"]
    for tid, part in tab.groupby("target_id"):
        Y = np.array([curve(a, b) for a, b in DRAWS[tid]])    # the failed run left out
        assert (part["post_runs"] == len(Y)).all()
        np.testing.assert_allclose(part["post_median"], np.median(Y, axis=0), atol=1e-12)
        np.testing.assert_allclose(part["post_low"], np.percentile(Y, 5, axis=0), atol=1e-12)
        np.testing.assert_allclose(part["post_high"], np.percentile(Y, 95, axis=0),
                                   atol=1e-12)
    assert "Dotted band: 5-95 % of the simulator at 4 posterior draws" in band_sentence(tab)
    # without the check's point columns (a posterior of scalars): no band, no error
    assert posterior_runs(ppc_runs().drop(columns=["y@4"]), POINTS) == {}


def test_misfit_is_the_weighted_l1_and_sums_to_the_strategys_delta(linear: dict) -> None:
    tab, tg, s = linear["table"], linear["targets"], linear["y_std"]
    rec = linear["rec"].set_index("target_id")
    for tid, part in tab.groupby("target_id"):
        row = tg.set_index("target_id").loc[tid]
        obs = row[POINTS].to_numpy(dtype=float)
        seen = np.isfinite(obs)
        m = seen.sum()
        div = np.array([row["sd_y@2"] if c == "y@2" else s[c] for c in POINTS])
        ans = np.array([rec.at[tid, f"sim_{c}"] for c in POINTS])
        want = np.where(seen, np.abs(ans - np.nan_to_num(obs)) / (m * div), 0.0)
        np.testing.assert_allclose(part["misfit_answer"], want, rtol=1e-12, atol=1e-15)
        assert (part["weight"].to_numpy()[~seen] == 0).all()
        np.testing.assert_array_equal(part["sd"].notna(), [c == "y@2" for c in POINTS])
        # the series' misfit plus the scalar's term is the strategy's own Delta
        scalar = abs(rec.at[tid, "sim_mean_y"] - row["mean_y"]) / s["mean_y"]
        assert part["misfit_answer"].sum() + scalar == pytest.approx(rec.at[tid, "error"],
                                                                     rel=1e-12)
    per = series_misfit(tab)
    assert list(per.columns) == ["target_id", "series", "misfit_answer", "misfit_resim",
                                 "replicates"]
    np.testing.assert_allclose(per["misfit_answer"], per["misfit_resim"], rtol=1e-12)


@pytest.mark.parametrize("metamodel", [True, False], ids=["metamodel", "no-metamodel"])
def test_sequentials_misfit_adds_up_to_its_delta(tmp_path: Path, metamodel: bool) -> None:
    """The table's misfit of the answer, summed over the curve's points plus the
    scalar's term, is the records' Δ: with a metamodel (its training sd) and in a study
    that only ``sequential`` calibrates (its start runs' scale: one per series, so every
    point of a curve without an sd of its own shares one divisor)."""
    case = run_case(tmp_path, "lin_curve", ("mean_y",), {"budget": 8, **SEQ}, replicates=3,
                    strategy="sequential", metamodel=metamodel)
    tab, tg = case["table"], case["targets"].set_index("target_id")
    rec = case["rec"].set_index("target_id")
    runs = case["runs"]
    start = runs[(runs["phase"] == "sobol") & (runs["status"] == "ok")]
    assert len(start) >= 2 and not (runs["phase"] == "design").any()
    # the scalar's divisor: a scalar's sd is the same by either route
    s_mean = case["y_std"]["mean_y"] if metamodel else float(start["mean_y"].std(ddof=0))
    for tid, part in tab.groupby("target_id"):
        scalar = abs(rec.at[tid, "sim_mean_y"] - tg.at[tid, "mean_y"]) / s_mean
        assert part["misfit_answer"].sum() + scalar == pytest.approx(rec.at[tid, "error"],
                                                                     rel=1e-9, abs=1e-12)
        if not metamodel:
            # every observed point without its own sd: one divisor (the series' scale)
            own = part[part["observed"].notna() & part["sd"].isna()]
            assert own["weight"].nunique() == 1


def write_draws(directory: Path, draws: dict[int, list[tuple[float, float]]]) -> None:
    """Stand-in netCDFs of a posterior as cal-seq-posterior writes them
    (``targets/target_<id>.nc``: 2 chains of the (a, b) draws given)."""
    from simcalib.bayes.posterior import to_inference_data, write_netcdf

    (directory / "targets").mkdir(parents=True)
    for tid, d in draws.items():
        X = np.array(d, dtype=float).reshape(2, -1, 2)
        idata = to_inference_data({"a": X[..., 0], "b": X[..., 1]},
                                  {"lp": np.zeros(X.shape[:2])}, {}, {}, {},
                                  {"target_id": tid})
        write_netcdf(idata, directory / "targets" / f"target_{tid}.nc")


#: draws of sequential's stand-in posterior: 6 for target 0 (none written for target 1)
SEQ_DRAWS = {0: [(0.1, 0.0), (0.2, 0.1), (0.3, -0.1), (0.5, 0.05), (0.4, 0.2), (0.25, 0.0)]}


@pytest.fixture(scope="module")
def seq_case(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``sequential`` in a study without a metamodel, its curves drawn (a design
    posterior's check given as well, as the workflow never does for sequential)."""
    return run_case(tmp_path_factory.mktemp("seq"), "lin_curve", ("mean_y",),
                    {"budget": 8, **SEQ}, replicates=3, strategy="sequential",
                    metamodel=False, ppc=ppc_runs())


def test_sequentials_band_is_drawn_from_its_own_posterior(seq_case: dict,
                                                          tmp_path: Path) -> None:
    post = tmp_path / "sequential_posterior"
    write_draws(post, SEQ_DRAWS)
    out, png = tmp_path / "seq.csv", tmp_path / "seq.png"
    assert curves_main([*seq_case["argv"], "--seq-posterior", str(post), "--ppc-draws", "6",
                        "--output", str(out), "--output-figure", str(png)]) == 0
    tab = pd.read_csv(out, keep_default_na=False, na_values=[""])
    t0 = tab[tab["target_id"] == 0]
    # 6 draws of 6: every draw run once (a deterministic curve: the band is theirs)
    Y = np.array([curve(a, b) for a, b in SEQ_DRAWS[0]])
    assert (t0["post_runs"] == 6).all() and (t0["post_from"] == SEQUENTIAL_POSTERIOR).all()
    np.testing.assert_allclose(t0["post_median"], np.median(Y, axis=0), atol=1e-12)
    np.testing.assert_allclose(t0["post_low"], np.percentile(Y, 5, axis=0), atol=1e-12)
    np.testing.assert_allclose(t0["post_high"], np.percentile(Y, 95, axis=0), atol=1e-12)
    # the design posterior's check is not sequential's: never mixed in; a target
    # without draws has no band
    t1 = tab[tab["target_id"] == 1]
    assert (t1["post_runs"] == 0).all() and t1["post_low"].isna().all()
    assert "6 posterior draws of sequential's own posterior" in band_sentence(tab)
    # the same table without --seq-posterior: the design posterior's band, named so
    base = seq_case["table"]
    assert (base["post_runs"] > 0).all() and (base["post_from"] == DESIGN_POSTERIOR).all()
    assert "draws of the design posterior" in band_sentence(base)
    # the rest of the table does not depend on where the band came from
    keep = ["target_id", "point", "answer", "misfit_answer", "resim_median"]
    pd.testing.assert_frame_equal(tab[keep], base[keep])
    assert png.stat().st_size > 5000


def noisy_mix(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """The noisy curve and its mean: a scalar and a series from one stochastic run."""
    out = pd.DataFrame({"y": list(noisy_curve(df, seeds)["y"])})
    out["mean_y"] = [float(np.mean(c)) for c in out["y"]]
    return out


@pytest.mark.slow
def test_sequentials_own_posterior_end_to_end_on_a_scalar_and_a_series(
        tmp_path: Path) -> None:
    """sequential -> its posterior (the files cal-seq-posterior writes) -> the band of
    its answers, on a study mixing a scalar and a series (whose posterior once failed
    to fit: the scalar entered its ensemble twice)."""
    from simcalib.metamodel.posterior import sequential_posterior
    from simcalib.report.curves import posterior_predictive_runs

    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    cfg = {**study_cfg("lin_curve", ("mean_y",)),
           "simulator": {"type": "python", "options": {"function": noisy_mix}}}
    st = Study("mix", cfg)
    targets = observed_targets(st.outputs)
    mm = RunScale(list(st.input_names), list(st.outputs), study="mix")
    rec, runs = calibrate(st, mm, targets, "sequential", {"budget": 16, **SEQ},
                          {"backend": "highs"}, SEED)
    fast = {"chains": 2, "warmup": 200, "draws": 400, "max_draws": 400, "init_draws": 200,
            "error_dof": 0, "error_scale": 1.0, "pair_plots": 0, "save_draws": 50,
            "obs_noise": "auto", "ppc_draws": 0}
    sequential_posterior(st, runs, targets, rec, fast, SEQ["sequential"]["ensemble"], seed=1,
                         out_dir=tmp_path / "sequential_posterior")
    ppc = posterior_predictive_runs(st, tmp_path / "sequential_posterior" / "targets",
                                    targets, rec["target_id"], 7, SEED)
    assert sorted(ppc.groupby("target_id").size().items()) == [(0, 7), (1, 7)]
    scale, _ = delta_scale(st.outputs, None, runs)
    tab, _ = curve_table(st, rec, targets, scale, Band(3, 5, 95), SEED, True, ppc_runs=ppc,
                         post_from=SEQUENTIAL_POSTERIOR)
    assert (tab["post_runs"] == 7).all() and (tab["post_from"] == SEQUENTIAL_POSTERIOR).all()
    assert (tab["post_low"] <= tab["post_median"]).all()
    assert (tab["post_median"] <= tab["post_high"]).all()
    # the draws are the posterior's: the same seed draws the same runs again
    again = posterior_predictive_runs(st, tmp_path / "sequential_posterior" / "targets",
                                      targets, rec["target_id"], 7, SEED)
    pd.testing.assert_frame_equal(ppc[POINTS], again[POINTS])


def test_seq_posterior_is_for_sequentials_answers_only(
        linear: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*linear["argv"], "--seq-posterior", str(tmp_path), "--ppc-draws", "3",
            "--output", str(tmp_path / "c.csv"), "--output-figure", str(tmp_path / "c.png")]
    assert curves_main(argv) == 2
    assert "--seq-posterior" in capsys.readouterr().err
    assert not (tmp_path / "c.csv").exists()


def test_an_extra_target_set_is_named_in_the_title_and_log(
        linear: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "targets_ood" / "rs.csv"
    with caplog.at_level("INFO", logger="simcalib.commands.curves"):
        assert curves_main([*linear["argv"], "--target-set", "targets_ood", "--output",
                            str(out), "--output-figure", str(out.with_suffix(".png"))]) == 0
    assert "lin (target set ood) rs: 2 target(s)" in caplog.text
    # the table is the set's: the same records give the same table, whatever the title
    pd.testing.assert_frame_equal(pd.read_csv(out), linear["table"])


def test_figure_is_written_and_names_the_curves_left_out(linear: dict) -> None:
    png = linear["png"]
    assert png.is_file() and png.stat().st_size > 5000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from simcalib.report.curve_plots import fig_curves

    # the command drew 1 panel of 2 (--max-panels 1); the other is named, not lost
    assert fig_curves(linear["table"], png.with_name("again.png"), "t", max_panels=1) == 1
    assert fig_curves(linear["table"], png.with_name("all.png"), "t", max_panels=12) == 0


@pytest.mark.slow
def test_stochastic_band_holds_the_median_and_is_the_rescoring(tmp_path: Path) -> None:
    k = 7
    case = run_case(tmp_path, "noisy_curve", (), {"budget": 6, "rescore": k}, replicates=k)
    tab, rec = case["table"], case["rec"].set_index("target_id")
    assert (tab["replicates"] == k).all() and tab["stochastic"].all()
    assert (tab["band_low"] <= tab["resim_median"]).all()
    assert (tab["resim_median"] <= tab["band_high"]).all()
    assert (tab["band_high"] - tab["band_low"] > 0).all()       # noise: a real band
    for tid, part in tab.groupby("target_id"):
        a, b = rec.at[tid, "x_a"], rec.at[tid, "x_b"]
        # k draws of N(0, 0.1^2): the median within 3 sd of the mean of 7 of the curve
        assert np.abs(part["resim_median"] - curve(a, b)).max() < 0.3
        # the band's runs are the re-scoring runs: their mean misfit is rescored_error
        assert part["misfit_resim"].sum() == pytest.approx(rec.at[tid, "rescored_error"],
                                                           rel=1e-10)


def test_bad_band_and_tables_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="--band"):
        Band(5, 60, 95)
    with pytest.raises(ConfigError, match="--replicates"):
        Band(0, 5, 95)
    st = Study("lin", study_cfg("lin_curve"), partial=True)
    with pytest.raises(DataError, match=r"lacks column\(s\) \['y@0'"):
        curve_table(st, pd.DataFrame({"target_id": [0]}), pd.DataFrame({"target_id": [0]}),
                    np.ones(len(T)), Band(3, 5, 95), 0, False)
    with pytest.raises(DataError, match="no y_std for output"):
        delta_scale(["y@0"], {"output_names": ["z"], "y_std": [1.0]})
    scale, source = delta_scale(["y@0", "y@1"], None, pd.DataFrame(
        {"phase": ["sobol"] * 3 + ["round1"], "status": "ok", "y@0": [0.0, 1.0, 2.0, 99.0],
         "y@1": [1.0, 1.0, 1.0, 5.0]}))
    # two points of one series: one scale, the root mean of their variances (as
    # sequential's RunScale.settle), never a per-point sd
    np.testing.assert_allclose(scale, np.sqrt(np.var([0.0, 1.0, 2.0]) / 2) * np.ones(2))
    assert "3 successful start runs" in source and "one per series" in source
    # the metamodel's scale: output_scale's 1 where y_std is not positive, in the
    # study's output order
    scale, source = delta_scale(["y@1", "y@0"], {"output_names": ["y@0", "y@1"],
                                                 "y_std": [0.0, 2.0]})
    np.testing.assert_allclose(scale, [2.0, 1.0])
    assert source == "metamodel training sd"


# ------------------------------------------------------------------- page and console
def test_page_and_console_show_the_curves_of_the_recommended_strategy(
        linear: dict, tmp_path: Path) -> None:
    from simcalib.cli import main

    res = tmp_path / "results"
    cal = res / "lin" / "calibration"
    cal.mkdir(parents=True)
    rec = linear["rec"]
    rec.to_csv(cal / "rs.csv", index=False)
    linear["targets"].to_csv(res / "lin" / "targets.csv", index=False)
    assert main(["cal-summary", "--records", f"rs={cal / 'rs.csv'}", "--output",
                 str(cal / "summary.csv"), "--targets", str(res / "lin" / "targets.csv"),
                 "--output-figure", str(cal / "strategies.png")]) == 0
    blocks = answer.study_answer(res, "lin", tmp_path / "figs")
    before = [b for b in blocks if isinstance(b, Table)][0].df
    assert not [c for c in before.columns if c.startswith("misfit")]
    assert not [b for b in blocks if isinstance(b, Figure) and "curves" in b.title]
    (res / "lin" / "curves").mkdir()
    linear["table"].to_csv(res / "lin" / "curves" / "rs.csv", index=False)
    (res / "lin" / "curves" / "rs.png").write_bytes(linear["png"].read_bytes())

    blocks = answer.study_answer(res, "lin", tmp_path / "figs")
    table = [b for b in blocks if isinstance(b, Table)][0].df
    per = series_misfit(linear["table"]).set_index("target_id")
    np.testing.assert_allclose(table["misfit y (the answer's run)"],
                               per.loc[table["target"], "misfit_answer"])
    assert "misfit y (one re-run)" in table      # deterministic: one run at the answer
    figs = [b for b in blocks if isinstance(b, Figure)]
    curves = [f for f in figs if f.path == res / "lin" / "curves" / "rs.png"]
    assert len(curves) == 1 and curves[0].caption.startswith("Deterministic simulator")
    assert "posterior draws" in curves[0].caption
    # the scalar figure draws the scalar only, never one panel per point
    assert all("curves" in str(f.path) or "answer_lin" in f.path.name for f in figs)
    page = first_page.sections(res, ["lin"], figures=tmp_path / "figs")
    assert any(isinstance(b, Figure) and b.path == curves[0].path for _, bl in page for b in bl)
    lines = console.study_lines(res, "lin")
    assert any(str(res / "lin" / "curves" / "rs.png") in ln for ln in lines)
    # an extra target set's curves are listed too (before: only the main set's)
    extra = res / "lin" / "curves" / "targets_holdout" / "rs.png"
    extra.parent.mkdir()
    extra.write_bytes(linear["png"].read_bytes())
    lines = console.study_lines(res, "lin")
    assert any("'holdout'" in ln and str(extra) in ln for ln in lines)


# ------------------------------------------------------------------- workflow
DRY_CONFIG = """
seed: 3
threads: 1
studies:
  curvy:
    simulator:
      type: epidemic
      options: {population: 2000, replicates: 1, max_days: 30}
    parameters:
      R0: {lower: 1.2, upper: 2.5}
      vaccinationfraction: {lower: 0.5, upper: 1.0}
    contexts:
      responsedelay: {values: [7]}
      ascertainmentdelay: {values: [3]}
      ascertainmentfraction: {values: [0.6]}
      vaccinedosesdaily: {values: [500]}
    series:
      cases: {index: day, points: {from: 1, to: 30}}
    design: {method: sobol, n: 16, chunk_size: 16}
    targets: {n: 2}
    extra_targets: {ood: {n: 2}}
    metamodel: {hidden: [8], epochs: 20, patience: 5, batch_size: 16}
    optimize: {solver: highs-default}
    calibration: {enabled: true, strategies: [rs, op, sequential], budget: 4, rescore: 3,
                  posterior: {enabled: true, ppc_draws: 5}, extra_targets: [ood],
                  extra_strategies: [op]}
  plain:
    simulator: {type: rosenbrock}
    parameters:
      x: {lower: -1, upper: 1}
      y: {lower: -1, upper: 1}
    contexts:
      a: {values: [1]}
      b: {values: [10]}
    design: {method: sobol, n: 16, chunk_size: 16}
    targets: {n: 2}
    metamodel: {hidden: [8], epochs: 20, patience: 5, batch_size: 16}
    optimize: {solver: highs-default}
    calibration: {enabled: true, strategies: [rs, op], budget: 4}
bayes: {settings: []}
multisource:
  analytic: {enabled: false}
  hardening: {enabled: false}
"""


@pytest.mark.slow
def test_dry_run_has_a_curves_job_per_strategy_of_the_series_study_only(
        tmp_path: Path) -> None:
    cfg = tmp_path / "curves.yaml"
    cfg.write_text(DRY_CONFIG)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "-d", str(tmp_path / "wd"), "--configfile", str(cfg),
                           "--cores", "1", "-n", "-p"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    blocks = [b for b in out.split("\n\n") if "rule cal_curves:" in b]
    jobs = {(j.split("curvedir=")[1].split(",")[0].strip(),
             j.split("strategy=")[1].split()[0].strip(",")): j for j in blocks}
    assert sorted(jobs) == [("curves", "op"), ("curves", "rs"), ("curves", "sequential"),
                            ("curves/targets_ood", "op")]
    assert all("study=curvy" in j for j in blocks)
    assert "results/plain/curves" not in out
    # the band's runs are the study's re-scoring runs; the report waits for the curves
    assert all("--replicates 3 " in j for j in blocks)
    # the design posterior's predictive-check runs are its posterior predictive band ...
    ppc = "--posterior-runs results/curvy/calibration/posterior/ppc_runs.csv"
    for s in ("rs", "op"):
        assert ppc in jobs["curves", s] and "calibration/posterior/ppc.csv" in jobs["curves", s]
    # ... but sequential's answers get sequential's own posterior, ppc_draws of its draws
    seq = jobs["curves", "sequential"]
    assert ("--seq-posterior results/curvy/calibration/sequential_posterior --ppc-draws 5"
            in seq and "sequential_posterior/posterior.json" in seq and ppc not in seq)
    # an extra target set: its own records, targets and title, no posterior band
    ood = jobs["curves/targets_ood", "op"]
    for want in ("--records results/curvy/calibration/targets_ood/op.csv",
                 "--runs results/curvy/calibration/targets_ood/runs/op.csv",
                 "--targets results/curvy/targets_ood.csv", "--target-set targets_ood",
                 "--output results/curvy/curves/targets_ood/op.csv"):
        assert want in ood, want
    assert "--posterior-runs" not in ood and "--seq-posterior" not in ood
    report = next(b for b in out.split("\n\n") if "rule report_summary:" in b)
    assert "results/curvy/curves/rs.png" in report and "results/curvy/curves/op.csv" in report
    assert "results/curvy/curves/targets_ood/op.png" in report


def test_replicates_follow_the_declared_noise_and_the_rescoring_seeds() -> None:
    st = Study("lin", study_cfg("noisy_curve"), partial=True)
    x, ctx = np.array([0.4, 0.2]), {}
    Y, noisy = replicates_at(st, x, ctx, 3, 4, SEED, POINTS, True)
    assert noisy and Y.shape == (4, len(T)) and len({tuple(r) for r in Y}) == 4
    # the same runs whether the noise is declared or found out (run ids 0..n-1)
    Y2, noisy2 = replicates_at(st, x, ctx, 3, 4, SEED, POINTS, None)
    assert noisy2 and np.array_equal(Y, Y2)
    one, noisy3 = replicates_at(st, x, ctx, 3, 4, SEED, POINTS, False)   # declared: once
    assert not noisy3 and np.array_equal(one, Y[:1])
    # the seeds are the re-scoring ones: another target draws other noise
    other, _ = replicates_at(st, x, ctx, 4, 4, SEED, POINTS, True)
    assert not np.array_equal(other, Y)


def test_delta_unit_names_a_series_once() -> None:
    from simcalib.report.sections import report_unit
    from simcalib.study.observations import delta_unit

    tg = observed_targets(["mean_y", *POINTS])            # sd at y@2 only, none for mean_y
    assert report_unit(tg, ["mean_y", *POINTS]) == (
        "observations' sd_<output> for y, training sd for the others")
    assert report_unit(tg, POINTS).startswith("measurement sd of each output")
    assert report_unit(tg.drop(columns=["sd_y@2"]), POINTS) == delta_unit(None, [])
    scalar = pd.DataFrame({"a": [1.0], "b": [2.0], "sd_a": [0.1]})
    assert report_unit(scalar, ["a", "b"]) == delta_unit(scalar, ["a", "b"])   # unchanged


def test_metamodel_and_noise_tables_show_a_series_as_one_row(tmp_path: Path) -> None:
    from simcalib.report.sections import metamodel_table

    pts_r2 = {c: 0.2 if c == "y@9" else 0.99 for c in POINTS}   # a flat tail: low R²
    info = {"output_names": ["mean_y", *POINTS], "min_r2": 0.9,
            "test_r2": {"mean_y": 0.97, **pts_r2},
            "test_mae": {"mean_y": 0.01, **dict.fromkeys(POINTS, 0.02)},
            "series": {"y": {"points": len(T), "components": 2, "test_r2": 0.95,
                             "basis_cv_relative": 0.004, "noise": {"ceiling": 0.98}}},
            "noise": {"stochastic": True, "source": "probe", "pairs": 8, "runs": 8,
                      "ceiling": {"mean_y": 0.99, **dict.fromkeys(POINTS, 0.9)},
                      "explainable_share": {"mean_y": 0.98, **dict.fromkeys(POINTS, 0.5)},
                      "var": {"mean_y": 1e-4, **{c: 0.01 * (i + 1) for i, c in
                                                 enumerate(POINTS)}}}}
    table = metamodel_table(info)
    assert list(table["output"]) == ["mean_y", "y (curve: 10 points, 2 components)"]
    np.testing.assert_allclose(table["test R²"], [0.97, 0.95])
    np.testing.assert_allclose(table["test MAE"], [0.01, 0.02])
    assert list(table["R² ≥ min_r2 (0.9)"]) == ["yes", "yes"]    # the curve, not y@9
    mm = tmp_path / "s" / "metamodel" / "metamodel.json"
    mm.parent.mkdir(parents=True)
    mm.write_text(json.dumps(info))
    noise = next(b.df for b in answer.noise_blocks(tmp_path, "s", pd.DataFrame(), "")
                 if isinstance(b, Table))
    assert list(noise["output"]) == ["mean_y", "y"]
    np.testing.assert_allclose(noise["noise ceiling (1 − noise var / total var)"], [0.99, 0.98])
    np.testing.assert_allclose(noise["noise sd of a dataset row"],
                               [1e-2, np.sqrt(np.mean(0.01 * np.arange(1, 11)))])
    # a scalar metamodel: the rows it always had
    scalar = {k: v for k, v in info.items() if k != "series"}
    assert len(metamodel_table(scalar)) == 1 + len(T)


def test_failed_targets_have_no_curve_and_a_scalar_study_is_refused(
        linear: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = Study("lin", study_cfg("lin_curve", ("mean_y",)), partial=True)
    rec = linear["rec"].copy()
    rec.loc[rec["target_id"] == 1, ["x_a", "x_b"]] = np.nan       # target 1 failed
    scale = np.ones(len(st.outputs))
    tab, noisy = curve_table(st, rec, linear["targets"], scale, Band(3, 5, 95), SEED, False)
    assert list(tab["target_id"].unique()) == [0] and noisy is False
    none, unknown = curve_table(st, rec.iloc[1:], linear["targets"], scale, Band(3, 5, 95),
                                SEED, None)
    assert none.empty and unknown is None
    from simcalib.report.curve_plots import fig_curves

    assert fig_curves(none, tmp_path / "none.png", "t") == 0 and (tmp_path / "none.png").is_file()
    # a study without series: the verb says so, naming the key
    cfg = {"simulator": {"type": "rosenbrock"}, "parameters": {
        "x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}},
        "contexts": {"a": {"values": [1]}, "b": {"values": [1]}}}
    recs = tmp_path / "r.csv"
    pd.DataFrame({"target_id": [0], "x_x": [0.5], "x_y": [0.5]}).to_csv(recs, index=False)
    rc = curves_main(["cal-curves", "--study", "plain", "--params", json.dumps(cfg),
                      "--seed", "1", "--records", str(recs), "--targets", str(recs),
                      "--replicates", "3", "--band", "5", "95", "--max-panels", "4",
                      "--output", str(tmp_path / "c.csv"),
                      "--output-figure", str(tmp_path / "c.png")])
    assert rc == 2
    assert "studies.plain.series" in capsys.readouterr().err
    assert not (tmp_path / "c.csv").exists()
