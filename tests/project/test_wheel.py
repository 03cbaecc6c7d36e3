"""A wheel install validates a config: the schemas (and anything else the library
reads at run time) ship inside the package, found through importlib.resources, not
through the source tree's layout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_config_validates_with_the_code_from_the_wheel(tmp_path: Path) -> None:
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(wheels)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("simcalib-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True)
    # run outside the source tree, with the wheel's copy first on the path
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(site)!r})
        import simcalib
        from simcalib.config import load_config, schema_defaults
        assert simcalib.__file__.startswith({str(site)!r}), simcalib.__file__
        cfg = load_config({str(REPO / "config" / "config.yaml")!r})
        assert cfg["studies"]["epidemic"]["calibration"]["strategies"], cfg
        assert schema_defaults("solvers.schema.yaml", "option_set",
                               {{"backend": "highs"}})["time_limit"] > 0
        print("validated with", simcalib.__file__)
    """)
    # relative paths in the config (an external simulator) resolve from the directory
    # Snakemake runs in, as in a real run; the code still comes from the wheel
    out = subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO,
                         capture_output=True, text=True)
    assert "validated with " + str(site) in out.stdout
