"""envs/simcalib.yaml (conda, used by every rule under
--software-deployment-method conda) lists the library's run-time packages of
pyproject.toml: not Snakemake and its plugin (Snakemake runs outside the rules'
environment) and not simcalib itself (the rules run this checkout's src/)."""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.conftest import REPO

# conda-forge names that differ from PyPI's
CONDA_TO_PYPI = {"pytorch": "torch"}
# what Snakemake itself needs, not the rules
OUTSIDE_THE_RULES = {"snakemake", "snakemake-executor-plugin-slurm"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_conda_env_matches_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_name(d) for d in project["dependencies"]} - OUTSIDE_THE_RULES
    env = yaml.safe_load((REPO / "envs" / "simcalib.yaml").read_text())
    listed: set[str] = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            listed |= {_name(d) for d in dep.get("pip", []) if not d.startswith("-")}
        else:
            listed.add(CONDA_TO_PYPI.get(_name(dep), _name(dep)))
    listed -= {"python", "pip"}
    assert listed == wanted, (f"only in envs/simcalib.yaml: {sorted(listed - wanted)}; "
                              f"only in pyproject.toml: {sorted(wanted - listed)}")


def test_no_editable_install_or_snakemake_in_the_env() -> None:
    env = (REPO / "envs" / "simcalib.yaml").read_text()
    assert "-e " not in env and "snakemake" not in env.split("dependencies:")[1]
