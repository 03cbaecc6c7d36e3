"""``isolate: true`` for python simulators: a segfault or a hang becomes a status
row, and the batch goes on."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.simulators import build_simulator, probe

HERE = str(Path(__file__).parent)


def fragile(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """x == 1: segfault; x == 2: hang; x == 3: os._exit(7); else y = 10 x + seed."""
    x = float(df["x"].iloc[0])
    if x == 1:
        ctypes.string_at(0)
    if x == 2:
        time.sleep(600)
    if x == 3:
        os._exit(7)
    return pd.DataFrame({"y": df["x"] * 10 + seeds})


def study(**opts: object) -> dict:
    return {"simulator": {"type": "python", "options": {
        "function": "test_isolate:fragile", "path": HERE, "outputs": ["y"], "isolate": True,
        "timeout": 3, **opts}}, "parameters": {"x": {"lower": 0, "upper": 5}}}


@pytest.mark.slow
def test_segfault_hang_and_exit_become_status_rows() -> None:
    sim = build_simulator(study(), "studies.f")
    df = pd.DataFrame({"x": [0.5, 1.0, 2.0, 3.0, 4.0, 0.25]}, index=[10, 11, 12, 13, 14, 15])
    t0 = time.monotonic()
    res = sim.run(df, np.arange(6), threads=2)
    assert time.monotonic() - t0 < 60
    assert res.index.tolist() == [10, 11, 12, 13, 14, 15]
    assert res.status.tolist() == ["ok", "error", "timeout", "error", "ok", "ok"]
    assert "SIGSEGV" in res.message[11]
    assert "timed out after 3 s" in res.message[12]
    assert "exited with status 7" in res.message[13]
    np.testing.assert_allclose(res.y[[10, 14, 15]], [5.0, 44.0, 7.5])


def test_isolated_equals_in_process_for_good_rows() -> None:
    df = pd.DataFrame({"x": [0.5, 4.0, 0.25]})
    iso = build_simulator(study(), "studies.f").run(df, np.array([3, 4, 5]))
    s = study()
    for k in ("isolate", "timeout"):
        s["simulator"]["options"].pop(k)
    plain = build_simulator(s, "studies.f").run(df, np.array([3, 4, 5]))
    pd.testing.assert_frame_equal(iso, plain)


def test_probe_isolated() -> None:
    res = probe(build_simulator(study(), "studies.f"), {"x": 0.5}, 1)
    assert res.status.iloc[0] == "ok" and res.y.iloc[0] == 6.0
    with pytest.raises(ConfigError) as exc:
        probe(build_simulator(study(outputs=["yy"]), "studies.f"), {"x": 0.5}, 1)
    assert exc.value.path == "studies.f.simulator.options.outputs"
    assert "did you mean 'y'" in exc.value.message


@pytest.mark.parametrize(("opts", "path"), [
    ({"isolate": "yes"}, "isolate"),
    ({"timeout": 0}, "timeout"),
    ({"isolate": False, "timeout": 5}, "timeout"),
])
def test_isolate_options_are_validated(opts: dict, path: str) -> None:
    with pytest.raises(ConfigError) as exc:
        build_simulator(study(**opts), "studies.f")
    assert exc.value.path == f"studies.f.simulator.options.{path}"


def hang_and_record(df: pd.DataFrame) -> pd.DataFrame:
    """Records this worker's pid in the directory named by $PIDDIR, then hangs."""
    Path(os.environ["PIDDIR"], str(os.getpid())).write_text("")
    time.sleep(600)
    return pd.DataFrame({"y": df["x"]})


DRIVER = """
import numpy as np, pandas as pd
from simcalib.simulators import build_simulator
study = {"simulator": {"type": "python", "options": {
    "function": "test_isolate:hang_and_record", "path": %r, "outputs": ["y"],
    "isolate": True, "timeout": 300}}, "parameters": {"x": {"lower": 0, "upper": 1}}}
build_simulator(study, "s").run(pd.DataFrame({"x": [0.1, 0.2]}), np.arange(2), threads=2)
"""


def test_sigkill_of_the_job_kills_isolated_workers(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    env = {**os.environ, "PIDDIR": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER % HERE], env=env)
    deadline = time.monotonic() + 120
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert len(pids) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def dead(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state in ("Z", "X")

    deadline = time.monotonic() + 10
    while not all(dead(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(dead(p) for p in pids)
