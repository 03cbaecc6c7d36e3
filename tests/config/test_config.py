"""Config validation: schema errors name the key path; defaults are filled."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simcalib.config import load_config, validate_config
from simcalib.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
BASE = {
    "seed": 1,
    "studies": {
        "rb": {
            "simulator": {"type": "rosenbrock"},
            "parameters": {"x": {"lower": -2, "upper": 2}, "y": {"lower": -1, "upper": 3}},
            "design": {"n": 16},
            "targets": {"n": 2},
        }
    },
}


def cfg(**patch: object) -> dict:
    c = copy.deepcopy(BASE)
    study = c["studies"]["rb"]
    for dotted, value in patch.items():
        node = study
        *parents, last = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return c


def test_defaults_filled() -> None:
    c = validate_config(cfg())
    d = c["studies"]["rb"]["design"]
    assert d["method"] == "sobol" and d["chunk_size"] == 256 and d["per_level"] is True
    assert c["studies"]["rb"]["contexts"] == {} and c["threads"] == 2


@pytest.mark.parametrize(
    ("patch", "path", "words"),
    [
        ({"desing": {"n": 3}}, "studies.rb.desing", "did you mean 'design'"),
        ({"design__n": "many"}, "studies.rb.design.n", "not of type"),
        ({"design__method": "halton"}, "studies.rb.design.method", "allowed values"),
        ({"simulator__type": "flute"}, "studies.rb.simulator.type", "unknown simulator"),
        ({"parameters__x": {"lower": 3, "upper": 2}}, "studies.rb.parameters.x", "must be <"),
        ({"simulator__options": {"nosie_sd": 1}}, "studies.rb.simulator.options.nosie_sd",
         "did you mean 'noise_sd'"),
        ({"constraints": ["x + z <= 1"]}, "studies.rb.constraints[0]", "unknown input"),
    ],
)
def test_bad_config_names_key_path(patch: dict, path: str, words: str) -> None:
    c = cfg(**patch)
    with pytest.raises(ConfigError) as err:
        validate_config(c)
    assert err.value.path == path, str(err.value)
    assert words in str(err.value)


def test_shipped_configs_validate() -> None:
    for name in ("config/config.yaml", "tests/configs/tiny.yaml"):
        c = load_config(REPO / name)
        assert {"epidemic", "rosenbrock"} <= set(c["studies"])
    paper = REPO / "config" / "paper.yaml"
    if paper.exists():
        assert load_config(paper)["studies"]


def test_snakemake_fails_before_any_job_on_bad_config(tmp_path: Path) -> None:
    bad = cfg(design__n=0)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
         "--configfile", str(path), "--cores", "1", "-n"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "studies.rb.design.n" in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


def test_semantic_checks_run_in_module_order_whatever_was_imported_first() -> None:
    """A study's own keys are checked before the plan-wide caps built on them, even in a
    process that imported the cap's module first (a full test run does): a huge
    ``targets.n`` is blamed on ``targets.n``, not on the calibration-job count."""
    code = (
        "import simcalib.metamodel.plan, yaml\n"
        "from simcalib.config import validate_config\n"
        "from simcalib.errors import ConfigError\n"
        f"cfg = yaml.safe_load(open({str(REPO / 'tests' / 'configs' / 'tiny.yaml')!r}))\n"
        "study = next(iter(cfg['studies'].values()))\n"
        "study['targets']['n'] = 10**9\n"
        "try:\n"
        "    validate_config(cfg)\n"
        "except ConfigError as e:\n"
        "    print(e.path)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.stdout.strip().endswith(".targets.n"), out.stdout + out.stderr[-2000:]
