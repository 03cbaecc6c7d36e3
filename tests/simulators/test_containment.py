"""Command programs are contained (issue 43, items 1 and 2): writes outside the run's
scratch directory are blocked under ``confine: strict`` (Landlock) and reported under
``warn``; and no process a run starts outlives it, whatever it does to detach."""

from __future__ import annotations

import logging
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.simulators import command_build, confine, strays
from simcalib.simulators.factory import build_simulator

KEY = "studies.s.simulator.options"
ONE = pd.DataFrame({"x": [1.0]})
needs_landlock = pytest.mark.skipif(not confine.abi(), reason="no Landlock on this kernel")


def _sim(tmp: Path, script: str, mode: str, **opts: object) -> command_build.CommandSimulator:
    study = {"parameters": {"x": {}}, "simulator": {"type": "command", "confine": mode}}
    return command_build.build({"command": ["/bin/sh", "-c", script], "output_file": "-",
                                "outputs": ["y"], "workdir": str(tmp / "scratch"), **opts},
                               study, KEY)


@pytest.fixture
def area(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the workflow root and home; ``outside/`` a directory there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path


def _escapes(root: Path) -> dict[str, str]:
    """The four ways out of the scratch directory (each writes a file named after it)."""
    return {
        "relative": "echo x > ../relative.txt",                  # lands in the scratch base
        "absolute": f"echo x > {root}/home/absolute.txt",
        "symlink": f"ln -s {root}/outside lnk && echo x > lnk/symlink.txt",
        "child": f"sh -c 'echo x > {root}/child.txt'",           # a child process writes
    }


def _written(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.txt"))


@needs_landlock
@pytest.mark.parametrize("how", ["relative", "absolute", "symlink", "child"])
def test_strict_blocks_writes_outside_scratch(area: Path, how: str) -> None:
    sim = _sim(area, _escapes(area)[how] + "; echo y: 1", "strict")
    assert sim.confine == "strict"
    res = sim.run(ONE, [0])
    assert _written(area) == []                              # nothing got out
    assert res.status.iloc[0] == "ok"                        # the program went on,
    assert "Permission denied" in res.message.iloc[0]        # with a warning that says so
    # a program that stops on the failed write fails with a hint at the confinement
    sim = _sim(area, "set -e; " + _escapes(area)[how] + "; echo y: 1", "strict")
    res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "error"
    assert "Permission denied" in res.message.iloc[0]
    assert "confine: strict blocks writes" in res.message.iloc[0]
    assert _written(area) == []


@pytest.mark.parametrize("how", ["relative", "absolute", "symlink", "child"])
def test_warn_reports_writes_outside_scratch(area: Path, how: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    sim = _sim(area, _escapes(area)[how] + "; echo y: 1", "warn")
    with caplog.at_level(logging.WARNING):
        res = sim.run(ONE, [0])
    assert len(_written(area)) == 1                          # warn does not block
    msg = res.message.iloc[0]
    assert res.status.iloc[0] == "ok" and msg.startswith("warning: written outside the "
                                                         "scratch directory during the run")
    where = {"relative": "/relative.txt",
             "absolute": area / "home" / "absolute.txt",
             "symlink": area / "outside", "child": area / "child.txt"}[how]
    assert str(where) in msg, msg
    assert "run 0" in caplog.text and str(where) in caplog.text


def test_off_neither_blocks_nor_reports(area: Path) -> None:
    sim = _sim(area, f"echo x > {area}/home/a.txt; echo y: 1", "off")
    res = sim.run(ONE, [0])
    assert _written(area) == ["a.txt"] and res.message.iloc[0] == ""


@needs_landlock
def test_strict_allows_declared_writable_paths_and_tmpdir(area: Path) -> None:
    sim = _sim(area, f"echo x > {area}/outside/ok.txt; t=$(mktemp); echo y: 1",
               "strict", writable=["outside"])
    res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    assert _written(area) == ["ok.txt"]                      # mktemp went to scratch


def test_modes_resolve(monkeypatch: pytest.MonkeyPatch,
                       caplog: pytest.LogCaptureFixture) -> None:
    assert confine.resolve_mode(False, "k") == "off"         # YAML's bare 'off'
    with pytest.raises(ConfigError, match="'k'.*not one of"):
        confine.resolve_mode("loose", "k")
    monkeypatch.setattr(confine, "_ABI", 0)                  # a kernel without Landlock
    monkeypatch.setattr(confine, "_NOTED", False)
    with pytest.raises(ConfigError, match="strict' needs Linux Landlock"):
        confine.resolve_mode("strict", "studies.s.simulator.confine")
    with caplog.at_level(logging.WARNING):
        assert confine.resolve_mode("auto", "k") == "warn"
        assert confine.resolve_mode(None, "k") == "warn"
    assert caplog.text.count("Landlock is not available") == 1   # one line, not one a study


def test_factory_reads_the_study_key(area: Path) -> None:
    study = {"simulator": {"type": "command", "confine": "warn",
                           "options": {"command": ["/bin/echo", "y: 1"], "output_file": "-"}},
             "parameters": {"x": {}}, "outputs": ["y"]}
    assert build_simulator(study, "studies.s").confine == "warn"
    study["simulator"]["options"]["writable"] = "outside"
    with pytest.raises(ConfigError, match="writable"):
        build_simulator(study, "studies.s")


# ---------------------------------------------------------------------------
# no process outlives its run
# ---------------------------------------------------------------------------
DAEMON = textwrap.dedent("""
    import ctypes, os, sys, time
    mode, pidfile = sys.argv[1], sys.argv[2]
    if mode in ("doublefork", "rename"):
        if os.fork():
            os._exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
    elif mode == "setsid":
        os.setsid()
    if mode == "rename":
        ctypes.CDLL(None).prctl(15, b"renamed-daemon", 0, 0, 0)
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    time.sleep(60)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _daemon_cmd(tmp: Path, mode: str, pidfile: Path) -> str:
    script = tmp / "daemon.py"
    script.write_text(DAEMON)
    run = f"{sys.executable} {script} {mode if mode != 'nohup' else 'setsid'} {pidfile}"
    if mode == "nohup":
        run = f"/usr/bin/nohup {run}"
    # every variant clears its environment first: the run's token cannot follow it
    return (f"env -i {run} >/dev/null 2>&1 & "
            f"while [ ! -e {pidfile} ]; do sleep 0.02; done; echo y: 1")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux /proc")
@pytest.mark.parametrize("mode", ["setsid", "doublefork", "nohup", "rename"])
def test_detached_processes_die_with_their_run(tmp_path: Path, mode: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    pidfile = tmp_path / f"{mode}.pid"
    sim = _sim(tmp_path, _daemon_cmd(tmp_path, mode, pidfile), "off")
    with caplog.at_level(logging.WARNING):
        res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"{mode}: process {pid} outlived its run")
    assert strays.enable_subreaper()
    assert f"{pid} (" in caplog.text and "left 1 process(es) behind" in caplog.text
    if mode == "rename":
        assert "renamed-daemon" in caplog.text


def test_orphans_of_overlapping_runs_die_with_the_batch(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    """Two runs at once: an orphan cannot be told to one of them while the other runs,
    so the last run to end (or the batch) kills it; none survives the batch."""
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    cmd = (f"env -i {sys.executable} {script} doublefork {tmp_path}/$RUN.pid >/dev/null 2>&1 & "
           f"while [ ! -e {tmp_path}/$RUN.pid ]; do sleep 0.02; done; sleep 0.3; echo y: 1")
    sim = _sim(tmp_path, cmd, "off", env={"RUN": "{run_id}"})
    with caplog.at_level(logging.WARNING):
        res = sim.run(pd.DataFrame({"x": [1.0, 2.0]}), np.arange(2), threads=2)
    assert (res.status == "ok").all()
    pids = [int((tmp_path / f"{i}.pid").read_text()) for i in range(2)]
    time.sleep(0.2)
    alive = [p for p in pids if _alive(p)]
    for p in alive:
        os.kill(p, signal.SIGKILL)
    assert not alive
    assert all(f"{p} (" in caplog.text for p in pids)


def test_isolated_workers_leave_no_detached_processes(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """An isolated Python function that starts a detached process (env -i, setsid):
    the process dies when the batch's workers stop."""
    from simcalib.simulators import pyfunc

    (tmp_path / "spawner.py").write_text(textwrap.dedent(f"""
        import os, subprocess, time, pandas as pd
        def f(df):
            subprocess.Popen(["env", "-i", "{sys.executable}", "-c",
                              "import os, time; os.setsid(); "
                              "open('{tmp_path}/pid.tmp', 'w').write(str(os.getpid())); "
                              "os.rename('{tmp_path}/pid.tmp', '{tmp_path}/pid'); "
                              "time.sleep(60)"])
            while not os.path.exists("{tmp_path}/pid"):
                time.sleep(0.02)
            return pd.DataFrame({{"y": df["x"]}})
    """))
    sim = pyfunc.build({"function": "spawner:f", "path": str(tmp_path), "outputs": ["y"],
                        "isolate": True, "timeout": 30}, {"parameters": {"x": {}}}, KEY)
    with caplog.at_level(logging.WARNING):
        res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    pid = int((tmp_path / "pid").read_text())
    time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the isolated function's detached process outlived the batch")
    assert f"{pid} (python" in caplog.text and "left 1 process(es) behind" in caplog.text


def test_an_in_process_functions_detached_process_dies_with_its_chunk(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import subprocess

    from simcalib.study import Study
    from simcalib.study.simulation import make_design, run_chunk

    pidfile = tmp_path / "pid"

    def f(df: pd.DataFrame) -> pd.DataFrame:
        if not pidfile.exists():
            subprocess.Popen(["env", "-i", sys.executable, "-c", DAEMON, "doublefork",
                              str(pidfile)])
            while not pidfile.exists():
                time.sleep(0.02)
        return pd.DataFrame({"y": df["x"]})

    study = Study("d", {"simulator": {"type": "python", "options": {"function": f,
                                                                    "outputs": ["y"]}},
                        "parameters": {"x": {"lower": 0.0, "upper": 1.0}}, "outputs": ["y"],
                        "design": {"n": 3, "chunk_size": 3, "method": "sobol"}})
    with caplog.at_level(logging.WARNING):
        out, _ = run_chunk(study, make_design(study, 1), 1)
    assert (out.status == "ok").all()
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("a detached process of an in-process function outlived its chunk")
    assert "d: the simulator left 1 process(es) behind" in caplog.text
