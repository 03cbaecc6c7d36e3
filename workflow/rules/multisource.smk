# Multi-source calibration (iPro-NC, docs/multisource.md): the analytic example and
# the hardening-law study, each over the scenarios s0+s1, s0+s2 and all sources,
# plus the least-squares baseline and the report tables/figures.


include: "helpers/multisource.smk"


wildcard_constraints:
    ms_case="analytic|hardening",
    ms_step="step1|step2",
    ms_scenario="[A-Za-z0-9][A-Za-z0-9_]*",


localrules:
    ms_report_analytic,
    ms_report_hardening,


rule ms_data:
    input:
        unpack(ms_fe_datasets),
    output:
        data="results/multisource/{ms_case}/data.csv",
        spec="results/multisource/{ms_case}/spec.json",
        mse="results/multisource/{ms_case}/theta_mse.csv",
    log:
        "results/logs/multisource/{ms_case}/data.log",
    benchmark:
        "results/benchmarks/rules/multisource/{ms_case}/data.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cfg=lambda w: as_json(ms_params.data_params(config, w.ms_case)),
        seed=config["seed"],
        datasets=lambda w, input: (
            "--datasets " + " ".join(f"{k}={v}" for k, v in input.items()) if len(input) else ""
        ),
    shell:
        "python -m simcalib ms-data --case {wildcards.ms_case} --params {params.cfg:q} "
        "--seed {params.seed} {params.datasets} --output-data {output.data} --output-spec {output.spec} "
        "--output-theta-mse {output.mse} > {log} 2>&1"


rule ms_fit_analytic:
    input:
        data="results/multisource/analytic/data.csv",
        spec="results/multisource/analytic/spec.json",
        mse="results/multisource/analytic/theta_mse.csv",
    output:
        [f"results/multisource/analytic/{{ms_scenario}}/{f}" for f in MS_FIT_FILES],
    log:
        "results/logs/multisource/analytic/{ms_scenario}/fit.log",
    benchmark:
        "results/benchmarks/rules/multisource/analytic/{ms_scenario}/fit.tsv"
    priority: PRIORITY["analytic"]
    conda:
        "../../envs/simcalib.yaml"
    threads: MS["threads"]
    resources:
        mem_mb=2000,
        runtime=ms_fit_runtime("analytic"),
    params:
        cfg=ms_fit_params("analytic"),
        seed=config["seed"],
        outdir="results/multisource/analytic/{ms_scenario}",
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
    log:
        "results/logs/multisource/hardening/{ms_step}/{ms_scenario}/fit.log",
    benchmark:
        "results/benchmarks/rules/multisource/hardening/{ms_step}/{ms_scenario}/fit.tsv"
    priority: PRIORITY["fit"]
    conda:
        "../../envs/simcalib.yaml"
    threads: MS["threads"]
    resources:
        mem_mb=4000,
        runtime=ms_fit_runtime("hardening"),
    params:
        cfg=lambda w: ms_fit_params("hardening", w.ms_step)(w),
        seed=config["seed"],
        outdir="results/multisource/hardening/{ms_step}/{ms_scenario}",
        fixed=lambda w, input: f"--fixed {input.fixed}" if input.fixed else "",
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
    log:
        "results/logs/multisource/{ms_case}/lsq.log",
    benchmark:
        "results/benchmarks/rules/multisource/{ms_case}/lsq.tsv"
    priority: PRIORITY["fit"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cfg=lambda w: as_json(ms_params.data_params(config, w.ms_case)),
        seed=config["seed"],
    shell:
        "python -m simcalib ms-lsq --case {wildcards.ms_case} --params {params.cfg:q} "
        "--seed {params.seed} --data {input.data} --output {output} > {log} 2>&1"


rule ms_report_analytic:
    input:
        fits=lambda w: expand(
            "results/multisource/analytic/{s}/{f}",
            s=MS["analytic"]["scenarios"],
            f=["theta.csv", "rrmse.csv", "posterior.csv", "predictions.csv", "latent.csv"],
        ),
        mse="results/multisource/analytic/theta_mse.csv",
        lsq="results/multisource/analytic/baseline_lsq.csv",
    output:
        [ms_report_file("analytic", f) for f in MS_AN_REPORT],
    log:
        "results/logs/multisource/analytic/report.log",
    benchmark:
        "results/benchmarks/rules/multisource/analytic/report.tsv"
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        fits=lambda w: expand("results/multisource/analytic/{s}", s=MS["analytic"]["scenarios"]),
    shell:
        "python -m simcalib ms-report --case analytic --fits {params.fits} --theta-mse {input.mse} "
        "--lsq {input.lsq} --output-dir results/multisource/analytic > {log} 2>&1"


rule ms_report_hardening:
    input:
        fits=lambda w: expand(
            "results/multisource/hardening/{st}/{s}/{f}",
            st=MS_HD_STEPS,
            s=MS["hardening"]["scenarios"],
            f=["theta.csv", "rrmse.csv", "predictions.csv"],
        ),
        mse="results/multisource/hardening/theta_mse.csv",
        lsq="results/multisource/hardening/baseline_lsq.csv",
    output:
        [ms_report_file("hardening", f) for f in MS_HD_REPORT],
    log:
        "results/logs/multisource/hardening/report.log",
    benchmark:
        "results/benchmarks/rules/multisource/hardening/report.tsv"
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        fits=lambda w: expand(
            "results/multisource/hardening/{st}/{s}",
            st=MS_HD_STEPS,
            s=MS["hardening"]["scenarios"],
        ),
    shell:
        "python -m simcalib ms-report --case hardening --fits {params.fits} --theta-mse {input.mse} "
        "--lsq {input.lsq} --output-dir results/multisource/hardening > {log} 2>&1"


if MS["analytic"]["enabled"]:
    ALL_TARGETS += [f"results/multisource/analytic/{f}" for f in MS_AN_REPORT]
if MS["hardening"]["enabled"]:
    ALL_TARGETS += [f"results/multisource/hardening/{f}" for f in MS_HD_REPORT]
