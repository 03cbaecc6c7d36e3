"""The ``command`` simulator adapter, driven through the example simulator in
``resources/example_simulator`` (a kicked damped oscillator with closed-form
outputs and input-triggered failure modes)."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.simulators import command, command_build
from simcalib.simulators.factory import build_simulator

ROOT = Path(__file__).resolve().parents[2]
SIM = "resources/example_simulator/oscillator.py"
KEY = "studies.osc.simulator.options"
OUTPUTS = ["peak_displacement", "peak_time", "rebound_ratio"]
FLUTE_MAP = {"Peak displacement": "peak_displacement", "Peak time": "peak_time",
             "Rebound ratio": "rebound_ratio"}
STUDY = {
    "parameters": {"mass": {"lower": 0.5, "upper": 2.0},
                   "stiffness": {"lower": 1.0, "upper": 10.0},
                   "damping": {"lower": 0.0, "upper": 3.0}},
    "contexts": {"failmode": {"values": [0, 1, 2, 3, 4, 5]}},
    "outputs": OUTPUTS,
}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths in options resolve against the workflow root (the cwd)."""
    monkeypatch.chdir(ROOT)


def lines_options(**over: object) -> dict:
    # sys.executable: a pyenv/conda shim in front of python3 costs ~0.3 s per run;
    # test_command_line_arguments_only_and_indexed_key runs the script by its shebang
    opts = {"command": [sys.executable, SIM, "--config", "{input_file}", "--output",
                        "{output_file}"],
            "input_file": {"format": "lines", "extra": {"seed": "{seed}"}},
            "output_file": "Summary0", "parser": "keyvalue", "output_map": FLUTE_MAP,
            "timeout": 20}
    opts.update(over)
    return opts


def design(n: int = 6, failmode: list[int] | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"mass": rng.uniform(0.5, 2, n), "stiffness": rng.uniform(1, 10, n),
                       "damping": rng.uniform(0, 3, n)})
    df["failmode"] = failmode if failmode is not None else 0
    return df


def expected(m: float, k: float, c: float) -> tuple[float, float, float]:
    """Reference values, computed independently of the example simulator: the
    first maximum of x(t) found numerically, and the closed-form rebound ratio."""
    w0, z = math.sqrt(k / m), c / (2 * math.sqrt(k * m))
    t = np.linspace(1e-6, 10 / w0, 200_001)
    if z < 1:
        wd = w0 * math.sqrt(1 - z * z)
        x = np.exp(-z * w0 * t) * np.sin(wd * t) / wd
    else:
        s = w0 * math.sqrt(z * z - 1) if z > 1 else 1e-12
        x = np.exp(-z * w0 * t) * np.sinh(s * t) / s
    i = int(np.argmax(x))
    rebound = math.exp(-math.pi * z / math.sqrt(1 - z * z)) if z < 1 else 0.0
    return float(x[i]), float(t[i]), rebound


def check_values(res: pd.DataFrame, df: pd.DataFrame) -> None:
    for i in range(len(df)):
        pk, tk, rb = expected(df.mass[i], df.stiffness[i], df.damping[i])
        assert res.peak_displacement.iloc[i] == pytest.approx(pk, rel=1e-6)
        assert res.peak_time.iloc[i] == pytest.approx(tk, rel=1e-3, abs=1e-4)
        assert res.rebound_ratio.iloc[i] == pytest.approx(rb, rel=1e-9, abs=1e-12)


def test_lines_input_keyvalue_output_matches_formula() -> None:
    sim = command_build.build(lines_options(), STUDY, KEY)
    df = design(4)
    df.loc[3, "damping"] = 2 * math.sqrt(df.stiffness[3] * df.mass[3]) * 1.5  # overdamped
    res = sim.run(df, np.arange(len(df)), threads=2)
    assert list(res.columns) == [*OUTPUTS, "status", "message"]
    assert (res.status == "ok").all(), res.message.tolist()
    check_values(res, df)


def test_json_input_and_json_parser() -> None:
    opts = lines_options(input_file={"format": "json", "name": "in-{run_id}.json",
                                     "extra": {"seed": "{seed}"}},
                         command=[sys.executable, SIM, "--config", "{input_file}",
                                  "--output", "{output_file}", "--format", "json"],
                         output_file="out-{seed}.json", parser="json")
    sim = command_build.build(opts, STUDY, KEY)
    df = design(3)
    res = sim.run(df, np.array([5, 6, 7]))
    assert (res.status == "ok").all(), res.message.tolist()
    check_values(res, df)


def test_inline_template_and_csv_parser() -> None:
    tpl = "# oscillator config\nmass {mass}\nstiffness {stiffness:.12g}\ndamping {damping}\n" \
          "seed {seed}\nfailmode {failmode}\n"
    opts = lines_options(input_file={"format": "template", "template": tpl},
                         command=[sys.executable, SIM, "--config", "{input_file}",
                                  "--output", "{output_file}", "--format", "csv"],
                         output_file="summary.csv", parser="csv")
    sim = command_build.build(opts, STUDY, KEY)
    df = design(3)
    res = sim.run(df, np.arange(3))
    assert (res.status == "ok").all(), res.message.tolist()
    check_values(res, df)


def test_template_file_and_integer_rendering(tmp_path: Path) -> None:
    tfile = tmp_path / "osc.template"
    tfile.write_text("mass {mass}\nstiffness {stiffness}\ndamping {damping}\nfailmode {failmode}\n")
    opts = lines_options(input_file={"format": "template", "template_file": str(tfile)},
                         keep_failed=True, workdir=str(tmp_path / "w"))
    sim = command_build.build(opts, STUDY, KEY)
    # the context failmode has integer values: written as '0', not '0.0'
    text = sim._input_text({"mass": 1.0, "failmode": 0},
                           {"mass": 1.0, "stiffness": 2.0, "damping": 0.1, "failmode": 0})
    assert "failmode 0\n" in text and "mass 1.0" in text
    df = design(2)
    res = sim.run(df, np.arange(2))
    assert (res.status == "ok").all(), res.message.tolist()
    check_values(res, df)
    assert not any((tmp_path / "w").iterdir())  # successful runs leave no scratch dir


def test_command_line_arguments_only_and_indexed_key() -> None:
    opts = {"command": [SIM, "mass={mass}", "stiffness={stiffness}", "damping={damping}"],
            "output_file": "Summary0",
            "output_map": {"Displacement samples[1]": "x2", "Peak time": "peak_time"},
            "outputs": ["x2", "peak_time"]}
    study = {k: v for k, v in STUDY.items() if k != "outputs"}
    sim = command_build.build(opts, study, KEY)
    res = sim.run(pd.DataFrame({"mass": [1.0], "stiffness": [4.0], "damping": [0.8],
                                "failmode": [0]}), [1])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    w0, z = 2.0, 0.2
    wd = w0 * math.sqrt(1 - z * z)
    assert res.x2.iloc[0] == pytest.approx(math.exp(-z * w0 * 2) * math.sin(wd * 2) / wd)


def test_stdout_output_and_env() -> None:
    code = "import os; print('y: ' + str({mass} * 2)); print('z: ' + os.environ['SCALE'])"
    opts = {"command": [sys.executable, "-c", code], "output_file": "-",
            "outputs": ["y", "z"], "env": {"SCALE": "{seed}"}}
    sim = command_build.build(opts, {"parameters": {"mass": {}}}, KEY)
    res = sim.run(pd.DataFrame({"mass": [1.5, 2.5]}), np.array([3, 4]), threads=2)
    assert res.status.tolist() == ["ok", "ok"]
    assert res.y.tolist() == [3.0, 5.0] and res.z.tolist() == [3.0, 4.0]


def _alive(pid: int, wait: float = 3.0) -> bool:
    """Whether ``pid`` still runs after up to ``wait`` seconds (a signal is
    delivered asynchronously; a zombie waiting for its reaper counts as dead)."""
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("Z", "X"):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


@pytest.mark.slow
def test_failures_become_status_rows(tmp_path: Path) -> None:
    # 3 s: long enough for a loaded CI machine to start Python, short for the hung row
    opts = lines_options(timeout=3, keep_failed=True, workdir=str(tmp_path))
    sim = command_build.build(opts, STUDY, KEY)
    df = design(8, failmode=[0, 1, 2, 3, 4, 5, 0, 0])
    df.loc[6, "mass"] = -1.0        # physically invalid: the program exits 2
    df.loc[7, "damping"] = np.nan   # never reaches the program
    res = sim.run(df, np.arange(8), threads=8)
    assert res.status.tolist() == ["ok", "error", "timeout", "parse_error", "nan_output",
                                   "missing_output", "error", "invalid_input"]
    msg = res.message.tolist()
    assert msg[0] == ""
    assert "exit status 3" in msg[1] and "simulated crash" in msg[1]
    assert "timed out" in msg[2] and "hanging on purpose" in msg[2]
    assert "not a number" in msg[3] and "stdout" in msg[3] and "\x00" not in msg[3]
    assert "non-finite" in msg[4]
    assert "not written" in msg[5]
    assert "exit status 2" in msg[6] and "mass > 0" in msg[6]
    assert "non-finite input" in msg[7]
    assert np.isnan(res.loc[1:, OUTPUTS].to_numpy()).all()
    check_values(res.iloc[:1], df.iloc[:1])
    # failed runs keep their scratch directory; the hung run's child was killed too
    kept = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(kept) == 6
    pid = int(next(tmp_path.glob("*/child.pid")).read_text())
    assert not _alive(pid)
    assert "scratch kept" in msg[2]


def test_failed_scratch_removed_without_keep_failed(tmp_path: Path) -> None:
    sim = command_build.build(lines_options(workdir=str(tmp_path)), STUDY, KEY)
    res = sim.run(design(2, failmode=[1, 0]), np.arange(2))
    assert res.status.tolist() == ["error", "ok"]
    assert not any(tmp_path.iterdir())


def test_threads_give_identical_results() -> None:
    df = design(4)
    df["noise"] = 0.05
    study = {**STUDY, "parameters": {**STUDY["parameters"], "noise": {"lower": 0, "upper": 1}}}
    sim = command_build.build(lines_options(), study, KEY)
    seeds = np.arange(100, 104)
    serial = sim.run(df, seeds, threads=1)
    parallel = sim.run(df, seeds, threads=4)
    pd.testing.assert_frame_equal(serial, parallel)
    assert (serial.status == "ok").all()
    # the seed reaches the program: noise differs between seeds, not between reruns
    other = sim.run(df, seeds + 1, threads=4)
    assert not np.allclose(other.peak_displacement, serial.peak_displacement)
    pd.testing.assert_frame_equal(other[["peak_time"]], serial[["peak_time"]])


def test_run_id_column_and_index() -> None:
    opts = {"command": [sys.executable, "-c", "print('r: {run_id}')"], "output_file": "-",
            "outputs": ["r"]}
    sim = command_build.build(opts, {"parameters": {"mass": {}}}, KEY)
    df = pd.DataFrame({"mass": [1.0, 2.0]}, index=[10, 11])
    assert sim.run(df, [0, 0]).r.tolist() == [10.0, 11.0]
    df["run_id"] = [7, 8]
    assert sim.run(df, [0, 0]).r.tolist() == [7.0, 8.0]


def test_through_build_simulator() -> None:
    study = {**STUDY, "simulator": {"type": "command", "options": lines_options()}}
    sim = build_simulator(study, "studies.osc")
    res = sim.run(design(2), np.arange(2))
    assert (res.status == "ok").all()


@pytest.mark.parametrize(("options", "path", "text"), [
    ({"tiemout": 3}, f"{KEY}.tiemout", "did you mean 'timeout'"),
    ({"input_file": {"format": "template", "template": "R0 {R_0}\nmass {mass}\n"}},
     f"{KEY}.input_file.template", "{R_0}"),
    ({"input_file": {"format": "lines", "extra": {"label": "run{runid}"}}},
     f"{KEY}.input_file.extra.label", "did you mean 'run_id'"),
    ({"input_file": {"format": "lines", "nmae": "x"}}, f"{KEY}.input_file.nmae", "unknown"),
    ({"input_file": {"format": "yaml"}}, f"{KEY}.input_file.format", "not one of"),
    ({"input_file": {"format": "template"}}, f"{KEY}.input_file.template", "exactly one"),
    ({"input_file": {"format": "template", "template_file": "no/such.tpl"}},
     f"{KEY}.input_file.template_file", "cannot read"),
    ({"command": [SIM, "mass={masss}"]}, f"{KEY}.command.1", "did you mean 'mass'"),
    ({"command": [SIM, "mass={mass:d}"]}, f"{KEY}.command.1", "cannot be rendered"),
    ({"command": ["resources/example_simulator"]}, f"{KEY}.command.0", "not found"),
    ({"command": ["no/such/program"]}, f"{KEY}.command.0", "not found"),
    ({"command": ["no-such-program-xyz"]}, f"{KEY}.command.0", "not found on PATH"),
    ({"command": []}, f"{KEY}.command", "required"),
    ({"output_file": "Summary{label}"}, f"{KEY}.output_file", "{label}"),
    ({"output_map": {"Peak time": "peak"}}, f"{KEY}.output_map.Peak time", "not an output"),
    ({"parser": "xml"}, f"{KEY}.parser", "not one of"),
    ({"timeout": 0}, f"{KEY}.timeout", "positive"),
    ({"keep_failed": "yes"}, f"{KEY}.keep_failed", "true or false"),
    ({"max_parallel": 0}, f"{KEY}.max_parallel", "positive"),
    ({"link_files": ["no/such/file.dat"]}, f"{KEY}.link_files.0", "does not exist"),
    ({"env": {"X": "{nope}"}}, f"{KEY}.env.X", "{nope}"),
])
def test_config_errors_name_the_key_path(options: dict, path: str, text: str) -> None:
    opts = lines_options(**options)
    with pytest.raises(ConfigError) as exc:
        command_build.build(opts, STUDY, KEY)
    assert exc.value.path == path
    assert text in exc.value.message


def test_outputs_required() -> None:
    study = {k: v for k, v in STUDY.items() if k != "outputs"}
    opts = lines_options()
    opts.pop("output_map")
    with pytest.raises(ConfigError) as exc:
        command_build.build(opts, study, KEY)
    assert exc.value.path == f"{KEY}.outputs"


def test_relative_paths_are_resolved_against_root() -> None:
    sim = command_build.build(lines_options(command=[SIM, "--config", "{input_file}"],
                                      link_files=[SIM]), STUDY, KEY)
    assert sim.argv[0].text == str(ROOT / SIM)
    assert sim.argv[2].text == "{input_file}"
    assert sim.link_files == {"oscillator.py": ROOT / SIM}


def test_link_files_are_visible_to_the_program() -> None:
    code = "print('n: ' + str(len(open('oscillator.py').read()) > 0))"
    opts = {"command": [sys.executable, "-c", code.replace("str(", "str(int(") + ")"],
            "output_file": "-", "outputs": ["n"], "link_files": [SIM]}
    sim = command_build.build(opts, {"parameters": {"mass": {}}}, KEY)
    res = sim.run(pd.DataFrame({"mass": [1.0]}), [0])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    assert res.n.iloc[0] == 1.0


def test_sigterm_kills_running_programs(tmp_path: Path) -> None:
    """A cancelled job (SIGTERM) must not leave simulator processes behind."""
    import signal
    import threading

    opts = lines_options(timeout=60, keep_failed=True, workdir=str(tmp_path))
    sim = command_build.build(opts, STUDY, KEY)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    with pytest.raises(SystemExit):
        sim.run(design(2, failmode=[2, 2]), np.arange(2), threads=2)
    timer.cancel()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored
    assert not sim._live
    for f in tmp_path.glob("*/child.pid"):
        assert not _alive(int(f.read_text()))


def test_parsers() -> None:
    kv = command.parse_keyvalue("Header line\n# c\nTotal symptomatic attack rate: 0.25\n"
                                "Total symptomatic attack rates by age: 0.1,0.2,0.3,0.4,0.5,\n")
    assert command.extract(kv, "Total symptomatic attack rate") == 0.25
    assert command.extract(kv, "Total symptomatic attack rates by age[4]") == 0.5
    with pytest.raises(command.OutputParseError, match=r"\[i\]"):
        command.extract(kv, "Total symptomatic attack rates by age")
    with pytest.raises(command.OutputParseError, match="not found"):
        command.extract(kv, "Missing key")
    row = command.parse_csv("t,a,b\n0,1,2\n1,3,4\n")
    assert command.extract(row, "b") == 4.0
    doc = command.parse_json('{"res": {"ar": [0.1, 0.2]}, "x": null, "a.b": 3}')
    assert command.extract(doc, "res.ar[1]") == 0.2
    assert command.extract(doc, "a.b") == 3.0
    assert math.isnan(command.extract(doc, "x"))
    with pytest.raises(command.OutputParseError):
        command.parse_json("{garbage")


def test_shipped_example_found_from_another_directory(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Snakemake may run in another directory (``-d``); the example still resolves."""
    monkeypatch.chdir(tmp_path)
    sim = command_build.build(lines_options(), STUDY, KEY)
    assert sim.argv[1].text == str(ROOT / SIM)
    res = sim.run(design(1), [0])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
