"""Bad inputs, round two (issue 27): names that cannot collide, strict CSVs,
checksummed model files.  Every case used to pass validation and then crash the first
job, write a wrong file, or read shifted values; each must now be an error that names
the key (config) or the file and line (data).  The base config is the one of
``test_bad_configs.py``."""

from __future__ import annotations

from typing import Any

import pytest
from test_bad_configs import _patched

from simcalib.config import validate_config
from simcalib.errors import ConfigError
from simcalib.study.model import Study

RB = "studies.rb"
OSC = "studies.osc"
PAR = {"lower": 0.0, "upper": 1.0}
OMAP = f"{OSC}.simulator.options.output_map"

# (id, {dotted.path: value}, the key path the message must name)
NAME_CASES: list[tuple[str, dict[str, Any], str]] = [
    *((f"param-{n}", {f"{RB}.parameters.{n}": PAR}, f"{RB}.parameters.{n}")
      for n in ("status", "run_id", "target_id", "message", "seed", "error", "strategy")),
    *((f"context-{n}", {f"{RB}.contexts.{n}": {"values": [1.0]}}, f"{RB}.contexts.{n}")
      for n in ("status", "target_id", "message", "predicted_error", "seconds")),
    ("param-semicolon", {f"{RB}.parameters.x;touch /tmp/p": PAR},
     f"{RB}.parameters.x;touch /tmp/p"),
    ("param-space", {f"{RB}.parameters.x y": PAR}, f"{RB}.parameters.x y"),
    ("param-comma", {f"{RB}.parameters.x,y": PAR}, f"{RB}.parameters.x,y"),
    ("param-leading-digit", {f"{RB}.parameters.1x": PAR}, f"{RB}.parameters.1x"),
    ("param-dash", {f"{RB}.parameters.x-y": PAR}, f"{RB}.parameters.x-y"),
    ("param-brace", {f"{RB}.parameters.x{{y}}": PAR}, f"{RB}.parameters.x{{y}}"),
    ("context-quote", {f"{RB}.contexts.a'b": {"values": [1.0]}}, f"{RB}.contexts.a'b"),
    ("context-unicode", {f"{RB}.contexts.ä": {"values": [1.0]}}, f"{RB}.contexts.ä"),
    ("context-true-prefix", {f"{RB}.contexts.true_x": {"values": [1.0]}},
     f"{RB}.contexts.true_x"),
    ("context-x-prefix", {f"{RB}.contexts.x_y": {"values": [1.0]}}, f"{RB}.contexts.x_y"),
    ("derived-reserved", {f"{RB}.simulator.derived_outputs": {"status": "y"}},
     f"{RB}.simulator.derived_outputs.status"),
    ("derived-space", {f"{RB}.simulator.derived_outputs": {"y y": "y"}},
     f"{RB}.simulator.derived_outputs.y y"),
    ("output-listed-twice", {f"{OSC}.outputs": ["peak_time", "peak_time"]},
     f"{OSC}.outputs[1]"),
    ("output-target-id", {OMAP: {"Peak displacement": "target_id", "Peak time": "peak_time"},
                          f"{OSC}.outputs": ["target_id", "peak_time"]}, f"{OSC}.outputs[0]"),
    ("output-status-default", {OMAP: {"Peak displacement": "status", "Peak time": "peak_time"},
                               f"{OSC}.simulator.options.outputs": ["status", "peak_time"],
                               f"{OSC}.outputs": None}, f"{OSC}.simulator"),
    ("output-dash", {OMAP: {"Peak displacement": "peak-d", "Peak time": "peak_time"},
                     f"{OSC}.outputs": ["peak-d", "peak_time"]}, f"{OSC}.outputs[0]"),
    ("output-mapped-twice", {OMAP: {"Peak displacement": "peak_time", "Peak time": "peak_time"},
                             f"{OSC}.simulator.options.outputs": ["peak_time", "peak_time"],
                             f"{OSC}.outputs": None}, f"{OSC}.simulator.options.outputs"),
    ("output-sd-suffix", {OMAP: {"Peak displacement": "peak_time_sd", "Peak time": "peak_time"},
                          f"{OSC}.outputs": ["peak_time", "peak_time_sd"]}, f"{OSC}.outputs[1]"),
    ("param-is-output", {f"{OSC}.parameters.peak_time": PAR}, f"{OSC}.outputs[1]"),
    ("context-is-output", {f"{OSC}.contexts": {"peak_time": {"values": [1.0]}}},
     f"{OSC}.outputs[1]"),
    *((f"study-{n}", {f"studies.{n}": _patched({})["studies"]["rb"]}, f"studies.{n}")
      for n in ("logs", "benchmarks", "bayes", "report", "multisource")),
]


def _apply(patch: dict[str, Any]) -> dict[str, Any]:
    cfg = _patched({k: v for k, v in patch.items() if v is not None})
    for dotted, value in patch.items():  # None removes the key (outputs: all the simulator's)
        if value is None:
            head, _, last = dotted.rpartition(".")
            node = cfg
            for part in head.split("."):
                node = node[part]
            node.pop(last, None)
    return cfg


@pytest.mark.parametrize(("patch", "path"), [c[1:] for c in NAME_CASES],
                         ids=[c[0] for c in NAME_CASES])
def test_bad_name_is_a_keyed_error(patch: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(_apply(patch))
    assert err.value.path == path, str(err.value)
    assert f"'{path}'" in str(err.value)


def test_python_api_checks_names_too() -> None:
    """``Study(...)`` from Python refuses the same names as a config file."""
    base = {"simulator": {"type": "rosenbrock"}, "parameters": {"x": PAR, "y": PAR}}
    assert Study("s", base).input_names == ["x", "y"]
    with pytest.raises(ConfigError, match=r"studies\.s\.parameters\.status.*reserved"):
        Study("s", {**base, "parameters": {"x": PAR, "status": PAR}})
    with pytest.raises(ConfigError, match=r"studies\.s\.outputs\[1\].*listed twice"):
        Study("s", {**base, "outputs": ["y", "y"]})
