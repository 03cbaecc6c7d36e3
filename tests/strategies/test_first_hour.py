"""A newcomer's first hour (issue 28): an API that checks its settings, a keyvalue
parser for ``key=value`` programs whose errors show the file, and a rerun of a fixed
program that keeps no stale failed row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError, DataError
from simcalib.simulators.command_parse import describe_output, parse_keyvalue
from simcalib.study import Study
from simcalib.study.simulation import make_design, run_chunk

ROSEN = {"simulator": {"type": "rosenbrock"},
         "parameters": {"x": {"lower": 0, "upper": 2}, "y": {"lower": 0, "upper": 4}},
         "contexts": {"a": {"values": [1]}, "b": {"values": [5]}}}


# ---- the API checks like a config file --------------------------------------------------

@pytest.mark.parametrize(("extra", "bad", "good"), [
    ({"desing": {"n": 8}}, "studies.s.desing", "design"),
    ({"metamodel": {"hiden": [4]}}, "studies.s.metamodel.hiden", "hidden"),
    ({"calibration": {"budgt": 3}}, "studies.s.calibration.budgt", "budget"),
])
def test_study_rejects_unknown_keys_like_a_config_file(extra: dict, bad: str,
                                                       good: str) -> None:
    with pytest.raises(ConfigError) as err:
        Study("s", {**ROSEN, **extra})
    assert err.value.path == bad
    assert f"did you mean '{good}'" in str(err.value)


def test_unnamed_study_names_the_misspelled_key() -> None:
    with pytest.raises(ConfigError, match=r"desing.*did you mean 'design'"):
        Study({"desing": {"n": 8}})


def test_study_fills_schema_defaults_and_checks_types() -> None:
    s = Study("s", {**ROSEN, "metamodel": {"epochs": 7}})
    assert s.cfg["metamodel"]["epochs"] == 7
    assert s.cfg["metamodel"]["hidden"] == [64, 64]          # the schema's default
    assert s.cfg["calibration"]["budget"] > 0
    with pytest.raises(ConfigError, match="studies.s.metamodel.epochs"):
        Study("s", {**ROSEN, "metamodel": {"epochs": "many"}})
    with pytest.raises(ConfigError, match="studies.s.simulator"):
        Study("s", {"parameters": ROSEN["parameters"]})


def test_library_prints_nothing_to_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    """HiGHS writes a banner on stdout at its first instance; it goes to the log."""
    from simcalib.metamodel.milp.highs_threads import new_highs

    capfd.readouterr()
    new_highs()
    new_highs()
    assert capfd.readouterr().out == ""


# ---- keyvalue separator and parse errors ------------------------------------------------

def test_keyvalue_separators() -> None:
    assert parse_keyvalue("a: 1\nb : 2.5\n") == {"a": "1", "b": "2.5"}
    assert parse_keyvalue("final_temp=30.36\nx = 2\n# c=3\n", "=") == \
        {"final_temp": "30.36", "x": "2"}
    assert parse_keyvalue("peak   3.5\nlate\t7\n", "whitespace") == {"peak": "3.5", "late": "7"}
    msg = describe_output("final_temp=30.36\nmax_temp=41\nrate=2\nmore=1\n", "keyvalue", ":")
    assert "'final_temp=30.36' / 'max_temp=41' / 'rate=2' (+1 more)" in msg
    assert "expected lines 'key: value'" in msg
    assert "separator: '='" in msg                       # the fix, named


EQ_PROGRAM = """#!/bin/sh
# args: x y ; prints key=value lines (a program the default parser cannot read)
awk -v x="$1" -v y="$2" 'BEGIN { printf "final_temp=%.10g\\nrate=%.10g\\n", \\
    (x - 0.7) ^ 2 + 3 * y, x + y * y }'
"""


def _eq_study(tmp: Path, parser: object, script: str = EQ_PROGRAM) -> Study:
    prog = tmp / "eqsim.sh"
    prog.write_text(script)
    return Study("eq", {
        "simulator": {"type": "command", "options": {
            "command": ["/bin/sh", str(prog), "{x}", "{y}"], "output_file": "-",
            "parser": parser, "output_map": {"final_temp": "temp", "rate": "rate"},
            "timeout": 30}},
        "parameters": {"x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}},
        "outputs": ["temp", "rate"],
        "design": {"n": 12, "method": "uniform"}})


def test_default_parser_error_shows_the_file_and_the_separator(tmp_path: Path) -> None:
    study = _eq_study(tmp_path, "keyvalue")
    with pytest.raises(DataError) as err:
        run_chunk(study, make_design(study, 1).head(3), 1)
    text = str(err.value)
    assert "'final_temp=" in text and "expected lines 'key: value'" in text
    assert "separator: '='" in text


def test_key_equals_value_program_calibrates(tmp_path: Path) -> None:
    """separator '=' reads the program; the metamodel and a strategy run on it."""
    from simcalib.metamodel.strategies import calibrate
    from simcalib.metamodel.training import train_metamodel

    study = _eq_study(tmp_path, {"type": "keyvalue", "separator": "="})
    data, summary = run_chunk(study, make_design(study, 1), 1, threads=2)
    assert summary["ok"] == 12
    np.testing.assert_allclose(data["temp"], (data["x"] - 0.7) ** 2 + 3 * data["y"],
                               rtol=1e-8)
    mm, _ = train_metamodel(data, study.input_names, study.outputs,
                            {"hidden": [4], "epochs": 5, "threads": 1}, 1, "eq")
    x, y = 0.4, 0.5
    targets = pd.DataFrame({"target_id": [0], "temp": [(x - 0.7) ** 2 + 3 * y],
                            "rate": [x + y * y], "status": ["ok"]})
    records, runs = calibrate(study, mm, targets, "rs", {"budget": 6}, {}, 1)
    assert (runs["status"] == "ok").all() and len(runs) == 6
    assert np.isfinite(records["error"]).all()
    assert records["error"].iloc[0] == runs["error"].min()


BROKEN = """#!/bin/sh
echo "final_temp: $1"
"""


def test_fixed_program_rerun_has_no_stale_failed_row(tmp_path: Path) -> None:
    """The fail-fast probe's parse_error is not journaled, and an edited program
    invalidates the journal: the rerun holds only the fixed program's rows."""
    study = _eq_study(tmp_path, {"type": "keyvalue", "separator": "="}, BROKEN)
    rows = make_design(study, 1)
    journal = tmp_path / "chunk.jsonl"
    with pytest.raises(DataError, match="parse_error"):
        run_chunk(study, rows, 1, journal=journal)
    assert len(journal.read_text().splitlines()) == 1          # the header only

    # a half-fixed program: some runs fail (not the first), then the user fixes it
    half = EQ_PROGRAM.replace('awk', 'case "$1" in 0.0*|0.1*) echo oops; exit 0;; esac\nawk')
    study = _eq_study(tmp_path, {"type": "keyvalue", "separator": "="}, half)
    first = rows[~rows["x"].between(0.0, 0.2)].index[0]
    rows = pd.concat([rows.loc[[first]], rows.drop(first)])
    data, _ = run_chunk(study, rows, 1, journal=journal)
    assert (data["status"] == "parse_error").any() and (data["status"] == "ok").any()

    study = _eq_study(tmp_path, {"type": "keyvalue", "separator": "="})
    data, summary = run_chunk(study, rows, 1, journal=journal)
    assert summary["resumed"] == 0                             # the journal is stale
    assert (data["status"] == "ok").all()


def test_fingerprint_hashes_scripts_not_files_the_runs_write(tmp_path: Path) -> None:
    """A literal data-file argument (a log or counter the runs append to) must not
    invalidate the journal on resume; the script argument must."""
    from simcalib.study.journal import program_digest

    prog = tmp_path / "eqsim.sh"
    prog.write_text(EQ_PROGRAM)
    log = tmp_path / "runs.log"
    log.write_text("")
    study = Study("eq", {
        "simulator": {"type": "command", "options": {
            "command": ["/bin/sh", str(prog), "{x}", "{y}", str(log)], "output_file": "-",
            "parser": {"type": "keyvalue", "separator": "="},
            "output_map": {"final_temp": "temp", "rate": "rate"}, "timeout": 30}},
        "parameters": {"x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}},
        "outputs": ["temp", "rate"], "design": {"n": 4, "method": "uniform"}})
    sim = study.simulator
    before = program_digest(sim)
    log.write_text("0\n1\n")                       # the runs wrote to it
    assert program_digest(sim) == before
    prog.write_text(EQ_PROGRAM + "# fixed\n")      # the user edited the program
    assert program_digest(sim) != before


# ---- every trust flag in the result files, on the console and on the first page --------

FLAGGED = {
    "seed": 7, "threads": 1,
    "studies": {"bad": {
        "simulator": {"type": "rosenbrock"},
        "parameters": {"x": {"lower": -2, "upper": 2}, "y": {"lower": -1, "upper": 3}},
        "contexts": {"a": {"values": [1]}, "b": {"values": [100]}},
        "design": {"method": "sobol", "n": 64, "chunk_size": 64},
        "targets": {"n": 2},
        # one epoch: a metamodel far below min_r2
        "metamodel": {"hidden": [32, 32], "epochs": 1, "patience": 1, "batch_size": 64},
        "optimize": {"solver": "tiny"},
        "calibration": {"enabled": True, "strategies": ["op"], "budget": 2, "solver": "tiny"}}},
    # a millisecond for 64 ReLUs' MILP, no bound tightening: never proven optimal
    "solvers": {"tiny": {"backend": "highs", "time_limit": 0.001, "threads": 1,
                         "obbt": {"enabled": False}, "warm_start": {"samples": 100, "local": 0}}},
    # 200 iterations of 2 chains: never converged
    "bayes": {"settings": ["two_mass"], "methods": ["koh"], "replications": 1,
              "predict_draws": 20,
              "sampler": {"iterations": 200, "burn_in": 100, "chains": 2, "adapt_every": 50,
                          "ls_starts": 2, "log_every": 100}},
    "multisource": {"analytic": {"enabled": False}, "hardening": {"enabled": False}},
}


@pytest.mark.slow
def test_every_flag_reaches_files_console_and_first_page(tmp_path: Path) -> None:
    """A bad metamodel, an unproven MILP and an unconverged chain, run by Snakemake
    (about 30 s of workflow time on 2 busy cores)."""
    import json

    import yaml

    from simcalib.metamodel import trust
    from tests.conftest import run_snakemake

    cfg = tmp_path / "flagged.yaml"
    cfg.write_text(yaml.safe_dump(FLAGGED))
    proc = run_snakemake(tmp_path, configfile=cfg, timeout=600)
    res = tmp_path / "results"
    # 1. the result files carry the three flags
    info = json.loads((res / "bad" / "metamodel" / "metamodel.json").read_text())
    assert trust.judge(info).weak_outputs == ["f"]
    op = pd.read_csv(res / "bad" / "op" / "op.csv")
    assert (op["status"] != "optimal").all()
    summ = pd.read_csv(res / "bad" / "calibration" / "summary.csv")
    assert not summ["metamodel_ok"].any() and (summ["op_unproven"] > 0).all()
    chains = pd.read_csv(next((res / "bayes" / "two_mass" / "koh").rglob("summary.csv")))
    assert not chains["converged"].astype(bool).all()
    # 2. the console block names each, with the file to open, and counts them
    console = (proc.stderr + proc.stdout).splitlines()
    flags = [ln for ln in console if ln.startswith("FLAG ")]
    for what in ("bad: metamodel:", "bad: MILP not proven optimal:",
                 "Bayes two_mass: KOH chains NOT CONVERGED:"):
        assert any(ln.startswith(f"FLAG {what}") for ln in flags), what
    assert [ln for ln in console if ln.endswith("flagged")][-1] == \
        f"{len(flags)} results flagged"
    # 3. the read-me-first page shows the same flags in red boxes, before the answers
    page = (res / "report" / "summary.html").read_text()
    top = page[:page.index('<h2 id="metamodel-calibration')]
    assert top.count('<p class="flag"><strong>FLAG</strong>') == len(flags)
    for what in ("metamodel", "MILP not proven optimal", "KOH chains NOT CONVERGED"):
        assert f"<strong>{what}</strong>" in top, what
    assert '<p class="flag"><strong>NOT CONVERGED:</strong> KOH chains' in page
    assert "Calibrated inputs per target: op (recommended)" in page
