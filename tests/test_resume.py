"""Kill one chunk job mid-way, then resume: the workflow finishes the other chunks,
the killed chunk leaves no file (half-written or otherwise), and the rerun
recomputes only the killed chunk."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import yaml

from tests.conftest import REPO

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
