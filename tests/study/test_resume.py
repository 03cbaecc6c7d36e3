"""Kill a chunk mid-way, then resume.

Workflow level: the workflow finishes the other chunks, the killed chunk leaves no
file (half-written or otherwise), and the rerun recomputes only the killed chunk.
Run level: a chunk killed by SIGKILL, SIGINT or SIGTERM and rerun redoes at most
``threads`` runs (the ones in flight), counted by a simulator that records each
start, and ends with the same bytes as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from simcalib.config import load_config
from simcalib.io import write_csv
from simcalib.study import build_study
from simcalib.study.simulation import make_design
from tests.chunk_fixtures import counting_config, started
from tests.conftest import REPO, default_signals

CONFIG = {
    "seed": 3,
    "studies": {
        "slow": {
            "simulator": {"type": "python", "options": {
                "function": "tests.sim_fixtures:slow_quadratic", "path": str(REPO),
                "outputs": ["q"], "options": {"sleep": 0.75}}},
            "parameters": {"x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}},
            "design": {"n": 12, "chunk_size": 4, "method": "uniform"},
            "targets": {"n": 1},
        }
    },
}


def _cmd(workdir: Path, cfg: Path) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d",
            str(workdir), "--configfile", str(cfg), "--cores", "1", "--keep-going",
            "results/slow/dataset.csv"]


def _find_chunk_job(root: psutil.Process) -> tuple[psutil.Process, str] | None:
    for child in root.children(recursive=True):
        try:
            cmd = child.cmdline()
        except psutil.Error:
            continue
        if "sim-run" in cmd and "--chunk" in cmd and "python" in " ".join(cmd[:2]):
            return child, cmd[cmd.index("--chunk") + 1]
    return None


@pytest.mark.slow
def test_kill_one_chunk_job_and_resume(tmp_path: Path) -> None:
    cfg = tmp_path / "slow.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    wd = tmp_path / "wf"
    wd.mkdir()
    chunks = wd / "results" / "slow" / "chunks"
    proc = subprocess.Popen(_cmd(wd, cfg), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    killed = None
    deadline = time.time() + 240
    while killed is None and time.time() < deadline and proc.poll() is None:
        found = _find_chunk_job(root)
        if found is not None:
            job, chunk = found
            time.sleep(0.5)
            job.kill()  # SIGKILL the chunk job: no chance to clean up
            killed = chunk
        time.sleep(0.05)
    assert killed is not None, "never saw a chunk job running"
    proc.wait(timeout=300)
    assert proc.returncode != 0  # the killed job failed, the others finished (--keep-going)
    assert not (chunks / f"chunk_{killed}.csv").exists()
    assert not [p for p in chunks.iterdir() if p.name.endswith(".tmp")], "half-written file"
    done = {p.name: p.stat().st_mtime_ns for p in chunks.glob("chunk_*.csv")}
    assert len(done) == 2
    for name in done:
        assert len(pd.read_csv(chunks / name)) == 4

    rerun = subprocess.run(_cmd(wd, cfg), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    for name, mtime in done.items():
        assert (chunks / name).stat().st_mtime_ns == mtime, f"{name} was recomputed"
    data = pd.read_csv(wd / "results" / "slow" / "dataset.csv")
    assert list(data.run_id) == list(range(12)) and (data.status == "ok").all()


# ---- resume per run: kill the chunk command itself, count the redone runs ----------

THREADS = 3
N_RUNS = 18


def _simulate_cmd(cfg: Path, wd: Path) -> list[str]:
    return [sys.executable, "-m", "simcalib.cli", "sim-run", "--study", "count", "--config",
            str(cfg), "--design", str(wd / "design.csv"), "--chunk", "0", "--threads",
            str(THREADS), "--output", str(wd / "chunks" / "chunk_0.csv"), "--output-meta",
            str(wd / "chunks" / "chunk_0.json")]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


def _design(cfg: Path, wd: Path) -> None:
    study = build_study(load_config(cfg), "count")
    write_csv(make_design(study, 5), wd / "design.csv")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The chunk of an uninterrupted run."""
    tmp = tmp_path_factory.mktemp("ref")
    cfg = counting_config(tmp, n=N_RUNS, chunk_size=N_RUNS, threads=THREADS, sleep=0.5)
    _design(cfg, tmp)
    subprocess.run(_simulate_cmd(cfg, tmp), check=True, env=_env(), capture_output=True)
    assert sorted(started(tmp)) == list(range(N_RUNS))  # each run once
    return (tmp / "chunks" / "chunk_0.csv").read_bytes()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
@pytest.mark.slow
def test_killed_chunk_redoes_at_most_threads_runs(tmp_path: Path, reference: bytes,
                                                  sig: signal.Signals) -> None:
    cfg = counting_config(tmp_path, n=N_RUNS, chunk_size=N_RUNS, threads=THREADS, sleep=0.5)
    _design(cfg, tmp_path)
    proc = subprocess.Popen(_simulate_cmd(cfg, tmp_path), env=_env(), start_new_session=True,
                            preexec_fn=default_signals,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while len(started(tmp_path)) < 8 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the chunk finished before it could be killed"
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)  # the job's whole process group, no cleanup
    else:
        proc.send_signal(sig)
    t0 = time.time()
    _, err = proc.communicate(timeout=30)
    stop_s = time.time() - t0
    assert proc.returncode != 0
    if sig != signal.SIGKILL:
        assert stop_s < 5, f"took {stop_s:.1f} s to stop: runs in flight were not killed"
    chunk = tmp_path / "chunks" / "chunk_0.csv"
    assert not chunk.exists()
    # a SIGKILL leaves the runs in flight orphaned (they run in their own sessions);
    # let them reach the counter before reading it
    time.sleep(0.5 if sig == signal.SIGKILL else 0.0)
    first = started(tmp_path)
    assert 8 <= len(first) < N_RUNS

    rerun = subprocess.run(_simulate_cmd(cfg, tmp_path), env=_env(), capture_output=True,
                           text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    second = started(tmp_path)[len(first):]
    redone = set(first) & set(second)
    assert len(redone) <= THREADS, f"redone {sorted(redone)}"
    assert set(first) | set(second) == set(range(N_RUNS))
    assert len(second) == len(set(second))  # nothing started twice in the rerun
    assert f"{N_RUNS - len(second)} of {N_RUNS} runs already done" in rerun.stderr
    assert chunk.read_bytes() == reference  # the same values as an uninterrupted run
