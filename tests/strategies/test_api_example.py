"""docs/examples/api_quickstart.py (the documented Python API, docs/api.md) runs and
gets the known answer; misspelled settings from Python are errors, not ignored."""

from __future__ import annotations

import runpy
from pathlib import Path

import pandas as pd
import pytest

from simcalib.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "api_quickstart.py"


def test_quickstart_recovers_the_known_inputs() -> None:
    best = runpy.run_path(str(EXAMPLE))["main"]()
    assert abs(best["k"] - 1.2) < 0.1 and abs(best["c"] - 0.4) < 0.1, best


def test_misspelled_keywords_are_errors() -> None:
    from simcalib.metamodel.milp.optimize import solver_settings
    from simcalib.metamodel.strategies.settings import merged_settings
    from simcalib.metamodel.training import train_metamodel

    df = pd.DataFrame({"a": range(20), "y": range(20)})
    with pytest.raises(ConfigError, match=r"metamodel\.hiden.*did you mean 'hidden'"):
        train_metamodel(df, ["a"], ["y"], {"hiden": [4]}, seed=1)
    with pytest.raises(ConfigError, match=r"solver\.time_limt"):
        solver_settings({"time_limt": 5})
    with pytest.raises(ConfigError, match=r"calibration\.budgt"):
        merged_settings({"budgt": 5})
    with pytest.raises(ConfigError, match=r"calibration\.budget"):
        merged_settings({"budget": "ten"})
