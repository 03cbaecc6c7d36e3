# Simulation stage: design -> chunk jobs -> merged dataset, and held-out targets.

from simcalib.simulation import n_chunks

# Keys each step reads, so a change elsewhere (metamodel, strategies) never re-simulates.
DESIGN_KEYS = ("parameters", "contexts", "constraints", "design")
SIM_KEYS = ("simulator", "parameters", "contexts", "outputs", "design")
TARGET_KEYS = ("simulator", "parameters", "contexts", "constraints", "outputs", "targets",
               "extra_targets")


localrules:
    design,
    merge_chunks,


def chunk_files(ext):
    def fn(wildcards):
        n = n_chunks(config["studies"][wildcards.study])
        return [f"results/{wildcards.study}/chunks/chunk_{i}.{ext}" for i in range(n)]

    return fn


rule design:
    output:
        "results/{study}/design.csv",
    params:
        cfg=study_params(*DESIGN_KEYS),
    log:
        "results/logs/{study}/design.log",
    benchmark:
        "results/benchmarks/rules/{study}/design.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib design --study {wildcards.study} --params {params.cfg:q} "
        "--seed {config[seed]} --output {output} > {log} 2>&1"


# A chunk journals each finished run under chunks/.journal/ (not an output, so it
# survives Snakemake deleting an interrupted job's outputs): rerun, it redoes only the
# runs that were in flight.  The merge checks every chunk and then removes its journal.
rule simulate_chunk:
    input:
        "results/{study}/design.csv",
    output:
        csv="results/{study}/chunks/chunk_{chunk}.csv",
        meta="results/{study}/chunks/chunk_{chunk}.json",
    params:
        cfg=study_params(*SIM_KEYS),
    log:
        "results/logs/{study}/simulate_chunk_{chunk}.log",
    benchmark:
        "results/benchmarks/rules/{study}/simulate_chunk_{chunk}.tsv"
    threads: lambda wildcards: config["studies"][wildcards.study]["design"]["threads"]
    resources:
        mem_mb=2000,
        runtime=120,
    shell:
        "simcalib simulate --study {wildcards.study} --params {params.cfg:q} "
        "--seed {config[seed]} --design {input} --chunk {wildcards.chunk} "
        "--threads {threads} --output {output.csv} --meta {output.meta} > {log} 2>&1"


rule merge_chunks:
    input:
        design="results/{study}/design.csv",
        csv=chunk_files("csv"),
        meta=chunk_files("json"),
    output:
        dataset="results/{study}/dataset.csv",
        summary="results/{study}/simulation_summary.json",
    params:
        chunk_size=lambda wildcards: config["studies"][wildcards.study]["design"]["chunk_size"],
    log:
        "results/logs/{study}/merge_chunks.log",
    benchmark:
        "results/benchmarks/rules/{study}/merge_chunks.tsv"
    resources:
        mem_mb=2000,
        runtime=5,
    shell:
        "simcalib merge --design {input.design} --chunk-size {params.chunk_size} "
        "--chunks {input.csv} --metas {input.meta} --output {output.dataset} "
        "--summary {output.summary} > {log} 2>&1"


rule targets:
    output:
        "results/{study}/targets.csv",
    params:
        cfg=study_params(*TARGET_KEYS),
    log:
        "results/logs/{study}/targets.log",
    benchmark:
        "results/benchmarks/rules/{study}/targets.tsv"
    threads: lambda wildcards: config["studies"][wildcards.study]["design"]["threads"]
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "simcalib targets --study {wildcards.study} --params {params.cfg:q} "
        "--seed {config[seed]} --threads {threads} --output {output} > {log} 2>&1"


rule extra_targets:
    output:
        "results/{study}/targets_{which}.csv",
    params:
        cfg=study_params(*TARGET_KEYS),
    log:
        "results/logs/{study}/targets_{which}.log",
    benchmark:
        "results/benchmarks/rules/{study}/targets_{which}.tsv"
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "simcalib targets --study {wildcards.study} --params {params.cfg:q} "
        "--seed {config[seed]} --which {wildcards.which} --output {output} > {log} 2>&1"


for _s in STUDIES:
    ALL_TARGETS += [f"results/{_s}/dataset.csv", f"results/{_s}/targets.csv"]
    ALL_TARGETS += [
        f"results/{_s}/targets_{w}.csv" for w in config["studies"][_s].get("extra_targets", {})
    ]
