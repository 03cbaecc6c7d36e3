"""The README's first command, `snakemake --cores 2 --configfile config/quick.yaml`,
runs end to end in a fresh directory: one study per method, the report, and the
console's trust block (the quick Bayes chains are short, so one flag is expected
wherever the chains fall short)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, run_snakemake

QUICK = REPO / "config" / "quick.yaml"


@pytest.mark.slow
def test_quick_config_runs_every_method_and_the_report(tmp_path: Path) -> None:
    proc = run_snakemake(tmp_path, configfile=QUICK, timeout=900)
    res = tmp_path / "results"
    summary = pd.read_csv(res / "oscillator_obs" / "calibration" / "summary.csv")
    assert {"rs", "op"} <= set(summary["strategy"])
    assert summary["mean_error"].notna().all()
    # OP on a trusted metamodel beats random search on the user's data
    mean = summary.set_index("strategy")["mean_error"]
    assert mean["op"] < mean["rs"]
    assert (res / "report" / "summary.html").stat().st_size > 1000
    assert any((res / "bayes").rglob("table_params.csv"))
    assert any((res / "multisource").rglob("fig2_posteriors.csv"))
    console = proc.stderr + proc.stdout
    flagged = [line for line in console.splitlines() if line.startswith("FLAG ")]
    last = [line for line in console.splitlines() if "flagged" in line][-1]
    assert last.strip() == (f"{len(flagged)} result{'s' if len(flagged) != 1 else ''} flagged"
                            if flagged else "no result flagged")
    # the end block gives the answer and a report command that works as printed
    assert "The answer (per study: the recommended strategy's inputs per target):" in console
    cmd_line = next(line for line in console.splitlines() if "--report" in line)
    cmd = shlex.split(re.search(r"`(snakemake [^`]+)`", cmd_line).group(1))
    assert "--configfile" in cmd
    rep = subprocess.run([sys.executable, "-m", *cmd], capture_output=True, text=True,
                         timeout=600)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert (tmp_path / "results" / "report.html").stat().st_size > 10000
