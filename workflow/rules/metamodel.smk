# Metamodel stage (paper 1): train the study's ReLU metamodel on its dataset, then
# Optimally-Predict every target with the MILP.  `mm_train` reads only the metamodel
# section plus the input/output names (a width change retrains, never re-simulates);
# `mm_optimize` reads the optimize section, the solver option set it names and the keys
# that define the study's space.


include: "helpers/metamodel.smk"


rule mm_train:
    input:
        unpack(mm_train_inputs),
    output:
        model="results/{study}/metamodel/model.pt",
        meta="results/{study}/metamodel/metamodel.json",
        failure="results/{study}/metamodel/failure.json",
    log:
        "results/logs/{study}/mm_train.log",
    benchmark:
        "results/benchmarks/rules/{study}/mm_train.tsv"
    priority: PRIORITY["fit"]
    conda:
        "../../envs/simcalib.yaml"
    threads: mm_threads("metamodel", "threads")
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        cfg=mm_train_params,
        seed=config["seed"],
        probe=probe_arg,
    shell:
        "python -m simcalib mm-train --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --dataset {input.dataset} {params.probe} --threads {threads} "
        "--output-dir results/{wildcards.study}/metamodel > {log} 2>&1"


rule mm_optimize:
    input:
        model="results/{study}/metamodel/model.pt",
        meta="results/{study}/metamodel/metamodel.json",
        failure="results/{study}/metamodel/failure.json",
        targets="results/{study}/targets.csv",
    output:
        "results/{study}/op/op.csv",
    log:
        "results/logs/{study}/mm_optimize.log",
    benchmark:
        "results/benchmarks/rules/{study}/mm_optimize.tsv"
    priority: PRIORITY["fit"]
    conda:
        "../../envs/simcalib.yaml"
    threads: mm_threads("solver", "threads")
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        cfg=mm_optimize_params,
        seed=config["seed"],
    shell:
        "python -m simcalib mm-optimize --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --metamodel results/{wildcards.study}/metamodel "
        "--targets {input.targets} --output {output} > {log} 2>&1"


for _s in mm_studies():
    ALL_TARGETS += [
        f"results/{_s}/metamodel/model.pt",
        f"results/{_s}/metamodel/metamodel.json",
        f"results/{_s}/op/op.csv",
    ]
