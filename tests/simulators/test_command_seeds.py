"""Seeds a command receives fit a 32-bit ``int``; warnings of successful runs
reach the row's message."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.seeds import row_seeds
from simcalib.simulators import command, command_build, count_warnings

KEY = "studies.s.simulator.options"
STUDY = {"parameters": {"mass": {}}}
# echoes the seed it was given, as a program that records it would
ECHO = "import sys; print('seed: ' + sys.argv[1])"


def echo_sim(**over: object) -> command.CommandSimulator:
    opts = {"command": [sys.executable, "-c", ECHO, "{seed}"], "output_file": "-",
            "outputs": ["seed"], **over}
    return command_build.build(opts, STUDY, KEY)


def test_command_never_sees_a_seed_above_2_31() -> None:
    seeds = row_seeds(7, "sim:s", np.arange(40))
    assert (seeds > 2**31 - 1).sum() > 30  # the raw 63-bit seeds would not fit
    res = echo_sim().run(pd.DataFrame({"mass": np.ones(40)}), seeds, threads=2)
    assert (res.status == "ok").all(), res.message.tolist()
    got = res["seed"].to_numpy()
    assert got.max() <= 2**31 - 1 and got.min() >= 0
    np.testing.assert_array_equal(got, seeds & (2**31 - 1))   # the low 31 bits
    assert len(set(got)) == 40                                 # still distinct


def test_seed_bits_widens_the_range() -> None:
    seeds = np.array([2**62 + 12345, 5], dtype=np.int64)
    res = echo_sim(seed_bits=63).run(pd.DataFrame({"mass": [1.0, 1.0]}), seeds)
    # parsed as a float; compare with the float of the full 63-bit seed
    assert res["seed"].tolist() == [float(2**62 + 12345), 5.0]


@pytest.mark.parametrize("bad", [0, 64, 31.5, True, "31"])
def test_seed_bits_is_validated(bad: object) -> None:
    with pytest.raises(ConfigError) as exc:
        echo_sim(seed_bits=bad)
    assert exc.value.path == f"{KEY}.seed_bits"


def test_stderr_warnings_of_successful_runs_reach_the_message() -> None:
    code = ("import sys; print('y: 1'); "
            "sys.stderr.write('reading config\\nWARNING: seed out of range, using 0\\n'"
            " if sys.argv[1] == '1' else 'reading config\\n')")
    opts = {"command": [sys.executable, "-c", code, "{mass}"], "output_file": "-",
            "outputs": ["y"]}
    sim = command_build.build(opts, STUDY, KEY)
    res = sim.run(pd.DataFrame({"mass": [1, 2, 1]}), np.arange(3))
    assert res.status.tolist() == ["ok"] * 3
    assert res.message[1] == ""
    for i in (0, 2):
        assert res.message[i].startswith("warning: 1 stderr line(s)")
        assert "WARNING: seed out of range" in res.message[i]
        assert "reading config" not in res.message[i]
    assert count_warnings(res) == 2


def test_child_cpu_time_is_measured() -> None:
    from simcalib.simulators import measure_cpu

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n" \
           "print('y: 1')"
    sim = command_build.build({"command": [sys.executable, "-c", burn], "output_file": "-",
                         "outputs": ["y"]}, STUDY, KEY)
    with measure_cpu() as cpu:
        res = sim.run(pd.DataFrame({"mass": [1.0, 2.0]}), [0, 1], threads=2)
    assert (res.status == "ok").all()
    assert cpu.children_s >= 0.8          # two runs of >= 0.4 s CPU each
    assert cpu.self_s < cpu.children_s    # the adapter itself is cheap
    d = cpu.as_dict()
    assert d["cpu_s"] == pytest.approx(d["cpu_self_s"] + d["cpu_children_s"], abs=2e-3)
