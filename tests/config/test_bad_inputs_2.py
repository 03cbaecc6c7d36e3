"""Bad inputs, round two (issue 27): names that cannot collide, strict CSVs,
checksummed model files.  Every case used to pass validation and then crash the first
job, write a wrong file, or read shifted values; each must now be an error that names
the key (config) or the file and line (data).  The base config is the one of
``test_bad_configs.py``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from simcalib import io
from simcalib.bayes.data import read_obs
from simcalib.bayes.models import build_setting
from simcalib.config import validate_config
from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.failure import FailureModel, load_failure, save_failure
from simcalib.metamodel.model import Metamodel, build_net
from simcalib.simulators import command_build
from simcalib.simulators.base import finalize
from simcalib.simulators.command_parse import (
    OutputParseError,
    extract,
    parse_csv,
    parse_output,
)
from simcalib.study.merge import read_chunk
from simcalib.study.model import Study
from simcalib.study.observations import read_observations
from simcalib.study.simulation import run_chunk
from tests.fixtures.configs import _patched

RB = "studies.rb"
OSC = "studies.osc"
PAR = {"lower": 0.0, "upper": 1.0}
OMAP = f"{OSC}.simulator.options.output_map"

# (id, {dotted.path: value}, the key path the message must name)
NAME_CASES: list[tuple[str, dict[str, Any], str]] = [
    *((f"param-{n}", {f"{RB}.parameters.{n}": PAR}, f"{RB}.parameters.{n}")
      for n in ("status", "run_id", "target_id", "message", "seed", "error", "strategy",
                "phase", "budget", "proximity", "history", "runs", "pair")),
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
    ("context-sd-prefix", {f"{RB}.contexts.sd_x": {"values": [1.0]}}, f"{RB}.contexts.sd_x"),
    ("context-anchor-prefix", {f"{RB}.contexts.anchor_y": {"values": [1.0]}},
     f"{RB}.contexts.anchor_y"),
    ("context-target-prefix", {f"{OSC}.contexts": {"target_peak_time": {"values": [1.0]}}},
     f"{OSC}.contexts.target_peak_time"),
    ("context-sim-prefix", {f"{OSC}.contexts": {"sim_peak_time": {"values": [1.0]}}},
     f"{OSC}.contexts.sim_peak_time"),
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


# ---- strict CSVs: (id, text, the line the message must name or None, what it says)
RAGGED = [
    ("extra-field-first-row", "q,a\n1,2,3\n4,5,6\n", 2, "3 fields, the header has 2"),
    ("extra-field-middle", "q,a\n1,2\n4,5,6\n7,8\n", 3, "3 fields"),
    ("missing-field", "q,a\n1,2\n4\n", 3, "1 fields"),
    ("trailing-comma", "q,a\n1,2,\n", 2, "3 fields"),
    ("leading-index", ",q,a\n0,1,2\n", 1, "no name"),
    ("duplicate-header", "q,q\n1,2\n", 1, "more than once"),
    ("quoted-extra", 'q,a\n1,"2,3",4\n', 2, "3 fields"),
]


@pytest.mark.parametrize(("text", "line", "says"), [c[1:] for c in RAGGED],
                         ids=[c[0] for c in RAGGED])
def test_ragged_observations_are_errors_naming_file_and_line(tmp_path: Path, text: str,
                                                             line: int, says: str) -> None:
    f = tmp_path / "obs.csv"
    f.write_text(text)
    with pytest.raises(DataError) as err:
        read_observations(f, ["q"], ["a"], ["x"], "studies.s.targets.file")
    assert str(f) in str(err.value) and f"line {line}" in str(err.value), str(err.value)
    assert says in str(err.value)


@pytest.mark.parametrize(("text", "line", "says"), [c[1:] for c in RAGGED],
                         ids=[c[0] for c in RAGGED])
def test_ragged_bayes_data_are_errors_naming_file_and_line(tmp_path: Path, text: str,
                                                           line: int, says: str) -> None:
    f = tmp_path / "d.csv"
    f.write_text(text.replace("q,", "time,", 1).replace("q\n", "time\n"))
    with pytest.raises(DataError) as err:
        read_obs(f)
    assert str(f) in str(err.value) and f"line {line}" in str(err.value), str(err.value)


def test_well_formed_csv_still_reads(tmp_path: Path) -> None:
    """Blank lines and quoted commas are fine; the strictness costs no valid file."""
    f = tmp_path / "obs.csv"
    f.write_text('q,a\n1.5,2\n\n"2.5",3\n')
    df = read_observations(f, ["q"], ["a"], ["x"])
    assert df["q"].tolist() == [1.5, 2.5] and df["a"].tolist() == [2.0, 3.0]


def test_ragged_chunk_names_the_line_and_the_fix(tmp_path: Path) -> None:
    f = tmp_path / "chunk_0.csv"
    f.write_text("run_id,x,q,status,message\n0,1,2,ok,\n1,1,2,3,ok,\n")
    with pytest.raises(DataError, match=r"line 3: 6 fields.*rerunning this chunk"):
        read_chunk(f)


@pytest.mark.parametrize(("text", "match"), [
    ("t,q\n0,1\n1,2,3\n2,3\n", "CSV line 3 has 3 fields"),  # a ragged row before the last
    ("t,q,q\n0,1,2\n", r"column\(s\) \['q'\] appear more than once"),
])
def test_simulator_csv_output_is_strict(text: str, match: str) -> None:
    with pytest.raises(OutputParseError, match=match):
        parse_csv(text)
    assert parse_csv("t,q\n0,1\n1,2\n") == {"t": "1", "q": "2"}


# ---- checksummed model files
def _tiny_metamodel() -> Metamodel:
    torch.manual_seed(0)
    net = build_net(2, [3], 1)
    return Metamodel(net, ["x", "y"], ["q"], np.array([0.5, 1.0]), np.array([2.0, 3.0]),
                     np.array([0.1]), np.array([4.0]), {"study": "s"})


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def test_metamodel_round_trip_is_checked_and_exact(tmp_path: Path) -> None:
    mm = _tiny_metamodel()
    mm.save(tmp_path)
    meta = json.loads((tmp_path / "metamodel.json").read_text())
    assert len(meta["model_sha256"]) == 64 and len(meta["meta_sha256"]) == 64
    back = Metamodel.load(tmp_path)
    X = np.array([[0.1, 0.2], [1.5, -2.0]])
    assert np.array_equal(back.predict(X), mm.predict(X))
    assert "model_sha256" not in back.info


def test_flipped_byte_in_model_pt_is_detected(tmp_path: Path) -> None:
    """One flipped bit in the weights used to load silently and change OP's answer."""
    _tiny_metamodel().save(tmp_path)
    pt = tmp_path / "model.pt"
    _flip(pt, pt.stat().st_size // 2)
    with pytest.raises(DataError, match=r"model\.pt: checksum mismatch.*delete .*rerun"):
        Metamodel.load(tmp_path)


def test_edited_scaling_in_metamodel_json_is_detected(tmp_path: Path) -> None:
    _tiny_metamodel().save(tmp_path)
    mj = tmp_path / "metamodel.json"
    meta = json.loads(mj.read_text())
    meta["y_std"] = [4.5]  # a valid JSON number, a different model
    mj.write_text(json.dumps(meta))
    with pytest.raises(DataError, match=r"metamodel\.json: checksum mismatch.*mm_train"):
        Metamodel.load(tmp_path)


def test_damaged_failure_classifier_is_detected(tmp_path: Path) -> None:
    net = build_net(2, [2], 1)
    fm = FailureModel(net, ["x", "y"], np.zeros(2), np.ones(2), 0.5, {"accuracy": 0.9})
    path = save_failure(fm, tmp_path)
    assert load_failure(tmp_path) is not None
    d = json.loads(path.read_text())
    d["threshold"] = 0.05
    path.write_text(json.dumps(d))
    with pytest.raises(DataError, match=r"failure\.json: checksum mismatch"):
        load_failure(tmp_path)


# ---- silent coercions and scale typos (config)
MORE_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("integer-log", {f"{RB}.parameters.n": {"lower": 1, "upper": 100, "integer": True,
                                             "log": True}}, f"{RB}.parameters.n.log"),
    ("million-chunks", {f"{RB}.design.n": 250_000, f"{RB}.design.chunk_size": 1},
     f"{RB}.design.chunk_size"),
    ("max-chunks-zero", {"max_chunks": 0}, "max_chunks"),
    ("max-chunks-string", {"max_chunks": "many"}, "max_chunks"),
    ("chunk-cap-lowered", {"max_chunks": 1, f"{RB}.design.chunk_size": 4},
     f"{RB}.design.chunk_size"),
]


@pytest.mark.parametrize(("patch", "path"), [c[1:] for c in MORE_CASES],
                         ids=[c[0] for c in MORE_CASES])
def test_coercions_and_scale_typos_are_keyed_errors(patch: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(_apply(patch))
    assert err.value.path == path, str(err.value)


def test_chunk_cap_names_the_size_that_fits() -> None:
    with pytest.raises(ConfigError, match=r"1000000 design runs in chunks of 1 make 1000000 "
                       r"simulation jobs.*raise chunk_size to at least 500"):
        validate_config(_apply({f"{RB}.design.n": 250_000, f"{RB}.design.chunk_size": 1}))
    cfg = validate_config(_apply({f"{RB}.design.n": 250_000, f"{RB}.design.chunk_size": 500}))
    assert cfg["max_chunks"] == 2000


# ---- simulator output: duplicate keys, non-numeric values, missing columns
@pytest.mark.parametrize(("text", "parser", "key", "match"), [
    ("a: 1\nb: 2\na: 3\n", "keyvalue", "a", r"'a' is written 2 times.*lines \[1, 3\]"),
    ("by_age: 1 2\nby_age: 3 4\n", "keyvalue", "by_age[1]", r"'by_age' is written 2 times"),
    ('{"a": 1, "a": 2}', "json", "a", r"'a' appears twice in one JSON object"),
])
def test_duplicate_output_keys_are_errors(text: str, parser: str, key: str, match: str) -> None:
    with pytest.raises(OutputParseError, match=match):
        extract(parse_output(text, parser), key)


def test_repeated_identical_key_and_other_keys_still_read() -> None:
    data = parse_output("a: 1\nb: 2\na: 1\nc: 5\nc: 6\n", "keyvalue")
    assert extract(data, "a") == 1.0 and extract(data, "b") == 2.0


@pytest.mark.parametrize(("result", "status", "message"), [
    ({"q": ["1.5"]}, "ok", ""),  # numeric strings are numbers (documented)
    ({"q": ["abc"]}, "nan_output", "non-numeric output(s): q='abc'"),
    ({"q": [float("inf")]}, "nan_output", "non-finite output(s): ['q']"),
    ({"qq": [1.0]}, "missing_output",
     "missing output(s) ['q'] (the simulator returned columns ['qq']; did you mean 'qq' for 'q'?)"),
    ({"status": ["error"], "message": ["boom"]}, "error", "boom"),  # a failure keeps its words
])
def test_simulator_results_say_what_is_wrong(result: dict[str, Any], status: str,
                                             message: str) -> None:
    out = finalize(pd.DataFrame(result, index=[0]), ["q"], pd.Index([0]))
    assert out["status"].iloc[0] == status and out["message"].iloc[0] == message
    if status == "ok":
        assert out["q"].iloc[0] == 1.5


# ---- process containment
def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="Linux /proc only")
def test_daemonised_children_do_not_outlive_the_run(tmp_path: Path) -> None:
    """A program whose children start a new session (setsid; a daemon's double fork)
    escapes the run's process group; they used to keep running after the job."""
    pidfile = tmp_path / "pids"
    prog = tmp_path / "daemonise.sh"
    prog.write_text(f"""setsid sleep 60 &
echo $! >> {pidfile}
( setsid sh -c 'echo $$ >> {pidfile}; exec sleep 61' & )
sleep 0.2
echo 'y: 1'
""")
    sim = command_build.build({"command": ["/bin/sh", str(prog)], "output_file": "-",
                               "outputs": ["y"], "workdir": str(tmp_path / "w"),
                               "writable": [str(tmp_path)],
                               "timeout": 30}, {"parameters": {"x": {}}}, "k")
    res = sim.run(pd.DataFrame({"x": [1.0]}), np.arange(1), threads=1)
    assert res["status"].tolist() == ["ok"], res["message"].tolist()
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2, "the program did not start its detached children"
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), [p for p in pids if _alive(p)]


@pytest.mark.parametrize(("path", "says"), [("/no/such/dir", "does not exist"),
                                            (__file__, "is not a directory")])
def test_python_simulator_path_is_checked(path: str, says: str) -> None:
    """A wrong ``path`` used to be reported only as "cannot import module"."""
    cfg = _apply({f"{RB}.simulator": {"type": "python", "options": {
        "function": "mysim:run", "path": path, "outputs": ["y"]}}})
    with pytest.raises(ConfigError, match=says) as err:
        validate_config(cfg)
    assert err.value.path == f"{RB}.simulator.options.path"


def test_aborting_simulator_leaves_a_log_naming_the_run(tmp_path: Path) -> None:
    """A python simulator that aborts kills the job's interpreter; the job log used to
    be empty.  Now it holds the traceback and the run that was in flight."""
    (tmp_path / "abort_sim.py").write_text("import os\n\ndef run(df, seeds=None):\n"
                                           "    os.abort()\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"seed": 1, "studies": {"ab": {
        "simulator": {"type": "python", "options": {"function": "abort_sim:run",
                                                    "path": str(tmp_path), "outputs": ["q"]}},
        "parameters": {"x": {"lower": 0, "upper": 1}}, "design": {"n": 2, "chunk_size": 2},
        "targets": {"n": 1}}}}))
    design = tmp_path / "d.csv"
    pd.DataFrame({"run_id": [7, 8], "x": [0.2, 0.4]}).to_csv(design, index=False)
    proc = subprocess.run([sys.executable, "-m", "simcalib", "sim-run", "--study", "ab",
                           "--config", str(cfg), "--design", str(design), "--chunk", "0",
                           "--output", str(tmp_path / "c.csv"), "--no-journal"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Fatal Python error: Aborted" in proc.stderr
    assert "in_flight_run_id_7" in proc.stderr and "abort_sim.py" in proc.stderr


def _picky(inputs: pd.DataFrame) -> pd.DataFrame:
    """Omits its output for x < 0.5 (as a program whose input made it skip a key)."""
    x = float(inputs["x"].iloc[0])
    return pd.DataFrame({"q": [x]} if x >= 0.5 else {"other": [x]}, index=inputs.index)


@pytest.mark.parametrize(("xs", "stops"), [([0.1, 0.9, 0.8], False), ([0.1, 0.2, 0.8], True)])
def test_probe_tells_input_dependent_failures_from_wrong_settings(
        xs: list[float], stops: bool, caplog: pytest.LogCaptureFixture) -> None:
    """A fail-fast probe used to blame the config when the *input* made the program
    omit an output; a second probe run now tells the two apart."""
    study = Study("p", {"simulator": {"type": "python", "options": {
        "function": _picky, "outputs": ["q"]}}, "parameters": {"x": PAR}})
    rows = pd.DataFrame({"run_id": [0, 1, 2], "x": xs})
    if stops:
        with pytest.raises(DataError, match=r"run_id 0\) failed with missing_output.*"
                           r"the second \(run_id 1\) failed too.*output settings"):
            run_chunk(study, rows, 3)
        return
    with caplog.at_level("WARNING", logger="simcalib.study.simulation"):
        out, _ = run_chunk(study, rows, 3)
    assert out["status"].tolist() == ["missing_output", "ok", "ok"]
    assert "depends on the input" in caplog.text


@pytest.mark.parametrize(("text", "line", "says"), [c[1:] for c in RAGGED],
                         ids=[c[0] for c in RAGGED])
def test_every_checked_csv_read_is_strict(tmp_path: Path, text: str, line: int,
                                          says: str) -> None:
    """``io.read_csv`` (targets, datasets, multisource data, summaries) is strict too."""
    f = tmp_path / "t.csv"
    f.write_text(text)
    with pytest.raises(DataError) as err:
        io.read_csv(f)
    assert str(f) in str(err.value) and f"line {line}" in str(err.value), str(err.value)


def test_missing_model_pt_with_a_recorded_checksum_names_the_rerun(tmp_path: Path) -> None:
    _tiny_metamodel().save(tmp_path)
    (tmp_path / "model.pt").unlink()
    with pytest.raises(DataError, match=r"model\.pt: file not found; delete .*mm_train"):
        Metamodel.load(tmp_path)


def test_observed_state_left_out_of_bayes_data_is_mentioned(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A setting that declares ``x`` observed, given data with only ``one``, used to
    fit to ``one`` without a word."""
    (tmp_path / "twostate.py").write_text(
        "from simcalib.bayes import ODEModel, Setting\n\n"
        "def setting():\n"
        "    model = ODEModel(lambda t, z, th, m: [-th[0] * z[0], 0 * z[1]], ['x', 'one'],\n"
        "                     ['k'], z0=[1.0, 1.0])\n"
        "    return Setting('two', model, ['x'], {'k': (0.01, 2.0)}, t_end=1.0)\n")
    pd.DataFrame({"time": [0.0, 1.0, 2.0], "one": [1.0, 1.0, 1.0]}).to_csv(
        tmp_path / "d.csv", index=False)
    with caplog.at_level("WARNING", logger="simcalib.bayes.models"):
        s = build_setting("two", {"model": "twostate:setting", "data": "d.csv"},
                          dirs=[str(tmp_path)])
    assert s.observed == ["one"]
    assert "observed state(s) ['x'] have no column" in caplog.text
