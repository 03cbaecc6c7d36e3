"""A real SLURM cluster run (../shared/ci/slurm): the tiny workflow submitted through
the profile gives the same results as a local run, and its jobs went through sbatch
(sacct lists them).  Skipped, with the reason, where the cluster cannot be started
(not root, no apt-get, no start script)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SLURM_DIR = REPO.parent / "shared" / "ci" / "slurm"
PROFILE = REPO / "tests" / "profiles" / "slurm-ci"

CONFIG = {
    "seed": 5,
    "threads": 1,
    "studies": {
        "rosenbrock": {
            "simulator": {"type": "rosenbrock", "options": {"noise_sd": 0.5}},
            "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                           "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
            "contexts": {"a": {"values": [5, 10]}, "b": {"values": [10]}},
            "design": {"n": 40, "chunk_size": 40},
            "targets": {"n": 2},
        }
    },
}
TARGETS = ["results/rosenbrock/dataset.csv", "results/rosenbrock/targets.csv"]


def _skip_reason() -> str | None:
    if os.environ.get("SIMCALIB_SKIP_SLURM"):
        return "SIMCALIB_SKIP_SLURM is set"
    if not (SLURM_DIR / "start-slurm.sh").exists():
        return f"no SLURM start script at {SLURM_DIR}"
    if os.geteuid() != 0:
        return "starting a SLURM cluster needs root"
    if shutil.which("apt-get") is None:
        return "starting a SLURM cluster needs apt-get (Debian/Ubuntu)"
    return None


@pytest.fixture(scope="module")
def cluster() -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    # mariadb-server-core does not create the 'mysql' system user the script runs
    # MariaDB as (the full mariadb-server package would); create it if missing.
    if subprocess.run(["id", "mysql"], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", "mysql"], check=True)
    start = subprocess.run(["bash", str(SLURM_DIR / "start-slurm.sh")], capture_output=True,
                           text=True, timeout=900)
    if start.returncode != 0:
        pytest.fail(f"start-slurm.sh failed:\n{start.stdout[-3000:]}\n{start.stderr[-3000:]}")
    yield
    subprocess.run(["bash", str(SLURM_DIR / "stop-slurm.sh")], capture_output=True, timeout=300)


def _snakemake(workdir: Path, cfg: Path, *extra: str, timeout: int = 900
               ) -> subprocess.CompletedProcess[str]:
    cmd = ["timeout", "-k", "10", "-s", "INT", str(timeout), sys.executable, "-m", "snakemake",
           "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(cfg),
           *extra, *TARGETS]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)


def test_slurm_run_matches_local_run(cluster: None, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    slurm_dir, local_dir = tmp_path / "slurm", tmp_path / "local"
    slurm_dir.mkdir()
    local_dir.mkdir()
    t0 = time.strftime("%Y-%m-%dT%H:%M:%S")
    started = time.perf_counter()
    proc = _snakemake(slurm_dir, cfg, "--profile", str(PROFILE))
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr[-5000:]
    print(f"SLURM run of the test workflow: {seconds:.1f} s")

    sacct = subprocess.run(["sacct", "-X", "-n", "-P", "-S", t0, "--format=JobID,State"],
                           capture_output=True, text=True, check=True).stdout.split()
    states = [line.split("|")[1] for line in sacct if "|" in line]
    # non-local jobs: sim_run (1 chunk) + sim_targets = 2 at least
    assert len(states) >= 2, f"sacct lists {sacct}"
    assert all(s == "COMPLETED" for s in states), sacct

    local = _snakemake(local_dir, cfg, "--cores", "2")
    assert local.returncode == 0, local.stderr[-5000:]
    for target in TARGETS:
        assert (slurm_dir / target).read_bytes() == (local_dir / target).read_bytes(), target


def test_slurm_profile_with_missing_partition_fails_clearly(cluster: None, tmp_path: Path
                                                            ) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    bad_profile = tmp_path / "profile"
    bad_profile.mkdir()
    prof = yaml.safe_load((PROFILE / "config.yaml").read_text())
    prof["default-resources"]["slurm_partition"] = "no_such_partition"
    (bad_profile / "config.yaml").write_text(yaml.safe_dump(prof))
    wd = tmp_path / "wf"
    wd.mkdir()
    proc = _snakemake(wd, cfg, "--profile", str(bad_profile), timeout=300)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "no_such_partition" in text or "invalid partition" in text.lower(), text[-3000:]
    assert not (wd / TARGETS[0]).exists()
