"""Running one chunk: per-run journal and resume, the first-run probe, progress
lines, the summary's warnings/failure examples and CPU time of child processes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simcalib.config import load_config
from simcalib.errors import DataError
from simcalib.study import Study, build_study
from simcalib.study.journal import journal_path
from simcalib.study.simulation import (
    Progress,
    chunk_summary,
    failure_digest,
    make_design,
    run_chunk,
)
from tests.chunk_fixtures import counting_config, started

ROSEN = {"simulator": {"type": "rosenbrock", "options": {"noise_sd": 0.1}},
         "parameters": {"x": {"lower": -2, "upper": 2}, "y": {"lower": -1, "upper": 3}},
         "design": {"n": 20, "chunk_size": 20, "method": "uniform"}, "targets": {"n": 1}}


class Counting:
    """Wraps a simulator and records the rows it is asked to run."""

    def __init__(self, sim: Any) -> None:
        self.sim, self.outputs, self.calls = sim, sim.outputs, []

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        self.calls += list(inputs.index)
        return self.sim.run(inputs, seeds, threads)


def counted(cfg: dict = ROSEN) -> tuple[Study, Counting]:
    study = Study("rosen", cfg)
    wrapper = Counting(study.simulator)
    study.__dict__["simulator"] = wrapper  # replace the cached simulator
    return study, wrapper


def test_journal_resumes_only_missing_runs_and_drops_a_torn_line(tmp_path: Path) -> None:
    study, sim = counted()
    rows = make_design(study, 1)
    jpath = tmp_path / ".journal" / "chunk_0.jsonl"
    full, summ = run_chunk(study, rows, 1, journal=jpath)
    assert sim.calls == list(range(20)) and summ["resumed"] == 0
    lines = jpath.read_text().splitlines(keepends=True)
    assert len(lines) == 21 and json.loads(lines[0])["format"] == "simcalib-chunk-journal"
    # a kill after 7 runs, the 8th record cut mid-write
    jpath.write_text("".join(lines[:8]) + lines[8][:15])
    study2, sim2 = counted()
    again, summ2 = run_chunk(study2, rows, 1, journal=jpath)
    assert sorted(sim2.calls) == sorted(set(range(20)) - {int(json.loads(x)["run_id"])
                                                          for x in lines[1:8]})
    assert summ2["resumed"] == 7
    pd.testing.assert_frame_equal(again, full)
    assert again.to_csv(index=False) == full.to_csv(index=False)  # bit-identical values


def test_journal_of_other_settings_is_not_reused(tmp_path: Path) -> None:
    study, _ = counted()
    rows = make_design(study, 1)
    jpath = tmp_path / "j.jsonl"
    run_chunk(study, rows, 1, journal=jpath)
    other, sim = counted({**ROSEN, "simulator": {"type": "rosenbrock",
                                                 "options": {"noise_sd": 0.2}}})
    run_chunk(other, rows, 1, journal=jpath)
    assert len(sim.calls) == 20  # settings changed: everything simulated again
    study3, sim3 = counted()
    run_chunk(study3, rows, 2, journal=jpath)  # another seed
    assert len(sim3.calls) == 20
    study4, sim4 = counted()
    run_chunk(study4, rows, 2, journal=jpath, threads=4)  # threads change nothing
    assert sim4.calls == []
    moved, sim5 = counted()
    run_chunk(moved, rows.assign(x=rows["x"] + 0.01), 2, journal=jpath)  # other rows
    assert len(sim5.calls) == 20


def test_journal_location_is_not_beside_the_declared_outputs() -> None:
    assert journal_path("results/s/chunks/chunk_3.csv") == \
        Path("results/s/chunks/.journal/chunk_3.jsonl")


def test_misspelled_output_key_stops_the_chunk_after_one_run(tmp_path: Path) -> None:
    cfg = counting_config(tmp_path, n=12, chunk_size=12, threads=3, sleep=0.0, output_key="Q")
    study = build_study(load_config(cfg), "count")
    rows = make_design(study, 5)
    with pytest.raises(DataError, match=r"first run \(run_id 0\) failed with parse_error.*"
                       r"'Q' not found"):
        run_chunk(study, rows, 5, threads=3, journal=tmp_path / "j.jsonl")
    # two runs (the second tells wrong settings from an input-dependent failure), not twelve
    assert started(tmp_path) == [0, 1]


def test_at_most_threads_runs_in_flight_and_all_done_once(tmp_path: Path) -> None:
    cfg = counting_config(tmp_path, n=9, chunk_size=9, threads=3, sleep=0.2)
    study = build_study(load_config(cfg), "count")
    rows = make_design(study, 5)
    out, summ = run_chunk(study, rows, 5, threads=3, journal=tmp_path / "j.jsonl")
    assert sorted(started(tmp_path)) == list(range(9))
    x, y = out["x"].to_numpy(), out["y"].to_numpy()
    np.testing.assert_allclose(out["q"], (x - 0.3) ** 2 + y, rtol=1e-12)
    assert summ["ok"] == 9
    # 8 runs after the probe, 0.2 s each, 3 at a time: >= 3 waves (0.6 s) of wall time
    assert summ["seconds"] >= 0.2 + 3 * 0.2
    # CPU of the child processes is counted (sh + sleep + awk per run, > 0)
    assert summ["cpu_seconds"] > 0


def test_progress_lines_show_counts_and_eta(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    p = Progress("s chunk 0", total=10, resumed=2, every_s=10.0, clock=lambda: now[0])
    for s in ("ok", "ok"):
        p.add(s)
    with caplog.at_level(logging.INFO, logger="simcalib.study.simulation"):
        for i, s in enumerate(["ok", "error", "ok", "ok"]):
            now[0] = 2.0 * (i + 1)
            p.add(s)
            p.maybe_log()
    lines = [r.getMessage() for r in caplog.records]
    # 3/10 at 2 s crosses a tenth: logged; 4/10 at 4 s likewise; every tenth, >= 1 s apart
    assert lines[0] == ("s chunk 0: 3/10 runs (3 ok, 0 failed, 2 resumed from the journal), "
                        "2 s elapsed, ETA 14 s")
    assert lines[-1].startswith("s chunk 0: 6/10 runs (5 ok, 1 failed")
    assert lines[-1].endswith("8 s elapsed, ETA 8 s")  # 4 new runs in 8 s, 4 left


def test_summary_counts_warnings_and_names_failures() -> None:
    df = pd.DataFrame({"status": ["ok", "ok", "ok", "parse_error", "parse_error", "error"],
                       "message": ["", "stderr: warning: seed truncated",
                                   "stderr: warning: seed truncated", "key 'Q' not found",
                                   "key 'Q' not found", "exit status 1"]})
    s = chunk_summary(df, 1.0, 2.5)
    assert (s["runs"], s["ok"], s["failures"], s["warnings"]) == (6, 3, 3, 2)
    assert s["warning_messages"] == ["stderr: warning: seed truncated"]
    assert s["failure_examples"] == {"error": "exit status 1", "parse_error": "key 'Q' not found"}
    assert s["cpu_seconds"] == 2.5
    assert failure_digest(df) == ("3 of 6 runs failed; most often parse_error (2): "
                                  "key 'Q' not found")


def test_training_on_too_few_rows_names_the_failure() -> None:
    from simcalib.metamodel.training import train_metamodel

    df = pd.DataFrame({"x": np.linspace(0, 1, 12), "q": np.nan,
                       "status": ["missing_output"] * 9 + ["ok"] * 3,
                       "message": ["output file 'Summary0' not written"] * 9 + [""] * 3})
    df.loc[9:, "q"] = 1.0
    with pytest.raises(DataError, match=r"only 3 usable rows .*\(9 of 12 runs failed; most "
                       r"often missing_output \(9\): output file 'Summary0' not written"):
        train_metamodel(df, ["x"], ["q"], {}, 1)


def test_max_parallel_caps_the_threads(tmp_path: Path) -> None:
    cfg = counting_config(tmp_path, n=4, chunk_size=4, threads=4, sleep=0.2)
    config = load_config(cfg)
    config["studies"]["count"]["simulator"]["options"]["max_parallel"] = 1
    study = build_study(config, "count")
    _, summ = run_chunk(study, make_design(study, 5), 5, threads=4)
    assert summ["ok"] == 4 and summ["seconds"] >= 4 * 0.2  # one at a time


def test_report_runtime_uses_the_chunks_own_cpu_count(tmp_path: Path) -> None:
    from simcalib.report.build import collect_benchmarks, runtime_table

    rules = tmp_path / "results" / "benchmarks" / "rules" / "s"
    rules.mkdir(parents=True)
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for k, cpu in ((0, 0.5), (1, 0.7)):
        (rules / f"sim_run_{k}.tsv").write_text(head + f"3.0\t0:00:03\t50\t1\t1\t1\t0\t0\t"
                                                       f"10\t{cpu}\n")
    (rules / "design.tsv").write_text(head + "1.0\t0:00:01\t50\t1\t1\t1\t0\t0\t10\t0.4\n")
    chunks = tmp_path / "results" / "s" / "chunks"
    chunks.mkdir(parents=True)
    (chunks / "chunk_0.json").write_text(json.dumps({"cpu_seconds": 2.25}))  # with children
    (chunks / "chunk_1.json").write_text(json.dumps({"cpu_seconds": 0.1}))  # never lower
    rt = runtime_table(collect_benchmarks(tmp_path / "results" / "benchmarks" / "rules"))
    cpu = dict(zip(rt["kind"], rt["cpu_s_total"], strict=True))
    assert cpu["s/sim_run_N"] == pytest.approx(2.25 + 0.7)
    assert cpu["s/design"] == pytest.approx(0.4)
