"""An answer beside posterior intervals is checked (issues 40 and 41): the read-me-first
page and the console's end block say whether the recommended answer lies inside the
90 % intervals and the joint 90 % region, and why not in plain words; the console
prints the answer per target and a report command with the run's --configfile; the
trust block leaves out raw library warnings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.cli import main
from simcalib.report import agree, console, flags


def _write(path: Path, df: pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path


def _netcdf(path: Path, draws: dict[str, np.ndarray]) -> None:
    from simcalib.bayes.posterior import to_inference_data, write_netcdf

    path.parent.mkdir(parents=True, exist_ok=True)
    post = {k: v.reshape(2, -1) for k, v in draws.items()}
    lp = {"lp": np.zeros_like(next(iter(post.values())))}
    write_netcdf(to_inference_data(post, lp, {"a": np.array([1.0])}, {}, {}, {}), path)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Study s: strategy op's answers for 3 targets beside the design posterior:
    target 0 inside; target 1 outside the interval of an identified input; target 2
    inside both intervals but off the joint region of two correlated inputs."""
    res = tmp_path / "results"
    _write(res / "s" / "targets.csv", pd.DataFrame({
        "target_id": [0, 1, 2], "a": [1.0, 2.0, 3.0], "status": "ok"}))
    cal = res / "s" / "calibration"
    rec = _write(cal / "op.csv", pd.DataFrame({
        "target_id": [0, 1, 2], "strategy": "op", "status": "ok",
        "error": [0.1, 0.2, 0.3], "predicted_error": 0.1, "seconds": 0.5, "runs": 4,
        "failed_runs": 0, "op_unproven": 0,
        "x_u": [0.5, 0.95, 0.57], "x_v": [0.5, 0.5, 0.43], "target_a": [1.0, 2.0, 3.0],
        "sim_a": [1.0, 2.0, 3.0]}))
    assert main(["cal-summary", "--records", f"op={rec}", "--output",
                 str(cal / "summary.csv"), "--targets", str(res / "s" / "targets.csv"),
                 "--output-figure", str(cal / "strategies.png")]) == 0
    r = np.random.default_rng(0)
    rows = []
    for t in range(3):
        u = 0.5 + 0.05 * r.standard_normal(4000)
        v = (u if t == 2 else 0.5 + 0.05 * r.standard_normal(4000)) \
            + 0.01 * r.standard_normal(4000)
        _netcdf(cal / "posterior" / "targets" / f"target_{t}.nc", {"u": u, "v": v})
        for name, d in (("u", u), ("v", v)):
            q = np.quantile(d, [0.05, 0.5, 0.95])
            rows.append({"target_id": t, "input": name, "mean": d.mean(), "sd": d.std(),
                         "q5": q[0], "q50": q[1], "q95": q[2], "r_hat": 1.001,
                         "ess_bulk": 900.0, "converged": True, "prior_sd_ratio": 0.17,
                         "identified": True})
    _write(cal / "posterior" / "posterior_summary.csv", pd.DataFrame(rows))
    return res


def test_design_posterior_check_finds_each_case_and_words_it(results: Path) -> None:
    rec = pd.read_csv(results / "s" / "calibration" / "op.csv")
    check = agree.design_check(results, "s", rec).set_index("target_id")
    assert check.loc[0, "inside_90"] and check.loc[0, "inside_joint_90"]
    assert check.loc[0, "why_outside"] == ""
    assert not check.loc[1, "inside_90"] and check.loc[1, "outside_inputs"] == "u"
    assert "different criterion" in check.loc[1, "why_outside"]
    # inside both intervals, but u and v move together and the answer does not
    assert check.loc[2, "inside_90"] and not check.loc[2, "inside_joint_90"]
    assert check.loc[2, "why_outside"].startswith("a ridge of equal fits: u and v")
    line = agree.sentence(check.reset_index(), "the metamodel posterior")
    assert "OUTSIDE the metamodel posterior's 90 % region on 2 of 3 targets" in line


def test_page_and_console_say_the_same(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report-summary", "--results", str(results), "--studies", "s",
                 "--output", str(out / "summary.md"), "--output-runtime",
                 str(out / "rt.csv"), "--output-html", str(out / "summary.html")]) == 0
    page = (out / "summary.md").read_text()
    assert "OUTSIDE the metamodel posterior's 90 % region on 2 of 3 targets" in page
    assert "a ridge of equal fits: u and v" in page and "answer (op)" in page
    text = flags.console_summary(results, ["s"], report_cmd=console.report_command(
        ["config/quick.yaml"]))
    lines = text.splitlines()
    i = lines.index("The answer (per study: the recommended strategy's inputs per target):")
    assert lines[i + 1].startswith("  s: op (") and "metamodel posterior" in lines[i + 1]
    assert lines[i + 2].startswith("    target 0: u 0.5 [0.4")
    assert sum("OUTSIDE its 90 % region" in ln for ln in lines) == 2
    assert "a ridge of equal fits" in text


def test_sequential_posterior_answers_reach_page_and_console(results: Path,
                                                             tmp_path: Path) -> None:
    """answer.csv of cal_seq_posterior: its answer (not the records' best run) is what
    the console prints when sequential is recommended."""
    cal = results / "s" / "calibration"
    rec = pd.read_csv(cal / "op.csv").assign(strategy="sequential")
    _write(cal / "sequential.csv", rec)
    assert main(["cal-summary", "--records", f"sequential={cal / 'sequential.csv'}",
                 "--output", str(cal / "summary.csv"), "--targets",
                 str(results / "s" / "targets.csv"),
                 "--output-figure", str(cal / "strategies.png")]) == 0
    seq = cal / "sequential_posterior"
    _write(seq / "posterior_summary.csv", pd.read_csv(cal / "posterior" /
                                                      "posterior_summary.csv"))
    _write(seq / "answer.csv", pd.DataFrame({
        "target_id": [0, 1, 2], "answer_rule": "posterior median",
        "x_u": [0.51, 0.49, 0.5], "x_v": [0.5, 0.52, 0.5], "inside_90": True,
        "inside_joint_90": [True, True, False], "outside_inputs": "",
        "why_outside": ["", "", "a ridge of equal fits: u and v trade off"],
        "converged": True}))
    text = flags.console_summary(results, ["s"])
    assert "s: sequential (" in text and "sequential's posterior" in text
    assert "target 1: u 0.49 [" in text and "(posterior median)" in text
    assert sum("OUTSIDE its 90 % region" in ln for ln in text.splitlines()) == 1
    out = tmp_path / "report"
    assert main(["report-summary", "--results", str(results), "--studies", "s",
                 "--output", str(out / "summary.md"), "--output-runtime",
                 str(out / "rt.csv")]) == 0
    page = (out / "summary.md").read_text()
    assert "sequential's posterior, from its own runs" in page
    assert "OUTSIDE sequential's posterior's 90 % region on 1 of 3 targets" in page
    assert "the answer is the posterior's" in page


def test_report_command_carries_the_runs_options() -> None:
    assert console.report_command() == "snakemake --report results/report.html"
    assert console.report_command(["config/quick.yaml"]) == (
        "snakemake --report results/report.html --configfile config/quick.yaml")
    assert console.report_command(["my cfg.yaml"], "../wf/Snakefile", "run1") == (
        "snakemake -s ../wf/Snakefile -d run1 --report results/report.html "
        "--configfile 'my cfg.yaml'")


def test_trust_block_lists_simcalib_warnings_not_raw_library_ones(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text(
        "/x/bayes/batched.py:88: RuntimeWarning: overflow encountered in multiply\n"
        "  y = a * b\n"
        "2026-01-01 10:00:00,000 WARNING simcalib.x: chains of target 3 did not converge\n")
    (logs / "b.log").write_text("/x/y.py:3: RuntimeWarning: divide by zero\n")
    w = flags.log_warnings(logs)
    assert [(Path(x.file).name, x.count) for x in w] == [("a.log", 1)]
    assert w[0].first.startswith("simcalib.x: chains of target 3")
    assert flags.raw_warning_count(logs) == 2
    text = flags.console_summary(tmp_path / "results", logs=logs)
    assert "RuntimeWarning" not in text and "did not converge" in text
