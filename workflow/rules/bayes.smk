# Bayesian ODE calibration under model discrepancy (paper 3): KOH vs MOS.
#
# Synthetic settings (no `data` option):
#   data (one per setting x replication, shared by both methods)
#     -> run (one job per setting x method x replication: MCMC, netCDF, summary, predictive)
#     -> metrics per setting -> tables beside the paper's numbers; example figures.
# Real-data settings (`setting_options.<name>.data: file.csv`): no simulation, no truth:
#   fit (one job per method: results/bayes/<name>/<method>/...) -> diagnostics figures
#     -> KOH vs MOS table and predictive check, data-and-bands figure.


include: "helpers/bayes.smk"


localrules:
    bayes_table,
    bayes_compare,


rule bayes_data:
    output:
        obs="results/bayes/{setting}/data/rep{rep}/obs.csv",
        dense="results/bayes/{setting}/data/rep{rep}/dense.csv",
        truth="results/bayes/{setting}/data/rep{rep}/truth.json",
    log:
        "results/logs/bayes/{setting}/data_rep{rep}.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/data_rep{rep}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        rep=r"\d+",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        cfg=lambda w: as_json(bayes_data_params(config, w.setting, BAYES_SEARCH)),
        seed=config["seed"],
    shell:
        "python -m simcalib bayes-data --params {params.cfg:q} --seed {params.seed} "
        "--setting {wildcards.setting} --rep {wildcards.rep} "
        "--output-obs {output.obs} --output-dense {output.dense} "
        "--output-truth {output.truth} > {log} 2>&1"


rule bayes_run:
    input:
        obs="results/bayes/{setting}/data/rep{rep}/obs.csv",
        # protocol "reference" starts at the truth (as the paper's code); honest runs never read it
        truth=lambda w: (
            [f"results/bayes/{w.setting}/data/rep{w.rep}/truth.json"]
            if BAYES["sampler"]["protocol"] == "reference"
            else []
        ),
    output:
        posterior="results/bayes/{setting}/{method}/rep{rep}/posterior.nc",
        summary="results/bayes/{setting}/{method}/rep{rep}/summary.csv",
        predictive="results/bayes/{setting}/{method}/rep{rep}/predictive.csv",
        info="results/bayes/{setting}/{method}/rep{rep}/run.json",
    log:
        "results/logs/bayes/{setting}/{method}_rep{rep}.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/{method}_rep{rep}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        method="koh|mos",
        rep=r"\d+",
    priority: PRIORITY["sample"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=bayes_run_minutes,
    params:
        cfg=lambda w: bayes_run_params(w.setting),
        seed=config["seed"],
        truth=lambda w, input: f"--truth {input.truth}" if input.truth else "",
    shell:
        "python -m simcalib bayes-run --params {params.cfg:q} --seed {params.seed} "
        "--setting {wildcards.setting} --method {wildcards.method} --rep {wildcards.rep} "
        "--data {input.obs} --output-posterior {output.posterior} "
        "--output-summary {output.summary} --output-predictive {output.predictive} "
        "--output-run-info {output.info} {params.truth} > {log} 2>&1"


rule bayes_metrics:
    input:
        truth=lambda w: bayes_data_files(w.setting, "truth.json"),
        dense=lambda w: bayes_data_files(w.setting, "dense.csv"),
        summary=lambda w: bayes_runs(w.setting, "summary.csv"),
        predictive=lambda w: bayes_runs(w.setting, "predictive.csv"),
    output:
        metrics="results/bayes/{setting}/metrics.csv",
        output_metrics="results/bayes/{setting}/output_metrics.csv",
        per_rep="results/bayes/{setting}/per_replication.csv",
    log:
        "results/logs/bayes/{setting}/metrics.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/metrics.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        exclude="--exclude-unconverged" if BAYES["exclude_unconverged"] else "",
    shell:
        "python -m simcalib bayes-metrics --setting {wildcards.setting} --truth {input.truth} "
        "--dense {input.dense} --summary {input.summary} --predictive {input.predictive} "
        "--output-metrics {output.metrics} --output-metrics-outputs {output.output_metrics} "
        "--output-per-rep {output.per_rep} {params.exclude} > {log} 2>&1"


rule bayes_table:
    input:
        metrics="results/bayes/{setting}/metrics.csv",
        output_metrics="results/bayes/{setting}/output_metrics.csv",
    output:
        params=figure(
            "results/bayes/{setting}/table_params.csv", "bayes_table", "Paper 3", "{setting}"
        ),
        params_md="results/bayes/{setting}/table_params.md",
        output=figure(
            "results/bayes/{setting}/table_output.csv", "bayes_table", "Paper 3", "{setting}"
        ),
        output_md="results/bayes/{setting}/table_output.md",
    log:
        "results/logs/bayes/{setting}/table.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/table.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "python -m simcalib bayes-table --setting {wildcards.setting} --metrics {input.metrics} "
        "--metrics-outputs {input.output_metrics} --output-params {output.params} "
        "--output-outputs {output.output} > {log} 2>&1"


rule bayes_plot:
    input:
        obs="results/bayes/{setting}/data/rep{rep}/obs.csv",
        dense="results/bayes/{setting}/data/rep{rep}/dense.csv",
        truth="results/bayes/{setting}/data/rep{rep}/truth.json",
        predictive=expand(
            "results/bayes/{setting}/{method}/rep{{rep}}/predictive.csv",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
        posterior=expand(
            "results/bayes/{setting}/{method}/rep{{rep}}/posterior.nc",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
        summary=expand(
            "results/bayes/{setting}/{method}/rep{{rep}}/summary.csv",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
    output:
        uq=figure(
            "results/bayes/{setting}/figures/output_uq_rep{rep}.png",
            "bayes_uq",
            "Paper 3",
            "{setting}",
        ),
        uq_csv="results/bayes/{setting}/figures/output_uq_rep{rep}.csv",
        marginals=figure(
            "results/bayes/{setting}/figures/marginals_rep{rep}.png",
            "bayes_marginals",
            "Paper 3",
            "{setting}",
        ),
        marginals_csv="results/bayes/{setting}/figures/marginals_rep{rep}.csv",
    log:
        "results/logs/bayes/{setting}/plot_rep{rep}.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/plot_rep{rep}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        rep=r"\d+",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m simcalib bayes-plot --setting {wildcards.setting} --data {input.obs} "
        "--dense {input.dense} --truth {input.truth} --predictive {input.predictive} "
        "--posterior {input.posterior} --summary {input.summary} --output-uq {output.uq} "
        "--output-marginals {output.marginals} > {log} 2>&1"


# ------------------------------------------------------------------ real data


rule bayes_fit:
    input:
        data=bayes_data_file,
    output:
        posterior="results/bayes/{setting}/{method}/posterior.nc",
        summary="results/bayes/{setting}/{method}/summary.csv",
        predictive="results/bayes/{setting}/{method}/predictive.csv",
        info="results/bayes/{setting}/{method}/run.json",
    log:
        "results/logs/bayes/{setting}/{method}_fit.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/{method}_fit.tsv"
    wildcard_constraints:
        setting="|".join(BAYES_DATA_SETTINGS) or "^$",
        method="koh|mos",
    priority: PRIORITY["sample"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=bayes_run_minutes,
    params:
        cfg=lambda w: bayes_run_params(w.setting),
        seed=config["seed"],
    shell:
        "python -m simcalib bayes-run --params {params.cfg:q} --seed {params.seed} "
        "--setting {wildcards.setting} --method {wildcards.method} "
        "--data {input.data} --output-posterior {output.posterior} "
        "--output-summary {output.summary} --output-predictive {output.predictive} "
        "--output-run-info {output.info} > {log} 2>&1"


rule bayes_diagnostics:
    input:
        posterior="results/bayes/{setting}/{method}/posterior.nc",
    output:
        trace=figure(
            "results/bayes/{setting}/{method}/figures/trace.png",
            "bayes_trace",
            "Paper 3",
            "{setting}",
        ),
        rank=figure(
            "results/bayes/{setting}/{method}/figures/rank.png",
            "bayes_trace",
            "Paper 3",
            "{setting}",
        ),
        pair=figure(
            "results/bayes/{setting}/{method}/figures/pair.png",
            "bayes_pair",
            "Paper 3",
            "{setting}",
        ),
    log:
        "results/logs/bayes/{setting}/{method}_diagnostics.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/{method}_diagnostics.tsv"
    wildcard_constraints:
        setting="|".join(BAYES_DATA_SETTINGS) or "^$",
        method="koh|mos",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m simcalib bayes-diagnostics --posterior {input.posterior} "
        "--output-trace {output.trace} --output-rank {output.rank} "
        "--output-pair {output.pair} > {log} 2>&1"


rule bayes_compare:
    input:
        data=bayes_data_file,
        summary=expand(
            "results/bayes/{setting}/{method}/summary.csv",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
        predictive=expand(
            "results/bayes/{setting}/{method}/predictive.csv",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
    output:
        params=figure(
            "results/bayes/{setting}/table_params.csv", "bayes_compare", "Paper 3", "{setting}"
        ),
        params_md="results/bayes/{setting}/table_params.md",
        output=figure(
            "results/bayes/{setting}/table_output.csv", "bayes_compare", "Paper 3", "{setting}"
        ),
        output_md="results/bayes/{setting}/table_output.md",
    log:
        "results/logs/bayes/{setting}/compare.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/compare.tsv"
    wildcard_constraints:
        setting="|".join(BAYES_DATA_SETTINGS) or "^$",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m simcalib bayes-compare --setting {wildcards.setting} --data {input.data} "
        "--summary {input.summary} --predictive {input.predictive} "
        "--output-params {output.params} --output-outputs {output.output} > {log} 2>&1"


# real-data settings share table file names with the synthetic tables
ruleorder: bayes_compare > bayes_table


rule bayes_data_plot:
    input:
        data=bayes_data_file,
        summary=expand(
            "results/bayes/{setting}/{method}/summary.csv",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
        predictive=expand(
            "results/bayes/{setting}/{method}/predictive.csv",
            method=BAYES_METHODS,
            allow_missing=True,
        ),
    output:
        uq=figure(
            "results/bayes/{setting}/figures/predictive.png",
            "bayes_data_uq",
            "Paper 3",
            "{setting}",
        ),
        uq_csv="results/bayes/{setting}/figures/predictive.csv",
    log:
        "results/logs/bayes/{setting}/data_plot.log",
    benchmark:
        "results/benchmarks/rules/bayes/{setting}/data_plot.tsv"
    wildcard_constraints:
        setting="|".join(BAYES_DATA_SETTINGS) or "^$",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m simcalib bayes-plot --setting {wildcards.setting} --data {input.data} "
        "--predictive {input.predictive} --summary {input.summary} "
        "--output-uq {output.uq} > {log} 2>&1"


BAYES_EXAMPLE = min(int(BAYES["example_rep"]), max(len(BAYES_REPS) - 1, 0))

BAYES_TARGETS = [
    f
    for s in BAYES_SYNTHETIC
    for f in (
        f"results/bayes/{s}/metrics.csv",
        f"results/bayes/{s}/table_params.md",
        f"results/bayes/{s}/table_output.md",
        f"results/bayes/{s}/figures/output_uq_rep{BAYES_EXAMPLE}.png",
        f"results/bayes/{s}/figures/marginals_rep{BAYES_EXAMPLE}.png",
    )
]

BAYES_TARGETS += [
    f
    for s in BAYES_DATA_SETTINGS
    for f in (
        f"results/bayes/{s}/table_params.md",
        f"results/bayes/{s}/table_output.md",
        f"results/bayes/{s}/figures/predictive.png",
        *(
            f"results/bayes/{s}/{m}/figures/{k}.png"
            for m in BAYES_METHODS
            for k in ("trace", "rank", "pair")
        ),
    )
]

ALL_TARGETS.extend(BAYES_TARGETS)
