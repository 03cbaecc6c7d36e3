# Paper 3's replication study at scale (bayes.replication_study; config/paper3.yaml):
#   block (one job per setting x protocol x method x block of replications: data,
#   lock-step MCMC of the block's runs as lanes, output metrics) -> tables per setting
#   and protocol (converged subset and all), paired KOH-vs-MOS differences, figure.
# A killed run resumes per block; which runs share a block never changes a number.


include: "helpers/bayes_replication.smk"


rule bayes_replication_block:
    output:
        f"{REPLICATION_DIR}/{{setting}}/{{protocol}}/{{method}}/block{{block}}.json",
    log:
        "results/logs/bayes/_replications/{setting}_{protocol}_{method}_block{block}.log",
    benchmark:
        "results/benchmarks/rules/bayes/_replications/{setting}_{protocol}_{method}_{block}.tsv"
    wildcard_constraints:
        setting=r"[A-Za-z][A-Za-z0-9_]*",
        protocol="honest|reference",
        method="koh|mos",
        block=r"\d+-\d+",
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=replication_minutes,
    params:
        cfg=lambda w: as_json(replication_params(config)),
        seed=config["seed"],
    shell:
        "python -m simcalib bayes-run-batch --params {params.cfg:q} --seed {params.seed} "
        "--setting {wildcards.setting} --protocol {wildcards.protocol} "
        "--method {wildcards.method} --reps {wildcards.block} --output {output} > {log} 2>&1"


rule bayes_replication_tables:
    input:
        replication_records,
    output:
        tables=[
            f"{REPLICATION_DIR}/tables/bayes_{s}_{p}_{kind}.csv"
            for s in REPLICATION["settings"]
            for p in REPLICATION["protocols"]
            for kind in ("params", "paired", "output")
        ],
        meta=[
            f"{REPLICATION_DIR}/tables/bayes_{s}_{p}_meta.json"
            for s in REPLICATION["settings"]
            for p in REPLICATION["protocols"]
        ],
        figure=figure(
            f"{REPLICATION_DIR}/tables/bayes_paper_paired.png", "bayes_replication", "Paper 3"
        ),
    log:
        "results/logs/bayes/_replications/tables.log",
    benchmark:
        "results/benchmarks/rules/bayes/_replications/tables.tsv"
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        cfg=lambda w: as_json(replication_params(config)),
        seed=config["seed"],
        out_dir=lambda w, output: os.path.dirname(output.figure),
        made_by="snakemake --cores 2 --configfile config/paper3.yaml",
    shell:
        "python -m simcalib bayes-replication-tables --params {params.cfg:q} "
        "--seed {params.seed} --records {input} --output-dir {params.out_dir} "
        "--output-figure {output.figure} --made-by {params.made_by:q} > {log} 2>&1"


if REPLICATION["settings"]:
    ALL_TARGETS.extend(rules.bayes_replication_tables.output.tables)
