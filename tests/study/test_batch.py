"""``simcalib batch`` (calibration.one_job): a study's calibration verbs run one after
another in one process write the bytes their own processes write, each member's output
goes to its own log, and a failing member neither stops the others nor goes unnamed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcalib.cli import main
from simcalib.commands.batch import load_plan
from simcalib.errors import ConfigError
from tests.cal_fixtures import rosen_calibration

SEED = 11
CFG = {
    "simulator": {"type": "rosenbrock", "options": {"noise_rel": 0.1}},
    "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                   "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
    "contexts": {"a": {"values": [5, 10]}, "b": {"values": [10, 20]}},
    "constraints": [],
    "design": {"method": "sobol", "n": 40, "per_level": True},
    "targets": {"n": 3},
}


@pytest.fixture(scope="module")
def common(tmp_path_factory) -> list[str]:
    """The study's shared verb arguments (its files in a module-wide folder)."""
    return rosen_calibration(tmp_path_factory.mktemp("batch"), CFG, SEED, budget=6)


def _members(common: list[str], out: Path) -> list[list[str]]:
    """cal-anchors, then cal-run adaptive (trains: PyTorch state) and pts from them."""
    argv = [["cal-anchors", *common, "--output", str(out / "anchors.csv")]]
    for s in ("adaptive", "pts"):
        argv.append(["cal-run", *common, "--anchors", str(out / "anchors.csv"),
                     "--strategy", s, "--output", str(out / f"{s}.csv"),
                     "--output-runs", str(out / f"runs_{s}.csv")])
    return argv


@pytest.mark.slow
def test_batch_writes_the_bytes_of_separate_processes(common: list[str], tmp_path: Path
                                                      ) -> None:
    alone, batch = tmp_path / "alone", tmp_path / "batch"
    alone.mkdir()
    batch.mkdir()
    for argv in _members(common, alone):   # each its own interpreter, as before
        proc = subprocess.run([sys.executable, "-m", "simcalib", *argv], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    plan = [{"argv": a, "log": str(batch / f"log{i}.txt")}
            for i, a in enumerate(_members(common, batch))]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert main(["batch", "--plan", f"@{tmp_path / 'plan.json'}"]) == 0
    for name in ("anchors.csv", "adaptive.csv", "runs_adaptive.csv", "pts.csv", "runs_pts.csv"):
        assert (alone / name).read_bytes() == (batch / name).read_bytes(), name
    # each member's log holds its own lines (its progress and its summary line)
    logs = [(batch / f"log{i}.txt").read_text() for i in range(3)]
    assert "OP anchors" in logs[0] and "adaptive" not in logs[0]
    assert "rosen adaptive:" in logs[1] and "rosen pts:" in logs[2]


def test_a_failing_member_is_named_and_the_others_run(common: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    members = _members(common, tmp_path)
    bad = [*members[1][:-4], "--output", str(tmp_path / "bad.csv")]
    bad[bad.index("--anchors") + 1] = str(tmp_path / "no_such_anchors.csv")
    plan = [{"argv": bad, "log": str(tmp_path / "bad.log")},
            {"argv": members[0], "log": str(tmp_path / "anchors.log")}]
    rc = main(["batch", "--plan", json.dumps(plan)])
    assert rc == 1
    assert (tmp_path / "anchors.csv").exists()            # the second member still ran
    assert not (tmp_path / "bad.csv").exists()
    assert "no_such_anchors.csv" in (tmp_path / "bad.log").read_text()
    out = capsys.readouterr()
    assert "1 member(s) failed" in out.err and "bad.log" in out.err


@pytest.mark.parametrize(("plan", "where"), [
    ("[]", "--plan"),
    ('{"argv": ["cal-run"]}', "--plan"),
    ('[{"argv": []}]', "--plan[0].argv"),
    ('[{"argv": ["batch", "--plan", "[]"]}]', "--plan[0].argv"),
    ('[{"argv": ["cal-run"], "log": 3}]', "--plan[0].log"),
    ("[{", "--plan"),
])
def test_bad_plans_name_the_offending_key(plan: str, where: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_plan(plan)
    assert where in str(exc.value)


def _shell_commands(workdir: Path, cfg: Path) -> list[str]:
    """The shell commands a dry run of ``cfg`` would execute (every job: empty dir)."""
    from tests.conftest import run_snakemake

    proc = run_snakemake(workdir, "-n", "-p", configfile=cfg)
    lines = [line.strip().removeprefix("Shell command: ")
             for line in (proc.stdout + proc.stderr).splitlines()]
    return [line for line in lines if line.startswith("python -m simcalib ")]


@pytest.mark.slow
def test_the_plan_runs_the_commands_of_the_per_strategy_jobs(tmp_path: Path) -> None:
    """One job per study runs exactly the verbs and arguments its jobs would run (the
    plan is built by functions of its own, so this guards against the two drifting)."""
    import shlex

    import yaml

    from tests.conftest import TINY

    cfg = yaml.safe_load(TINY.read_text())
    cal = cfg["studies"]["epidemic"]["calibration"]
    assert cal.get("one_job") is True   # the tiny config runs epidemic as one job
    cal["one_job"] = False
    per_job_cfg = tmp_path / "per_job.yaml"
    per_job_cfg.write_text(yaml.safe_dump(cfg, sort_keys=False))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    per_job = _shell_commands(tmp_path / "a", per_job_cfg)
    one_job = _shell_commands(tmp_path / "b", TINY)

    def argv(cmd: str) -> tuple[str, ...]:
        words = shlex.split(cmd.split(" > ")[0])
        return tuple(words[3:])   # after "python -m simcalib"

    expected = {argv(c) for c in per_job if "--study epidemic " in c or
                "results/epidemic/" in c and c.split()[3] in ("cal-summary", "cal-sweep")}
    batches = [c for c in one_job if c.split()[3] == "batch"]
    assert len(batches) == 1
    plan = json.loads(shlex.split(batches[0].split(" > ")[0])[-1])
    got = {tuple(m["argv"]) for m in plan}
    assert len(got) == len(plan) >= 10   # anchors, strategies, sweep, tables
    # the study's calibration commands: every one of them, and nothing else
    cal_verbs = ("cal-anchors", "cal-run", "cal-summary", "cal-sweep", "cal-contexts",
                 "cal-posterior")
    assert got == {a for a in expected if a[0] in cal_verbs}
    assert not any(argv(c)[0] in cal_verbs and "--study epidemic " in c for c in one_job)
