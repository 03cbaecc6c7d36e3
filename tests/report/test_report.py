"""The report's tables from small hand-made result files: what summary.md and the HTML
pages of the Snakemake report hold, and the trust warnings beside them."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from simcalib.commands import report as cmd
from simcalib.report import build as report
from simcalib.report import html as report_html
from simcalib.report import sections as sec


def _write(path: Path, df: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results tree with one paper-1 study, paper 2's RRMSE and one paper-3 setting."""
    res = tmp_path / "results"
    mm = res / "ros" / "metamodel"
    mm.mkdir(parents=True)
    (mm / "metamodel.json").write_text(json.dumps({
        "hidden": [8], "min_r2": 0.9, "test_r2": {"f": 0.95, "g": 0.42},
        "test_mae": {"f": 0.1, "g": 0.7}}))
    _write(res / "ros" / "op" / "op.csv", pd.DataFrame({
        "target_id": [0, 1], "rank": [0, 0], "x": [0.1, 0.2],
        "status": ["optimal", "time_limit"], "objective": [1.0, 2.0], "bound": [1.0, 1.5],
        "gap": [0.0, 0.25], "seconds": [0.5, 9.75], "nodes": [1, 400],
        "backend": ["highs", "highs"], "flag": [None, "unproven(time_limit, gap 0.25)"]}))
    _write(res / "ros" / "calibration" / "summary.csv", pd.DataFrame({
        "strategy": ["rs", "pts", "blackbox"], "median_error": [1.5, 0.75, 2.25],
        "mean_error": [1.5, 0.75, 2.25], "runs": [4, 4, 4],
        "metamodel_min_test_r2": [0.42] * 3, "metamodel_min_r2": [0.9] * 3,
        "metamodel_ok": [False] * 3, "op_unproven": [0, 1, 0]}))
    _write(res / "multisource" / "analytic" / "rrmse.csv", pd.DataFrame({
        "scenario": ["s0_s1", "s0_s1", "all"], "output": ["y1", "y2", "y1"],
        "rrmse": [0.125, 0.5, 0.0625]}))
    bayes = res / "bayes" / "two_mass"
    _write(bayes / "table_params.csv", pd.DataFrame({
        "method": ["koh", "mos"], "parameter": ["k1", "k1"], "bias": [0.5, -0.25],
        "rmse": [1.0, 0.75], "coverage": [1.0, 0.0], "width": [3.0, 2.0],
        "replications": [2, 2], "paper_bias": [0.5533, 0.1767]}))
    _write(bayes / "metrics.csv", pd.DataFrame({
        "method": ["koh", "mos"], "parameter": ["k1", "k1"], "rhat_max": [1.003, 1.4],
        "ess_bulk_min": [812.0, 9.0]}))
    _write(bayes / "table_output.csv", pd.DataFrame({
        "metric": ["time-integrated rmse"], "koh": [0.43], "mos": [0.41],
        "paper_koh": [0.3133], "paper_mos": [0.3083]}))
    return res


def _tables(blocks: list[sec.Block]) -> dict[str, pd.DataFrame]:
    return {b.title: b.df for b in blocks if isinstance(b, sec.Table)}


def _warnings(blocks: list[sec.Block]) -> list[str]:
    return [b for b in blocks if isinstance(b, str) and b.startswith("**WARNING")]


def test_paper1_tables_hold_r2_per_output_op_solves_and_strategies(results: Path) -> None:
    blocks = sec.paper1_section(results, "ros")
    tables = _tables(blocks)
    r2 = tables["Metamodel test R² per output"]
    assert list(r2["output"]) == ["f", "g"]
    assert list(r2["test R²"]) == [0.95, 0.42]
    assert list(r2["R² ≥ min_r2 (0.9)"]) == ["yes", "NO"]
    op = next(df for t, df in tables.items() if t.startswith("OP per target"))
    assert list(op.columns) == ["target_id", "rank", "status", "objective", "bound", "gap",
                                "seconds", "nodes", "backend", "flag"]
    assert list(op["status"]) == ["optimal", "time_limit"] and op["gap"].iloc[1] == 0.25
    assert "x" not in op          # the inputs stay in op.csv; the table shows trust
    strat = next(df for t, df in tables.items() if t.startswith("Calibration strategies"))
    assert list(strat["strategy"]) == ["rs", "pts", "blackbox"]      # config names
    assert "metamodel_ok" not in strat and "op_unproven" in strat
    warn = " ".join(_warnings(blocks))
    assert "g" in warn and "min_r2 = 0.9" in warn                   # the weak output
    assert "1 OP solve(s) not proven optimal" in warn
    assert "pts 1" in warn                                          # from summary.csv
    assert "OP solves: 2 targets, median 5.12 s, max 9.75 s; status: optimal 1, " \
        "time_limit 1." in blocks


def test_paper1_section_is_empty_without_results(tmp_path: Path) -> None:
    assert sec.paper1_section(tmp_path, "nothing") == []


def test_metamodel_table_uses_the_default_threshold_for_old_files() -> None:
    t = sec.metamodel_table({"test_r2": {"a": 0.91, "b": 0.89}})
    assert list(t["R² ≥ min_r2 (0.9)"]) == ["yes", "NO"]
    assert t["test MAE"].isna().all()


def test_bayes_tables_carry_rhat_and_ess_and_warn(results: Path) -> None:
    blocks = sec.paper3_section(results, ["two_mass"])
    params = next(df for t, df in _tables(blocks).items() if "parameters" in t)
    assert list(params["rhat_max"]) == [1.003, 1.4]
    assert list(params["ess_bulk_min"]) == [812.0, 9.0]
    assert list(params["paper_bias"]) == [0.5533, 0.1767]
    warn = _warnings(blocks)
    assert len(warn) == 1 and "mos k1" in warn[0] and "koh" not in warn[0]
    assert any("2 replication(s)" in b for b in blocks if isinstance(b, str))


def test_bayes_falls_back_to_the_markdown_tables(tmp_path: Path) -> None:
    base = tmp_path / "bayes" / "s"
    base.mkdir(parents=True)
    (base / "table_params.md").write_text("### s: parameters\n\n| a |\n| --- |\n| 1 |\n")
    blocks = sec.paper3_section(tmp_path, ["s"])
    assert blocks == ["### s: parameters\n\n| a |\n| --- |\n| 1 |"]
    assert "<pre>" in report_html.block_html(blocks[0])


def test_paper2_rrmse_pivot(results: Path) -> None:
    t = _tables(sec.paper2_section(results))
    rr = next(df for title, df in t.items() if "RRMSE" in title)
    assert rr.loc["y1", "s0_s1"] == 0.125 and rr.loc["y1", "all"] == 0.0625
    assert pd.isna(rr.loc["y2", "all"])


def test_markdown_and_html_hold_the_same_numbers(results: Path) -> None:
    sections = [("Paper 1 — study `ros`", sec.paper1_section(results, "ros"))]
    md = report.summary_markdown(sections, report.runtime_table(pd.DataFrame()))
    page = report_html.page("t", ["intro"], sections)
    for text in ("test R²", "0.42", "time_limit", "9.75", "blackbox"):
        assert text in md and text in page, text
    assert page.count("<table") == 3
    assert '<p class="warning"><strong>WARNING:</strong>' in page
    assert "<code>ros</code>" in page and "**" not in page
    # a table row of the strategies table, numbers to 4 significant digits
    assert re.search(r"<td>pts</td>\s*<td>0\.75</td>", page)


def test_html_escapes_what_it_shows() -> None:
    t = sec.Table("a <b>", pd.DataFrame({"c": ["<script>"]}))
    out = report_html.table_html(t)
    assert "<script>" not in out and "&lt;script&gt;" in out and "a &lt;b&gt;" in out


def test_report_summary_verb_writes_every_page(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = argparse.Namespace(results=str(results), studies=["ros"],
                              bayes_settings=["two_mass"], multisource=True,
                              output=str(out / "summary.md"), runtime=str(out / "rt.csv"),
                              html=str(out / "summary.html"), tables_dir=str(out / "tables"))
    assert cmd.cmd_summary(args) == 0
    assert sorted(p.name for p in (out / "tables").iterdir()) == [
        "paper1_ros.html", "paper2.html", "paper3.html"]
    summary = (out / "summary.html").read_text()
    assert "read me first" in summary.lower()
    for text in ("What to trust", "Metamodel calibration: study <code>ros</code>",
                 "paper 2", "setting <code>two_mass</code>", "test R²", "worst R-hat",
                 "Runtime"):
        assert text in summary, text
    assert "worst R-hat" in (out / "tables" / "paper3.html").read_text()
    assert "test R²" not in (out / "tables" / "paper3.html").read_text()
    md = (out / "summary.md").read_text()
    assert md.count("## ") == 5 and "OP per target" in md      # trust, 3 studies, runtime


def test_every_report_caption_exists() -> None:
    """`snakemake --report` stops at the first output whose caption file is missing."""
    root = Path(__file__).resolve().parents[2]
    rules = [*(root / "workflow" / "rules").rglob("*.smk"), root / "Snakefile"]
    captions = {c for f in rules for c in re.findall(
        r'figure\(\s*f?"[^"]*",\s*"([a-z_0-9]+)"', f.read_text(), re.S)}
    assert len(captions) > 10
    missing = sorted(c for c in captions
                     if not (root / "workflow" / "report" / f"{c}.rst").is_file())
    assert not missing, missing


def test_bayes_trust_columns_are_not_doubled(results: Path) -> None:
    """table_params.csv that already carries rhat_max keeps one column of it."""
    base = results / "bayes" / "two_mass"
    params = pd.read_csv(base / "table_params.csv").assign(rhat_max=[1.003, 1.4])
    params.to_csv(base / "table_params.csv", index=False)
    table = next(b.df for b in sec.paper3_section(results, ["two_mass"])
                 if isinstance(b, sec.Table) and "parameters" in b.title)
    assert list(table["rhat_max"]) == [1.003, 1.4]
    assert "rhat_max_x" not in table and list(table["ess_bulk_min"]) == [812.0, 9.0]
