"""Command simulators stay inside their scratch directory, cannot change linked
originals, and leave no processes or directories behind when their job dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.simulators import command, command_build
from tests.conftest import default_signals

KEY = "studies.s.simulator.options"
STUDY = {"parameters": {"x": {}}}
ONE = pd.DataFrame({"x": [1.0]})


def build(**opts: object) -> command.CommandSimulator:
    base = {"command": [sys.executable, "-c", "print('y: 1')"], "output_file": "-",
            "outputs": ["y"]}
    return command_build.build({**base, **opts}, STUDY, KEY)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    f = tmp_path / "tracts.dat"
    f.write_text("original\n")
    return f


@pytest.mark.parametrize(("opts", "path", "text"), [
    ({"input_file": {"name": "../config.txt"}}, f"{KEY}.input_file.name", "'..'"),
    ({"input_file": {"name": "a/../../config.txt"}}, f"{KEY}.input_file.name", "'..'"),
    ({"input_file": {"name": "/tmp/config.txt"}}, f"{KEY}.input_file.name", "absolute"),
    ({"input_file": {"name": "~/config.txt"}}, f"{KEY}.input_file.name", "absolute"),
    ({"input_file": {"name": "{root}/config.txt"}}, f"{KEY}.input_file.name", "absolute"),
    ({"input_file": {"name": ".simcalib.stderr"}}, f"{KEY}.input_file.name", "simcalib's own"),
    ({"output_file": "../Summary0"}, f"{KEY}.output_file", "'..'"),
    ({"output_file": "/etc/hostname"}, f"{KEY}.output_file", "absolute"),
    ({"output_file": ".."}, f"{KEY}.output_file", "not a file name"),
    ({"output_file": "{seed:/>5}"}, f"{KEY}.output_file", "absolute"),
    ({"output_file": "S{seed:>20000000000}"}, f"{KEY}.output_file", "above 1000"),
    ({"link_files": {"../escape.dat": "DATA"}}, f"{KEY}.link_files.../escape.dat", "'..'"),
    ({"link_files": {"sub/x.dat": "DATA"}}, f"{KEY}.link_files.sub/x.dat", "plain name"),
    ({"link_files": {"..": "DATA"}}, f"{KEY}.link_files...", "not a file name"),
    ({"link_files": ["DATA", "DATA"]}, f"{KEY}.link_files.1", "twice"),
    ({"link_files": ["DATA"], "output_file": "tracts.dat"}, f"{KEY}.output_file", "link_files"),
    ({"link_files": ["DATA"], "input_file": {"name": "tracts.dat"}},
     f"{KEY}.input_file.name", "link_files"),
    ({"link_files": "DATA"}, f"{KEY}.link_files", "list of paths"),
    ({"link_mode": "hardlink"}, f"{KEY}.link_mode", "not one of"),
])
def test_escaping_names_are_keyed_config_errors(opts: dict, path: str, text: str,
                                                data: Path) -> None:
    def fill(v: object) -> object:
        if v == "DATA":
            return str(data)
        if isinstance(v, dict):
            return {k: fill(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fill(x) for x in v]
        return v

    with pytest.raises(ConfigError) as exc:
        build(**fill(opts))
    assert exc.value.path == path
    assert text in exc.value.message


def test_subdirectory_names_inside_scratch_are_fine(tmp_path: Path) -> None:
    code = ("import os; os.makedirs('out'); "
            "open('out/s.txt', 'w').write('y: ' + open('in/c.txt').read())")
    sim = build(command=[sys.executable, "-c", code], input_file={"name": "in/c.txt",
                "format": "template", "template": "{x}"}, output_file="out/s.txt",
                workdir=str(tmp_path))
    res = sim.run(pd.DataFrame({"x": [2.5]}), [0])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    assert res.y.iloc[0] == 2.5


def test_linked_original_cannot_be_modified(data: Path, tmp_path: Path) -> None:
    # writes to the linked name, then reports what it read before writing
    code = ("t = open('tracts.dat').read().strip()\n"
            "try:\n open('tracts.dat', 'w').write('clobbered')\nexcept OSError:\n pass\n"
            "print('y: ' + str(len(t)))")
    sim = build(command=[sys.executable, "-c", code], link_files=[str(data)],
                workdir=str(tmp_path / "w"))
    res = sim.run(pd.DataFrame({"x": [1.0, 2.0]}), [0, 1])
    assert data.read_text() == "original\n"                 # never changed
    if os.geteuid() == 0 and sim.confine != "strict":
        # root ignores the read-only mode: the write hit the copy (Landlock stops root too)
        assert res.status.tolist() == ["error", "error"]
        assert res.message.str.contains("modified linked file").all()
    else:                   # the read-only copy (or the confinement) refused the write
        assert res.status.tolist() == ["ok", "ok"]
    assert not any((tmp_path / "w").iterdir())              # copies and scratch removed


def test_linked_copy_modified_is_caught_without_confinement(data: Path, tmp_path: Path) -> None:
    code = ("t = open('tracts.dat').read().strip()\n"
            "try:\n open('tracts.dat', 'w').write('clobbered')\nexcept OSError:\n pass\n"
            "print('y: ' + str(len(t)))")
    sim = build(command=[sys.executable, "-c", code], link_files=[str(data)],
                workdir=str(tmp_path / "w"))
    sim.confine = "off"
    res = sim.run(pd.DataFrame({"x": [1.0, 2.0]}), [0, 1])
    assert data.read_text() == "original\n"
    expect = ["error", "error"] if os.geteuid() == 0 else ["ok", "ok"]
    assert res.status.tolist() == expect


def test_each_run_sees_the_original_content_again(data: Path) -> None:
    code = ("import sys; t = open('tracts.dat').read()\n"
            "try:\n open('tracts.dat', 'a').write('x')\nexcept OSError:\n pass\n"
            "print('y: ' + str(len(t)))")
    sim = build(command=[sys.executable, "-c", code], link_files=[str(data)])
    res = sim.run(pd.DataFrame({"x": np.zeros(3)}), np.arange(3))   # one at a time
    assert data.read_text() == "original\n"
    if os.geteuid() != 0:
        assert res.y.tolist() == [9.0, 9.0, 9.0]


def test_link_mapping_renames(data: Path) -> None:
    code = "print('y: ' + str(len(open('seattle-tracts.dat').read())))"
    sim = build(command=[sys.executable, "-c", code],
                link_files={"seattle-tracts.dat": str(data)})
    res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "ok" and res.y.iloc[0] == 9.0


def test_output_symlink_out_of_scratch_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("y: 42\n")
    code = f"import os; os.symlink({str(outside)!r}, 'Summary0')"
    sim = build(command=[sys.executable, "-c", code], output_file="Summary0")
    res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "error"
    assert "outside the scratch directory" in res.message.iloc[0]


# ---------------------------------------------------------------------------
# no strays
# ---------------------------------------------------------------------------
def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _wait_for(cond, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


DRIVER = textwrap.dedent("""
    import sys
    import numpy as np, pandas as pd
    from simcalib.simulators import command_build
    pids, work = sys.argv[1], sys.argv[2]
    open(pids, "a").close()  # a declared writable file (confine: strict)
    script = "sleep 60 & echo $! >> " + pids + "; echo $$ >> " + pids + "; wait"
    sim = command_build.build({"command": ["/bin/sh", "-c", script], "output_file": "-",
                         "outputs": ["y"], "workdir": work, "keep_failed": True,
                         "link_files": [sys.argv[3]], "timeout": 120, "writable": [pids]},
                        {"parameters": {"x": {}}}, "k")
    sim.run(pd.DataFrame({"x": [1.0, 2.0]}), np.arange(2), threads=2)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_killed_job_leaves_no_processes_or_scratch(sig: signal.Signals, tmp_path: Path,
                                                    data: Path) -> None:
    """Kill the Python process running a batch of two runs (each a shell with a
    background ``sleep``): every sleep and shell dies and no scratch directory or
    link copy is left, also after SIGKILL (the watchdog's work) and although
    ``keep_failed`` is on (an interrupted run is not a failure of the simulator)."""
    pids, work = tmp_path / "pids", tmp_path / "work"
    env = {**os.environ, "PYTHONPATH": str(Path(command.__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(pids), str(work), str(data)],
                            preexec_fn=default_signals,
                            env=env)
    try:
        assert _wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 4, 60)
        started = [int(p) for p in pids.read_text().split()]
        assert not any(_dead(p) for p in started)
        assert len(list(work.glob("simcalib-*"))) == 3        # two runs and the link copies
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # generous waits: on a loaded machine (CI beside other jobs) the watchdog and the
    # clean-up take seconds; failing needs a process or a directory to survive 30 s
    assert _wait_for(lambda: all(_dead(p) for p in started), 30), \
        [p for p in started if not _dead(p)]
    assert _wait_for(lambda: not list(work.iterdir()), 30), list(work.iterdir())
    assert data.read_text() == "original\n"


def test_kept_scratch_links_the_originals(data: Path, tmp_path: Path) -> None:
    """A kept failed run can be rerun by hand after its batch's copies are gone."""
    sim = build(command=[sys.executable, "-c", "import sys; sys.exit(3)"],
                link_files=[str(data)], keep_failed=True, workdir=str(tmp_path / "w"))
    res = sim.run(ONE, [0])
    assert res.status.iloc[0] == "error"
    kept = [p for p in (tmp_path / "w").iterdir()]
    assert len(kept) == 1 and kept[0].name.startswith("simcalib-0-")   # link copies removed
    assert (kept[0] / "tracts.dat").resolve() == data.resolve()
