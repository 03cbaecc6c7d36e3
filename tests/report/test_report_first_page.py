"""The read-me-first page answers first (issue 28): calibrated inputs per target, the
observed vs re-simulated figure, posterior intervals, Bayes posteriors with NOT
CONVERGED boxes, wording from the results; and every trust flag the result files carry
(a bad metamodel, an unproven MILP, an unconverged chain, a failed target) appears in
the result files, the console summary and the page."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.cli import main
from simcalib.report import answer, first_page, flags
from simcalib.report import html as report_html
from simcalib.report.names import display
from simcalib.report.sections import Figure, Table
from simcalib.study.observations import delta_unit


def _write(path: Path, df: pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path


def _records(strategy: str, errors: list[float], xs: list[float], op_unproven: int = 0
             ) -> pd.DataFrame:
    """Per-target records as the strategy runner writes them (observed targets)."""
    n = len(errors)
    obs_a, obs_b = np.array([1.0, 2.0, 3.0])[:n], np.array([10.0, 20.0, 30.0])[:n]
    ok = np.isfinite(errors)
    return pd.DataFrame({
        "target_id": range(n), "strategy": strategy,
        "status": np.where(ok, "ok", "error"), "error": errors,
        "predicted_error": np.array(errors) / 2, "runs": 4, "seconds": 0.5,
        "failed_runs": np.where(ok, 0, 4),
        "op_unproven": [op_unproven] + [0] * (n - 1),
        "x_u": xs, "x_v": [0.5] * n,
        "target_a": obs_a, "sim_a": np.where(ok, obs_a + 0.1, np.nan),
        "target_b": obs_b, "sim_b": np.where(ok, obs_b - 1.0, np.nan)})


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """One metamodel study on "your data" (sd_ columns) with a bad metamodel, an
    unproven MILP, a failed target and an unconverged posterior; one Bayes setting on
    your data whose KOH chains did not converge."""
    res = tmp_path / "results"
    mm = res / "s" / "metamodel" / "metamodel.json"
    mm.parent.mkdir(parents=True)
    mm.write_text(json.dumps({"hidden": [4], "min_r2": 0.9, "output_names": ["a", "b"],
                              "test_r2": {"a": 0.95, "b": 0.31},
                              "test_mae": {"a": 0.1, "b": 2.0}}))
    _write(res / "s" / "targets.csv", pd.DataFrame({
        "target_id": [0, 1, 2], "a": [1.0, 2.0, 3.0], "b": [10.0, 20.0, 30.0],
        "sd_a": [0.1] * 3, "sd_b": [1.0] * 3, "status": ["ok"] * 3}))
    _write(res / "s" / "op" / "op.csv", pd.DataFrame({
        "target_id": [0, 1, 2], "rank": 0, "status": ["optimal", "time_limit", "optimal"],
        "objective": [0.1, 0.4, 0.2], "bound": [0.1, 0.1, 0.2], "gap": [0.0, 0.75, 0.0],
        "seconds": [1.0, 20.0, 1.0]}))
    cal = res / "s" / "calibration"
    rs = _write(cal / "rs.csv", _records("rs", [3.0, 2.0, np.nan], [0.1, 0.2, 0.3]))
    op = _write(cal / "op.csv", _records("op", [0.5, 1.5, 0.25], [0.7, 0.8, 0.9],
                                         op_unproven=1))
    assert main(["cal-summary", "--records", f"rs={rs}", f"op={op}",
                 "--output", str(cal / "summary.csv"), "--metamodel-info", str(mm),
                 "--targets", str(res / "s" / "targets.csv"),
                 "--output-figure", str(cal / "strategies.png")]) == 0
    _write(cal / "posterior" / "posterior_summary.csv", pd.DataFrame({
        "target_id": [0, 0, 1, 1], "input": ["u", "v"] * 2, "mean": [0.7, 0.5, 0.8, 0.5],
        "sd": 0.05, "q5": [0.6, 0.4, 0.7, 0.1], "q50": [0.7, 0.5, 0.8, 0.5],
        "q95": [0.8, 0.6, 0.9, 0.9], "r_hat": [1.001, 1.002, 1.3, 1.2],
        "ess_bulk": [900.0, 800.0, 12.0, 15.0], "converged": [True, True, False, False],
        "prior_sd_ratio": 0.2, "identified": True}))
    for method, conv, rhat in (("koh", False, 1.21), ("mos", True, 1.002)):
        _write(res / "bayes" / "pp" / method / "summary.csv", pd.DataFrame({
            "setting": "pp", "method": method, "rep": 0, "parameter": ["alpha", "beta"],
            "mean": [0.6, 0.02], "sd": [0.1, 0.01], "lower95": [0.4, 0.01],
            "upper95": [0.9, 0.03], "r_hat": [rhat, 1.001], "ess_bulk": [40.0, 900.0],
            "converged": [conv, True]}))
    return res


def test_result_files_console_and_page_carry_every_flag(results: Path,
                                                        tmp_path: Path) -> None:
    # 1. the result files carry the flags
    summ = pd.read_csv(results / "s" / "calibration" / "summary.csv")
    assert not summ["metamodel_ok"].any()
    assert summ.set_index("strategy").loc["op", "op_unproven"] == 1
    assert summ.set_index("strategy").loc["rs", "failed_targets"] == 1
    # 2. the console summary lists each, with the file to open
    console = flags.console_summary(results, ["s"], ["pp"])
    for what in ("metamodel", "MILP not proven optimal", "failed targets",
                 "posterior NOT CONVERGED", "KOH chains NOT CONVERGED"):
        assert f": {what}: " in console, what
    assert "MOS chains" not in console
    n = sum(line.startswith("FLAG ") for line in console.splitlines())
    assert console.splitlines()[-1] == f"{n} results flagged" and n >= 5
    # 3. the read-me-first page shows the same flags, in red boxes, before any answer
    out = tmp_path / "report"
    assert main(["report-summary", "--results", str(results), "--studies", "s",
                 "--bayes-settings", "pp", "--output", str(out / "summary.md"),
                 "--output-runtime", str(out / "rt.csv"),
                 "--output-html", str(out / "summary.html"),
                 "--output-figures-dir", str(out / "figures")]) == 0
    page = (out / "summary.html").read_text()
    trust = page[:page.index("<h2 id=\"metamodel-calibration")]
    assert trust.count('<p class="flag"><strong>FLAG</strong>') == n
    for what in ("metamodel", "MILP not proven optimal", "failed targets",
                 "posterior NOT CONVERGED", "KOH chains NOT CONVERGED"):
        assert f"<strong>{what}</strong>" in trust, what
    # the Bayes setting's own box, as prominent as the metamodel's
    bayes = page[page.index("setting <code>pp</code>"):]
    assert '<p class="flag"><strong>NOT CONVERGED:</strong> KOH chains' in bayes
    assert "MOS chains" not in bayes
    md = (out / "summary.md").read_text()
    assert md.count("**FLAG**") >= n and f"{n} results flagged." in md


def test_the_answer_comes_first_in_your_words(results: Path, tmp_path: Path) -> None:
    blocks = answer.study_answer(results, "s", tmp_path)
    text = " ".join(b for b in blocks if isinstance(b, str))
    # op has the smallest median Δ among strategies that calibrated the targets
    assert "Strategy **op** is recommended" in text
    assert "your data" in text and "paper" not in text.lower()
    assert "measurement sd of each output" in text           # Δ's divisor, from sd_
    tables = {b.title: b for b in blocks if isinstance(b, Table)}
    best = tables["Calibrated inputs per target: op (recommended)"]
    assert not best.collapsed and list(best.df["u"]) == [0.7, 0.8, 0.9]
    assert tables["Calibrated inputs per target: rs (click to open)"].collapsed
    assert "Δ (measurement sds)" in best.df.columns
    fig = next(b for b in blocks if isinstance(b, Figure))
    assert fig.path.is_file() and fig.path.stat().st_size > 5000
    post = next(t for title, t in tables.items() if "posterior" in title).df
    assert list(post["90 % interval"][:2]) == ["[0.6, 0.8]", "[0.4, 0.6]"]
    assert any(isinstance(b, str) and b.startswith("**NOT CONVERGED:**") and "[1]" in b
               for b in blocks)
    # the collapsed tables are a click away on the page, the figure is embedded
    html = "\n".join(report_html.block_html(b) for b in blocks)
    assert html.count("<details>") == 1 and "data:image/png;base64," in html


def test_bayes_answer_and_titles_follow_the_data(results: Path) -> None:
    blocks = answer.bayes_answer(results, "pp")
    wide = next(b for b in blocks if isinstance(b, Table)).df
    assert list(wide["parameter"]) == ["alpha", "beta"]
    assert list(wide["KOH converged"]) == [False, True]
    assert wide["KOH 95 % interval"].iloc[0] == "[0.4, 0.9]"
    assert "your data" in first_page.bayes_title(results, "pp")
    assert "paper" not in first_page.bayes_title(results, "pp")
    assert "paper" not in first_page.study_title("my_model")
    assert "paper 1" in first_page.study_title("epidemic")


def test_delta_unit_and_readable_names() -> None:
    t = pd.DataFrame({"target_id": [0], "sd_a": [0.1], "sd_b": [np.nan]})
    assert delta_unit(None, ["a"]).startswith("training sd")
    assert delta_unit(t, ["a"]).startswith("measurement sd")
    assert delta_unit(t, ["a", "b"]) == ("observations' sd_<output> for a, training sd "
                                         "for the others")
    df = display(pd.DataFrame(columns=["median_error", "x_mass", "r_hat", "paper_bias",
                                       "other"]), delta_unit(t, ["a"]))
    assert list(df.columns) == ["median Δ (measurement sds)", "mass", "R-hat",
                                "paper's bias", "other"]
