"""Shared fixtures: repository paths and a helper to run Snakemake in a scratch dir."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "configs" / "tiny.yaml"


def pytest_configure(config: pytest.Config) -> None:
    """Every Snakemake start imports the SLURM executor plugin, which asks
    ``scontrol show config`` for MinJobAge with a 10 s timeout.  On a machine with the
    SLURM client installed but no controller running (this dev machine; CI before its
    SLURM test starts one) that is ~9 s of waiting per Snakemake call, ~60 calls in the
    suite.  Put a ``scontrol`` first on PATH that gives the real one 1 s: a running
    controller answers in milliseconds, a missing one fails fast (the plugin then uses
    its default), and the SLURM tests, which start a controller, are unaffected."""
    real = shutil.which("scontrol")
    timeout = shutil.which("timeout")
    if not real or not timeout or os.environ.get("SIMCALIB_REAL_SCONTROL"):
        return
    shim = Path(tempfile.mkdtemp(prefix="simcalib-scontrol-"))
    (shim / "scontrol").write_text(f'#!/bin/sh\nexec {timeout} 1 {real} "$@"\n')
    (shim / "scontrol").chmod(0o755)
    os.environ["PATH"] = f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Work units for ``pytest -n N --dist loadgroup`` (the suite's command): a test file
    goes to one worker whole, so its module fixtures (trained nets, runs) are built once,
    and every test of the session's tiny DAG run (:func:`tiny_dag`) goes to one worker,
    so the DAG runs once.  Runs before xdist's own hook, which turns the mark into the
    unit; without ``-n`` the mark does nothing."""
    for item in items:
        group = "tiny_dag" if "tiny_dag" in getattr(item, "fixturenames", ()) else (
            item.nodeid.split("::", 1)[0])
        item.add_marker(pytest.mark.xdist_group(group))


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


@pytest.fixture(scope="session")
def tiny_dag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config's whole DAG, run once per session (~100 s on 2 cores): the
    workflow tests read it and plan dry runs against it, and the byte-identity test
    compares it with a second run.  Tests must not write under its ``results/``."""
    wd = tmp_path_factory.mktemp("tiny_dag")
    run_snakemake(wd, timeout=1500)
    return wd


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

