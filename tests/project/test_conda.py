"""`snakemake --sdm conda` builds the DAG: no environment is injected into Snakemake
itself (a crash seen when it did not), every rule that runs a command names the
rules' environment, and Snakemake accepts it.  Conda is not installed on the test
machines, so a stand-in answers the two queries Snakemake makes while building a dry
run's DAG; creating the environment itself is not tested here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY

FAKE_CONDA = """#!/bin/sh
case "$*" in
  *--version*) echo "conda 24.7.1" ;;
  *info*) echo '{"conda_version": "24.7.1", "platform": "linux-64",'\
    '"root_prefix": "/nonexistent", "conda_prefix": "/nonexistent",'\
    '"envs_dirs": [], "pkgs_dirs": []}' ;;
  *config*) echo '{"get": {"channel_priority": "strict"}}' ;;
  *) echo "{}" ;;
esac
"""


def test_every_command_rule_names_the_rules_environment() -> None:
    for f in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        for rule in re.split(r"\n(?=rule \w+:)", f.read_text())[1:]:
            name = rule.split(":", 1)[0]
            if re.search(r"^    (shell|script):", rule, re.M):
                assert re.search(r'^    conda:\n\s+"(\.\./\.\./)?envs/simcalib\.yaml"', rule,
                                 re.M), f"{f.name}: {name} has no conda env"
    assert not re.search(r"^conda:", (REPO / "Snakefile").read_text(), re.M)


@pytest.mark.slow
def test_dry_run_with_conda_builds_the_dag(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    conda = bindir / "conda"
    conda.write_text(FAKE_CONDA)
    conda.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                           "-d", str(tmp_path / "wd"), "--configfile", str(TINY), "-n",
                           "--sdm", "conda", "--cores", "1", "--quiet", "rules"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^sim_run\s+\d+", proc.stdout, re.M), proc.stdout[-2000:]
