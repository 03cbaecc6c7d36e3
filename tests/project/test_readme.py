"""The README is the front door (docs/DESIGN's "Docs in four kinds"): it fits on a
few screens, shows a command early, installs and tests exactly as CI does, and its
study of "your simulator" is a config the workflow accepts.  These tests keep it so
when the code under it changes."""

from __future__ import annotations

import copy
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from simcalib.config import validate_config

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks of one language, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.S | re.M)


def commands(text: str) -> list[str]:
    """Shell commands of a script or code block: comments dropped, continuation
    lines joined, whitespace normalised."""
    text = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(" ".join(shlex.split(line, posix=False)))
    return out


def test_readme_is_short_and_shows_a_command_early() -> None:
    lines = README.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150)"
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("```"))
    assert first < 40, f"the first command block starts at line {first}"


def test_readme_tests_and_installs_as_ci_does() -> None:
    """.ci/run installs, runs the three checks, then the suite; the README's blocks
    must hold the same commands (the README may name PyTorch's CPU index)."""
    ci = [c for c in commands(CI) if not c.startswith(("set ", "cd ", "export "))]
    readme = " && ".join(c for block in blocks("bash") for c in commands(block))
    install, checks, suite = ci
    torch_pin, extras = (part.strip() for part in install.split("&&"))
    assert re.search(re.escape(torch_pin) + r"( --index-url \S+)?", readme), torch_pin
    assert extras in readme
    assert f"{checks} && {suite}" in readme, "the README's test command differs from .ci/run's"


def readme_study() -> dict:
    (study_yaml,) = blocks("yaml")
    assert len(study_yaml.splitlines()) <= 25
    return yaml.safe_load(study_yaml)


@pytest.fixture
def in_project(tmp_path: Path):
    """A folder with the README study's program and observations, as a user has."""
    program = tmp_path / "my_simulator"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    (tmp_path / "observations.csv").write_text("peak_time,total_cases\n30,1000\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


def test_readme_study_keys_are_valid(in_project: Path) -> None:
    """Every key the README shows is one the schema accepts (with a design and a
    metamodel added where today's schema still requires them)."""
    config = readme_study()
    study = config["studies"]["mymodel"]
    assert study["calibration"]["strategies"] == ["sequential"]
    study.setdefault("design", {"method": "sobol", "n": 8})
    study.setdefault("metamodel", {"enabled": True})
    validate_config(copy.deepcopy(config))


def test_readme_study_validates_as_shown(in_project: Path) -> None:
    validate_config(readme_study())
