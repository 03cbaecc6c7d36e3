# Bayesian ODE calibration under model discrepancy (paper 3): KOH vs MOS.
#
#   data (one per setting x replication, shared by both methods)
#     -> run (one job per setting x method x replication: MCMC, netCDF, summary, predictive)
#     -> metrics per setting -> tables beside the paper's numbers; example figures.

BAYES = config.get("bayes", {})
BAYES_SETTINGS = list(BAYES.get("settings", []))
BAYES_METHODS = list(BAYES.get("methods", ["koh", "mos"]))
BAYES_REPS = list(range(int(BAYES.get("replications", 0))))
BAYES_DIR = "results/bayes/{setting}"


localrules:
    bayes_table,


def bayes_options(setting):
    return (BAYES.get("setting_options") or {}).get(setting, {})


def bayes_run_minutes(wildcards):
    """Generous runtime (minutes): ~10 ms per iteration and chain covers the slowest
    model (FitzHugh-Nagumo) on a loaded core, plus start-up and prediction."""
    s = BAYES.get("sampler", {})
    return 10 + int(s.get("iterations", 2000) * s.get("chains", 2) * 0.01 / 60)


def bayes_runs(setting, name):
    return expand(f"results/bayes/{setting}/{{method}}/rep{{rep}}/{name}",
                  method=BAYES_METHODS, rep=BAYES_REPS)


def bayes_data_files(setting, name):
    return expand(f"results/bayes/{setting}/data/rep{{rep}}/{name}", rep=BAYES_REPS)


rule bayes_data:
    output:
        obs=BAYES_DIR + "/data/rep{rep}/obs.csv",
        dense=BAYES_DIR + "/data/rep{rep}/dense.csv",
        truth=BAYES_DIR + "/data/rep{rep}/truth.json",
    params:
        cfg=lambda w: as_json({"options": bayes_options(w.setting), "refine": BAYES["refine"]}),
        seed=config["seed"],
    log:
        "results/logs/bayes/{setting}/data_rep{rep}.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/data_rep{rep}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        rep=r"\d+",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "simcalib bayes-data --params {params.cfg:q} --seed {params.seed} "
        "--setting {wildcards.setting} --rep {wildcards.rep} "
        "--obs {output.obs} --dense {output.dense} --truth {output.truth} > {log} 2>&1"


rule bayes_run:
    input:
        obs=BAYES_DIR + "/data/rep{rep}/obs.csv",
        # protocol "reference" starts at the truth (issue 16); honest runs never read it
        truth=lambda w: ([f"results/bayes/{w.setting}/data/rep{w.rep}/truth.json"]
                         if BAYES["sampler"].get("protocol") == "reference" else []),
    output:
        posterior=BAYES_DIR + "/{method}/rep{rep}/posterior.nc",
        summary=BAYES_DIR + "/{method}/rep{rep}/summary.csv",
        predictive=BAYES_DIR + "/{method}/rep{rep}/predictive.csv",
        info=BAYES_DIR + "/{method}/rep{rep}/run.json",
    params:
        cfg=lambda w: as_json({"sampler": BAYES["sampler"], "options": bayes_options(w.setting),
                               "refine": BAYES["refine"], "predict_draws": BAYES["predict_draws"]}),
        seed=config["seed"],
        truth=lambda w, input: f"--truth {input.truth}" if input.truth else "",
    log:
        "results/logs/bayes/{setting}/{method}_rep{rep}.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/{method}_rep{rep}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        method="koh|mos",
        rep=r"\d+",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=bayes_run_minutes,
    shell:
        "simcalib bayes-run --params {params.cfg:q} --seed {params.seed} "
        "--setting {wildcards.setting} --method {wildcards.method} --rep {wildcards.rep} "
        "--data {input.obs} --posterior {output.posterior} --summary {output.summary} "
        "--predictive {output.predictive} --run-info {output.info} {params.truth} > {log} 2>&1"


rule bayes_metrics:
    input:
        truth=lambda w: bayes_data_files(w.setting, "truth.json"),
        dense=lambda w: bayes_data_files(w.setting, "dense.csv"),
        summary=lambda w: bayes_runs(w.setting, "summary.csv"),
        predictive=lambda w: bayes_runs(w.setting, "predictive.csv"),
    output:
        metrics=BAYES_DIR + "/metrics.csv",
        output_metrics=BAYES_DIR + "/output_metrics.csv",
        per_rep=BAYES_DIR + "/per_replication.csv",
    log:
        "results/logs/bayes/{setting}/metrics.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/metrics.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "simcalib bayes-metrics --setting {wildcards.setting} --truth {input.truth} "
        "--dense {input.dense} --summary {input.summary} --predictive {input.predictive} "
        "--metrics {output.metrics} --output-metrics {output.output_metrics} "
        "--per-rep {output.per_rep} > {log} 2>&1"


rule bayes_table:
    input:
        metrics=BAYES_DIR + "/metrics.csv",
        output_metrics=BAYES_DIR + "/output_metrics.csv",
    output:
        params=figure(BAYES_DIR + "/table_params.csv", "bayes_table", "Paper 3", "{setting}"),
        params_md=BAYES_DIR + "/table_params.md",
        output=figure(BAYES_DIR + "/table_output.csv", "bayes_table", "Paper 3", "{setting}"),
        output_md=BAYES_DIR + "/table_output.md",
    log:
        "results/logs/bayes/{setting}/table.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/table.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "simcalib bayes-table --setting {wildcards.setting} --metrics {input.metrics} "
        "--output-metrics {input.output_metrics} --out-params {output.params} "
        "--out-output {output.output} > {log} 2>&1"


rule bayes_plot:
    input:
        obs=BAYES_DIR + "/data/rep{rep}/obs.csv",
        dense=BAYES_DIR + "/data/rep{rep}/dense.csv",
        truth=BAYES_DIR + "/data/rep{rep}/truth.json",
        predictive=expand(BAYES_DIR + "/{method}/rep{{rep}}/predictive.csv",
                          method=BAYES_METHODS, allow_missing=True),
        posterior=expand(BAYES_DIR + "/{method}/rep{{rep}}/posterior.nc",
                         method=BAYES_METHODS, allow_missing=True),
    output:
        uq=figure(BAYES_DIR + "/figures/output_uq_rep{rep}.png", "bayes_uq", "Paper 3",
                  "{setting}"),
        uq_csv=BAYES_DIR + "/figures/output_uq_rep{rep}.csv",
        marginals=figure(BAYES_DIR + "/figures/marginals_rep{rep}.png", "bayes_marginals",
                         "Paper 3", "{setting}"),
        marginals_csv=BAYES_DIR + "/figures/marginals_rep{rep}.csv",
    log:
        "results/logs/bayes/{setting}/plot_rep{rep}.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/plot_rep{rep}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        rep=r"\d+",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "simcalib bayes-plot --setting {wildcards.setting} --data {input.obs} "
        "--dense {input.dense} --truth {input.truth} --predictive {input.predictive} "
        "--posterior {input.posterior} --out-uq {output.uq} "
        "--out-marginals {output.marginals} > {log} 2>&1"


BAYES_EXAMPLE = min(int(BAYES.get("example_rep", 0)), max(len(BAYES_REPS) - 1, 0))

BAYES_TARGETS = [
    f
    for s in BAYES_SETTINGS
    for f in (
        f"results/bayes/{s}/metrics.csv",
        f"results/bayes/{s}/table_params.md",
        f"results/bayes/{s}/table_output.md",
        f"results/bayes/{s}/figures/output_uq_rep{BAYES_EXAMPLE}.png",
        f"results/bayes/{s}/figures/marginals_rep{BAYES_EXAMPLE}.png",
    )
]

ALL_TARGETS.extend(BAYES_TARGETS)
