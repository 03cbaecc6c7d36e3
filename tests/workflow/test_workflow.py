"""The whole workflow on the tiny config, end to end: every stage's files appear, a
second run recomputes nothing, and a config change reruns exactly what it touches."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, TINY, run_snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workflow_dir(tiny_dag: Path) -> Path:
    """The session's tiny DAG run (tests/conftest.py), shared with the byte-identity
    test; tests here only read it or plan dry runs against it."""
    return tiny_dag


def _jobs_planned(workdir: Path, cfg: Path | None, *extra: str) -> dict[str, int]:
    """Rule name -> job count that a dry run would execute (``cfg`` None: no
    --configfile, i.e. the Snakefile's default config/config.yaml)."""
    if cfg is None:
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                               "-d", str(workdir), "--cores", "2", *extra, "-n", "--quiet",
                               "rules"], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
    else:
        proc = run_snakemake(workdir, *extra, "-n", "--quiet", "rules", configfile=cfg)
    counts: dict[str, int] = {}
    in_table = False
    for line in proc.stdout.splitlines():
        if re.match(r"^\s*job\s+count", line):
            in_table = True
            continue
        m = re.match(r"^\s*([A-Za-z_][\w]*)\s+(\d+)\s*$", line)
        if in_table and m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def test_every_study_has_dataset_and_targets(workflow_dir: Path) -> None:
    cfg = yaml.safe_load(TINY.read_text())
    for study, scfg in cfg["studies"].items():
        data = pd.read_csv(workflow_dir / "results" / study / "dataset.csv")
        names = list(scfg["parameters"]) + list(scfg.get("contexts", {}))
        assert {"run_id", *names, "status", "message"} <= set(data.columns)
        assert (data["status"] == "ok").mean() > 0.9
        targets = pd.read_csv(workflow_dir / "results" / study / "targets.csv")
        if "file" in scfg["targets"]:      # observed: the file's rows, no true inputs
            obs = pd.read_csv(REPO / scfg["targets"]["file"])
            assert len(targets) == len(obs)
            assert not set(scfg["parameters"]) & set(targets.columns)
            assert {"target_id", *scfg.get("contexts", {}), "status"} <= set(targets.columns)
            continue
        assert len(targets) == scfg["targets"]["n"]
        assert {"target_id", *names, "status"} <= set(targets.columns)


def test_hardening_case_reads_the_fe_studies_runs(workflow_dir: Path) -> None:
    """Paper 2's hardening case on the FE specimen: its data are the tension_fe studies'
    runs (the simulation stage's datasets), step by step, and its tables follow."""
    res = workflow_dir / "results"
    data = pd.read_csv(res / "multisource" / "hardening" / "data.csv")
    for src, study in (("s0", "tension_holloman"), ("s1", "tension_voce1")):
        runs = pd.read_csv(res / study / "dataset.csv").sort_values("run_id")
        ok = runs[runs.status == "ok"]
        rows = data[data.source == src]
        assert rows.specimen.nunique() == len(ok)
        first = rows[rows.specimen == rows.specimen.min()].sort_values("u")
        assert first.F.to_numpy() == pytest.approx(
            ok.iloc[0][[f"F_s{k:02d}" for k in range(1, 5)]].to_numpy(float))
        assert first.uz07.to_numpy() == pytest.approx(
            ok.iloc[0][[f"uz07_s{k:02d}" for k in range(1, 5)]].to_numpy(float))
    t4 = pd.read_csv(res / "multisource" / "hardening" / "table4_rrmse_step1.csv")
    assert {"scenario", "predictor", "output", "rrmse"} <= set(t4.columns)
    assert set(t4.output) == {"ux", "uy", "uz", "F"} and t4.rrmse.notna().all()
    paper = t4[(t4.scenario == "all") & (t4.predictor == "s0")].set_index("output")
    assert paper.loc["uz", "paper_rrmse"] == pytest.approx(0.02041)   # Table 4 beside ours
    assert (res / "multisource" / "hardening" / "fig_fields.png").stat().st_size > 10_000
    lsq = pd.read_csv(res / "multisource" / "hardening" / "baseline_lsq.csv")
    assert set(lsq.source) == {"s1", "s2"} and lsq["mean"].notna().all()


def test_second_run_recomputes_nothing(workflow_dir: Path) -> None:
    proc = run_snakemake(workflow_dir, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def _changed_config(tmp: Path, edit) -> Path:  # noqa: ANN001
    cfg = copy.deepcopy(yaml.safe_load(TINY.read_text()))
    edit(cfg)
    path = tmp / "changed.yaml"
    # keep the key order: parameters' order is meaningful and part of the params
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_metamodel_width_change_retrains_without_resimulating(workflow_dir: Path,
                                                              tmp_path: Path) -> None:
    def edit(cfg: dict) -> None:
        cfg["studies"]["rosenbrock"]["metamodel"]["hidden"] = [12, 12]

    jobs = _jobs_planned(workflow_dir, _changed_config(tmp_path, edit))
    assert jobs.get("mm_train", 0) == 1, jobs
    for rule in ("sim_design", "sim_run", "sim_merge", "sim_targets"):
        assert rule not in jobs, f"{rule} would rerun: {jobs}"


def test_proximity_change_does_not_retrain(workflow_dir: Path, tmp_path: Path) -> None:
    def edit(cfg: dict) -> None:
        cfg["studies"]["rosenbrock"]["calibration"]["proximity"] = 0.123

    jobs = _jobs_planned(workflow_dir, _changed_config(tmp_path, edit))
    assert jobs.get("cal_run", 0) >= 1, jobs
    for rule in ("mm_train", "sim_run", "sim_design", "mm_optimize"):
        assert rule not in jobs, f"{rule} would rerun: {jobs}"


def test_one_job_study_runs_its_calibration_in_one_batch(workflow_dir: Path,
                                                          tmp_path: Path) -> None:
    """calibration.one_job (tiny: epidemic): one `simcalib batch` job made the study's
    anchors, records, sweep and tables, each member logging where its own job would;
    a proximity change reruns that one job and nothing upstream."""
    logs = workflow_dir / "results" / "logs" / "epidemic"
    batch_log = (logs / "cal_study.log").read_text()
    assert re.search(r"(\d+) of \1 members done", batch_log), batch_log
    assert "epidemic pts: " in (logs / "calibration" / "cal_run_pts.log").read_text()
    assert "R=1" in batch_log and "cal-sweep" in batch_log
    base = workflow_dir / "results" / "epidemic" / "calibration"
    for name in ("anchors.csv", "rs.csv", "pts.csv", "summary.csv", "sweep.csv",
                 "sweep/R1/pts.csv"):
        assert (base / name).exists(), name

    def edit(cfg: dict) -> None:
        cfg["studies"]["epidemic"]["calibration"]["proximity"] = 0.123

    jobs = _jobs_planned(workflow_dir, _changed_config(tmp_path, edit))
    assert jobs.get("cal_study_epidemic", 0) == 1, jobs
    for rule in ("mm_train", "sim_run", "cal_run", "cal_anchors", "cal_summary"):
        assert rule not in jobs, f"{rule} would rerun: {jobs}"


def test_summary_and_html_report(workflow_dir: Path) -> None:
    summary = (workflow_dir / "results" / "report" / "summary.md").read_text()
    for part in ("What to trust", "Metamodel calibration: study", "paper 2's examples",
                 "Bayesian calibration, KOH vs MOS", "Runtime"):
        assert part in summary, part
    runtime = pd.read_csv(workflow_dir / "results" / "report" / "runtime.csv")
    assert runtime["jobs"].sum() > 10 and (runtime["wall_s_total"] > 0).all()
    out = workflow_dir / "report.html"
    run_snakemake(workflow_dir, "--report", str(out))
    html = out.read_text(errors="replace")
    for category in ("1 Metamodel calibration", "2 Multi-source calibration (iPro-NC)",
                     "3 Bayesian calibration (KOH vs MOS)", "0 Read me first"):
        assert category in html, category
    assert "What to read first" in html          # the first page (workflow.rst)
    pages = _embedded_html(html)
    # the summary tables are in the report, as tables: the read-me-first page and
    # one table page per paper
    assert {"summary.html", "paper1_rosenbrock.html", "paper2.html",
            "paper3.html"} <= set(pages), sorted(pages)
    first = pages["summary.html"]
    for text in ("test R²", "OP per target", "Calibration strategies", "worst R-hat",
                 "RRMSE", "Runtime"):
        assert text in first, text
    summ = pd.read_csv(workflow_dir / "results" / "rosenbrock" / "calibration" / "summary.csv")
    row = summ.iloc[0]
    assert re.search(rf"<td>{row.strategy}</td>\s*<td>{row.median_error:.4g}</td>",
                     pages["paper1_rosenbrock.html"]), "strategy table row missing"
    assert "<table" in pages["paper3.html"] and "worst R-hat" in pages["paper3.html"]


def _embedded_html(report_html: str) -> dict[str, str]:
    """The HTML files a Snakemake report embeds (base64 data URIs), by file name."""
    import base64

    found = re.findall(r"data:text/html;charset=[^;]+;filename=([^;]+);base64,"
                       r"([A-Za-z0-9+/=]+)", report_html)
    return {name: base64.b64decode(data).decode() for name, data in found}


def test_observed_study_calibrates_without_truth(workflow_dir: Path) -> None:
    cal = workflow_dir / "results" / "rosenbrock_obs" / "calibration"
    summ = pd.read_csv(cal / "summary.csv")
    assert list(summ["strategy"]) == ["rs", "op", "pts"]
    assert "median_distance" not in summ
    assert {"metamodel_min_test_r2", "metamodel_ok", "op_unproven"} <= set(summ.columns)
    rec = pd.read_csv(cal / "pts.csv")
    assert "distance" not in rec and "true_x" not in rec
    assert (rec["runs"] == 4).all() and rec["error"].notna().all()
    # Delta in measurement sds (sd_f = 1 in the file): |S(x) - z|
    assert ((rec["sim_f"] - rec["target_f"]).abs() - rec["error"]).abs().max() < 1e-9
    summary = (workflow_dir / "results" / "report" / "summary.md").read_text()
    assert "rosenbrock_obs" in summary and "observed" in summary


def test_seed_change_reruns_every_seeded_job(workflow_dir: Path) -> None:
    """The seed reaches jobs only through params, so --config seed=... reruns them."""
    jobs = _jobs_planned(workflow_dir, TINY, "--config", "seed=123")
    n_studies = len(yaml.safe_load(TINY.read_text())["studies"])
    assert jobs.get("sim_design", 0) == n_studies, jobs
    for rule in ("sim_run", "sim_targets", "mm_train", "cal_anchors", "cal_run", "bayes_run"):
        assert jobs.get(rule, 0) >= 1, f"{rule} would not rerun: {jobs}"
    for path in [REPO / "Snakefile", *(REPO / "workflow" / "rules").glob("*.smk")]:
        assert "{config" not in path.read_text(), f"{path}: a config value in a shell command"


def test_configfile_stands_alone(tmp_path: Path) -> None:
    """--configfile runs exactly that config, even where config/config.yaml exists;
    without --configfile the default config is used."""
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    tiny = yaml.safe_load(TINY.read_text())["studies"]
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["studies"]
    assert len(default) > len(tiny)
    jobs = _jobs_planned(tmp_path, TINY)
    assert jobs["sim_design"] == len(tiny), jobs
    jobs = _jobs_planned(tmp_path, None)
    assert jobs["sim_design"] == len(default), jobs
    # --config overrides still apply on top of --configfile
    jobs = _jobs_planned(tmp_path, TINY, "--config", "bayes={settings: []}")
    assert "bayes_run" not in jobs and jobs["sim_design"] == len(tiny), jobs


def test_own_config_runs_no_paper_demos(tmp_path: Path) -> None:
    """A config with only the user's study plans only that study's jobs (and the
    summary): no paper-2 or paper-3 demo jobs come from the schema's defaults."""
    own = tmp_path / "my.yaml"
    own.write_text(yaml.safe_dump({
        "seed": 1,
        "studies": {"mine": {
            "simulator": {"type": "rosenbrock"},
            "parameters": {"x": {"lower": -2.0, "upper": 2.0},
                           "y": {"lower": -1.0, "upper": 3.0}},
            "design": {"method": "sobol", "n": 32}, "targets": {"n": 2},
            "metamodel": {"hidden": [8]}}}}))
    jobs = _jobs_planned(tmp_path, own)
    assert jobs["sim_design"] == 1 and jobs["mm_train"] == 1, jobs
    assert not any(r.startswith(("bayes", "ms_")) for r in jobs), jobs


def test_study_target_builds_one_study(tmp_path: Path) -> None:
    jobs = _jobs_planned(tmp_path, TINY, "results/rosenbrock_obs/all.done")
    assert jobs["sim_design"] == 1 and jobs["cal_summary"] == 1 and jobs["study_all"] == 1
    assert not any(r.startswith(("bayes", "ms_", "report")) for r in jobs), jobs


def _op_job(tmp: Path, cfg: Path, cores: str) -> tuple[str, str]:
    """(job description, shell command) that a dry run at ``--cores cores`` prints
    for the rosenbrock OP job."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp),
         "--configfile", str(cfg), "--cores", cores, "-n", "-p",
         "results/rosenbrock/op/op.csv"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    job = out[out.index("rule mm_optimize:"):]
    job = job[:job.index("\n\n")] if "\n\n" in job else job
    shell = next(ln for ln in out.splitlines() if "simcalib mm-optimize" in ln)
    return job, shell


def test_highs_op_job_takes_one_core_and_its_threads_from_the_option_set(
        tmp_path: Path) -> None:
    """A HiGHS OP job reserves one core (its branch and bound uses one: a two-core
    job waits until no one-core job is ready) and passes the option set's threads,
    whatever --cores grants, so the OP answer does not depend on --cores."""
    def edit(cfg: dict) -> None:
        cfg["solvers"]["highs-default"]["threads"] = 2

    job, shell = _op_job(tmp_path, _changed_config(tmp_path, edit), "2")
    # the solver's threads travel in the params only: no --threads from the cores
    assert '"threads":2' in shell and "--threads" not in shell, shell
    assert "threads: 2" not in job, job
