# Simulation stage: design -> chunk jobs -> merged dataset, and held-out target sets
# (the study's targets.csv and one targets_<name>.csv per extra_targets entry).


include: "helpers/simulate.smk"


localrules:
    sim_design,
    sim_merge,


rule sim_design:
    output:
        "results/{study}/design.csv",
    log:
        "results/logs/{study}/sim_design.log",
    benchmark:
        "results/benchmarks/rules/{study}/sim_design.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        cfg=study_params(*DESIGN_KEYS),
        seed=config["seed"],
    shell:
        "python -m simcalib sim-design --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --output {output} > {log} 2>&1"


# A chunk journals each finished run under chunks/.journal/ (not an output, so it
# survives Snakemake deleting an interrupted job's outputs): rerun, it redoes only the
# runs that were in flight.  The merge checks every chunk and then removes its journal.
rule sim_run:
    input:
        "results/{study}/design.csv",
    output:
        csv="results/{study}/chunks/chunk_{chunk}.csv",
        meta="results/{study}/chunks/chunk_{chunk}.json",
    log:
        "results/logs/{study}/sim_run_{chunk}.log",
    benchmark:
        "results/benchmarks/rules/{study}/sim_run_{chunk}.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: lambda wildcards: design_threads(wildcards.study)
    resources:
        mem_mb=2000,
        runtime=120,
    params:
        cfg=sim_params(*SIM_KEYS),
        seed=config["seed"],
    shell:
        "python -m simcalib sim-run --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --design {input} --chunk {wildcards.chunk} "
        "--threads {threads} --output {output.csv} --output-meta {output.meta} > {log} 2>&1"


rule sim_merge:
    input:
        design="results/{study}/design.csv",
        csv=chunk_files("csv"),
        meta=chunk_files("json"),
    output:
        dataset="results/{study}/dataset.csv",
        summary="results/{study}/simulation_summary.json",
    log:
        "results/logs/{study}/sim_merge.log",
    benchmark:
        "results/benchmarks/rules/{study}/sim_merge.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=2000,
        runtime=5,
    params:
        chunk_size=lambda wildcards: config["studies"][wildcards.study]["design"]["chunk_size"],
    shell:
        "python -m simcalib sim-merge --design {input.design} --chunk-size {params.chunk_size} "
        "--chunks {input.csv} --metas {input.meta} --output {output.dataset} "
        "--output-summary {output.summary} > {log} 2>&1"


# The simulator's replicate noise (noise.probe design rows run once more): the
# metamodel's noise ceiling, against which its trust flag is judged.
rule sim_noise:
    input:
        "results/{study}/dataset.csv",
    output:
        "results/{study}/noise_probe.csv",
    log:
        "results/logs/{study}/sim_noise.log",
    benchmark:
        "results/benchmarks/rules/{study}/sim_noise.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: lambda wildcards: design_threads(wildcards.study)
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        cfg=sim_params(*NOISE_KEYS),
        seed=config["seed"],
    shell:
        "python -m simcalib sim-noise --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --dataset {input} --threads {threads} --output {output} "
        "> {log} 2>&1"


wildcard_constraints:
    tset="targets(_[A-Za-z0-9_]+)?",


rule sim_targets:
    input:
        observations_input,
    output:
        "results/{study}/{tset}.csv",
    log:
        "results/logs/{study}/sim_{tset}.log",
    benchmark:
        "results/benchmarks/rules/{study}/sim_{tset}.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: lambda wildcards: design_threads(wildcards.study)
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        cfg=sim_params(*TARGET_KEYS),
        which=tset_name,
        seed=config["seed"],
    shell:
        "python -m simcalib sim-targets --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --which {params.which} --threads {threads} --output {output} "
        "> {log} 2>&1"


for _s in STUDIES:
    ALL_TARGETS += [f"results/{_s}/dataset.csv"] if has_design(_s) else []
    ALL_TARGETS += [f"results/{_s}/targets.csv"]
    ALL_TARGETS += [f"results/{_s}/targets_{w}.csv" for w in config["studies"][_s]["extra_targets"]]
