"""Shared fixtures: repository paths and a helper to run Snakemake in a scratch dir."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "configs" / "tiny.yaml"


@pytest.fixture
def repo() -> Path:
    return REPO


def run_snakemake(workdir: Path, *args: str, configfile: Path = TINY, check: bool = True,
                  timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run the workflow with ``configfile`` in ``workdir`` (results land there)."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
           "--configfile", str(configfile), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny networks: one torch thread is fastest (and robust on a busy machine).
    Modules opt in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    d = tmp_path / "wf"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def default_signals() -> None:
    """``preexec_fn`` for a child a test interrupts on purpose: SIGINT and SIGTERM at
    their defaults and unblocked, whatever the pytest process inherited or an earlier
    test left behind (a child inherits ignored signals and the signal mask; in two full
    suite runs a SIGINT test then saw its child ignore the signal, never in a subset)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

