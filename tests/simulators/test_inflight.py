"""No hang without a word (issue 43, item 3): an in-process Python run that takes
long is named in the log every ``heartbeat`` seconds, and a job that dies during a
run (``os._exit``, a signal) leaves a line naming the runs in flight and the cause."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.simulators import pyfunc

STUDY = {"parameters": {"x": {}}}
KEY = "studies.s.simulator.options"


def slow(df: pd.DataFrame) -> pd.DataFrame:
    time.sleep(0.9)
    return pd.DataFrame({"y": df["x"]})


def test_heartbeat_names_the_runs_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    sim = pyfunc.build({"function": slow, "outputs": ["y"], "heartbeat": 0.25}, STUDY, KEY)
    rows = pd.DataFrame({"x": [0.5]}, index=pd.Index([41], name="run_id"))
    with caplog.at_level(logging.WARNING, logger="simcalib.simulators.inflight"):
        sim.run(rows, np.array([1]))
    lines = [r.getMessage() for r in caplog.records if "still in flight" in r.getMessage()]
    assert 2 <= len(lines) <= 4                       # ~every 0.25 s of a 0.9 s run
    assert all("run_id 41" in m and "timeout" in m for m in lines)
    caplog.clear()
    quiet = pyfunc.build({"function": slow, "outputs": ["y"], "heartbeat": 0}, STUDY, KEY)
    with caplog.at_level(logging.WARNING, logger="simcalib.simulators.inflight"):
        quiet.run(rows, np.array([1]))
    assert "still in flight" not in caplog.text
    with pytest.raises(ConfigError, match="heartbeat"):
        pyfunc.build({"function": slow, "outputs": ["y"], "heartbeat": -1}, STUDY, KEY)


JOB = textwrap.dedent("""
    import os, signal, sys
    import numpy as np, pandas as pd
    from simcalib.simulators import pyfunc

    def f(df):
        if (df["x"] > 0.5).any():
            how = sys.argv[1]
            if how == "exit":
                os._exit(7)
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            sys.exit(3)
        return pd.DataFrame({"y": df["x"]})

    sim = pyfunc.build({"function": f, "outputs": ["y"]}, {"parameters": {"x": {}}},
                       "studies.s.simulator.options")
    rows = pd.DataFrame({"x": [0.1, 0.9]}, index=pd.Index([10, 11], name="run_id"))
    for i in range(2):
        sim.run(rows.iloc[[i]], np.array([i]))
""")


@pytest.mark.parametrize(("how", "rc", "cause"), [
    ("exit", 7, "os._exit(7) called during the run"),
    ("kill", -9, "no word from Python: killed by a signal"),
])
def test_a_job_that_dies_in_a_run_names_it(tmp_path: Path, how: str, rc: int,
                                           cause: str) -> None:
    proc = subprocess.run([sys.executable, "-c", JOB, how], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(Path(pyfunc.__file__).parents[2]),
                                           "PATH": "/usr/bin:/bin"})
    assert proc.returncode == rc, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if x.startswith("simcalib: the job"))
    assert "with 1 run(s) in flight: studies.s.simulator.options.function: run_id 11" in line
    assert "run_id 10" not in line and cause in line, line


def test_sys_exit_in_a_run_is_logged_with_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """Python still runs after SystemExit: the job's own log names the run."""
    def f(df: pd.DataFrame) -> pd.DataFrame:
        raise SystemExit(3)

    sim = pyfunc.build({"function": f, "outputs": ["y"]}, STUDY, KEY)
    rows = pd.DataFrame({"x": [0.9]}, index=pd.Index([11], name="run_id"))
    with caplog.at_level(logging.ERROR), pytest.raises(SystemExit):
        sim.run(rows, np.array([1]))
    assert f"{KEY}.function: run_id 11 ended by SystemExit(3)" in caplog.text
