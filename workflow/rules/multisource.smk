# Multi-source calibration (iPro-NC, docs/multisource.md): the analytic example and
# the hardening-law study, each over the scenarios s0+s1, s0+s2 and all sources,
# plus the least-squares baseline and the report tables/figures.

from simcalib.multisource import params as ms_params

MS = config["multisource"]
MS_FIT_FILES = ["theta.csv", "theta_seeds.csv", "posterior.csv", "rrmse.csv",
                "predictions.csv", "latent.csv", "history.csv", "models.pt", "fit.json"]
MS_AN_REPORT = ["rrmse.csv", "rrmse_lf.csv", "theta_summary.csv", "baselines.csv",
                "fig2_posteriors.csv", "fig2_posteriors.png", "fig3_curves.csv",
                "fig3_curves.png", "fig4_latent.csv", "fig4_latent.png"]
MS_HD_REPORT = ["table3_theta_step1.csv", "table4_rrmse_step1.csv",
                "table5_rrmse_step2.csv", "theta_step2.csv", "baselines.csv",
                "fig_force.csv", "fig_force.png"]
MS_HD_STEPS = ["step1", "step2"]


wildcard_constraints:
    ms_case="analytic|hardening",
    ms_step="step1|step2",
    ms_scenario="[A-Za-z0-9][A-Za-z0-9_]*",


def ms_report_file(case, name):
    """Figures and tables of a case, registered in the HTML report (Paper 2)."""
    path = f"results/multisource/{case}/{name}"
    if name.endswith(".png") or name.startswith(("fig", "table", "rrmse", "theta")):
        return figure(path, "multisource", "Paper 2", case)
    return path


localrules:
    ms_report_analytic,
    ms_report_hardening,


def ms_fit_params(case, step=None):
    """params for ms-fit: the merged fit settings (multisource.fit, then the case's
    and the step's overrides), the scenario's sources and step-specific options, built
    by the library function `ms-fit --config` uses."""

    def fn(w):
        return as_json(ms_params.fit_params(config, case, w.ms_scenario, step))

    return fn


def ms_fit_runtime(case):
    """Minutes for a fit job (a generous estimate from the epochs and seeds)."""
    def fn(w):
        fit = {**MS["fit"], **MS[case]["fit"]}
        return max(10, int(fit["epochs"] * fit["n_seeds"] * (0.02 if case == "analytic" else 0.1) / 60) + 10)

    return fn


rule ms_data:
    output:
        data="results/multisource/{ms_case}/data.csv",
        spec="results/multisource/{ms_case}/spec.json",
        mse="results/multisource/{ms_case}/theta_mse.csv",
    params:
        cfg=lambda w: as_json(ms_params.data_params(config, w.ms_case)),
        seed=config["seed"],
    log:
        "results/logs/multisource/{ms_case}/data.log",
    benchmark:
        "results/benchmarks/rules/multisource/{ms_case}/data.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib ms-data --case {wildcards.ms_case} --params {params.cfg:q} "
        "--seed {params.seed} --output-data {output.data} --output-spec {output.spec} "
        "--output-theta-mse {output.mse} > {log} 2>&1"


rule ms_fit_analytic:
    input:
        data="results/multisource/analytic/data.csv",
        spec="results/multisource/analytic/spec.json",
        mse="results/multisource/analytic/theta_mse.csv",
    output:
        [f"results/multisource/analytic/{{ms_scenario}}/{f}" for f in MS_FIT_FILES],
    params:
        cfg=ms_fit_params("analytic"),
        seed=config["seed"],
        outdir="results/multisource/analytic/{ms_scenario}",
    log:
        "results/logs/multisource/analytic/{ms_scenario}/fit.log",
    benchmark:
        "results/benchmarks/rules/multisource/analytic/{ms_scenario}/fit.tsv"
    threads: MS["threads"]
    resources:
        mem_mb=2000,
        runtime=ms_fit_runtime("analytic"),
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib ms-fit --case analytic --scenario {wildcards.ms_scenario} "
        "--params {params.cfg:q} --seed {params.seed} --data {input.data} "
        "--spec {input.spec} --theta-mse {input.mse} --threads {threads} "
        "--output-dir {params.outdir} > {log} 2>&1"


rule ms_fit_hardening:
    input:
        data="results/multisource/hardening/data.csv",
        spec="results/multisource/hardening/spec.json",
        mse="results/multisource/hardening/theta_mse.csv",
        fixed=lambda w: (
            ["results/multisource/hardening/step1/{ms_scenario}/theta.csv"]
            if w.ms_step == "step2"
            else []
        ),
    output:
        [f"results/multisource/hardening/{{ms_step}}/{{ms_scenario}}/{f}" for f in MS_FIT_FILES],
    params:
        cfg=lambda w: ms_fit_params("hardening", w.ms_step)(w),
        seed=config["seed"],
        outdir="results/multisource/hardening/{ms_step}/{ms_scenario}",
        fixed=lambda w, input: f"--fixed {input.fixed}" if input.fixed else "",
    log:
        "results/logs/multisource/hardening/{ms_step}/{ms_scenario}/fit.log",
    benchmark:
        "results/benchmarks/rules/multisource/hardening/{ms_step}/{ms_scenario}/fit.tsv"
    threads: MS["threads"]
    resources:
        mem_mb=4000,
        runtime=ms_fit_runtime("hardening"),
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib ms-fit --case hardening/{wildcards.ms_step} "
        "--scenario {wildcards.ms_scenario} --params {params.cfg:q} --seed {params.seed} "
        "--data {input.data} --spec {input.spec} --theta-mse {input.mse} {params.fixed} "
        "--threads {threads} --output-dir {params.outdir} > {log} 2>&1"


rule ms_lsq:
    input:
        data="results/multisource/{ms_case}/data.csv",
    output:
        "results/multisource/{ms_case}/baseline_lsq.csv",
    params:
        cfg=lambda w: as_json(ms_params.data_params(config, w.ms_case)),
        seed=config["seed"],
    log:
        "results/logs/multisource/{ms_case}/lsq.log",
    benchmark:
        "results/benchmarks/rules/multisource/{ms_case}/lsq.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib ms-lsq --case {wildcards.ms_case} --params {params.cfg:q} "
        "--seed {params.seed} --data {input.data} --output {output} > {log} 2>&1"


rule ms_report_analytic:
    input:
        fits=lambda w: expand("results/multisource/analytic/{s}/{f}",
                              s=MS["analytic"]["scenarios"], f=["theta.csv", "rrmse.csv",
                              "posterior.csv", "predictions.csv", "latent.csv"]),
        mse="results/multisource/analytic/theta_mse.csv",
        lsq="results/multisource/analytic/baseline_lsq.csv",
    output:
        [ms_report_file("analytic", f) for f in MS_AN_REPORT],
    params:
        fits=lambda w: expand("results/multisource/analytic/{s}", s=MS["analytic"]["scenarios"]),
    log:
        "results/logs/multisource/analytic/report.log",
    benchmark:
        "results/benchmarks/rules/multisource/analytic/report.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib ms-report --case analytic --fits {params.fits} --theta-mse {input.mse} "
        "--lsq {input.lsq} --output-dir results/multisource/analytic > {log} 2>&1"


rule ms_report_hardening:
    input:
        fits=lambda w: expand("results/multisource/hardening/{st}/{s}/{f}", st=MS_HD_STEPS,
                              s=MS["hardening"]["scenarios"],
                              f=["theta.csv", "rrmse.csv", "predictions.csv"]),
        mse="results/multisource/hardening/theta_mse.csv",
        lsq="results/multisource/hardening/baseline_lsq.csv",
    output:
        [ms_report_file("hardening", f) for f in MS_HD_REPORT],
    params:
        fits=lambda w: expand("results/multisource/hardening/{st}/{s}", st=MS_HD_STEPS,
                              s=MS["hardening"]["scenarios"]),
    log:
        "results/logs/multisource/hardening/report.log",
    benchmark:
        "results/benchmarks/rules/multisource/hardening/report.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib ms-report --case hardening --fits {params.fits} --theta-mse {input.mse} "
        "--lsq {input.lsq} --output-dir results/multisource/hardening > {log} 2>&1"


if MS["analytic"]["enabled"]:
    ALL_TARGETS += [f"results/multisource/analytic/{f}" for f in MS_AN_REPORT]
if MS["hardening"]["enabled"]:
    ALL_TARGETS += [f"results/multisource/hardening/{f}" for f in MS_HD_REPORT]
