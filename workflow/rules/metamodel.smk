# Metamodel stage (paper 1): train the study's ReLU metamodel on its dataset, then
# Optimally-Predict every target with the MILP.  `mm_train` reads only the metamodel
# section plus the input/output names (a width change retrains, never re-simulates);
# `mm_optimize` reads the optimize section, the solver option set it names and the keys
# that define the study's space.

from simcalib.study import Study

# study keys that define the tunable space the OP searches
OP_SPACE_KEYS = ("parameters", "contexts", "constraints")
MM_NOT_TRAINING = ("enabled", "fine_tune_epochs", "fine_tune_lr")


def mm_studies():
    return [s for s in STUDIES if (config["studies"][s].get("metamodel") or {}).get("enabled")]


def mm_train_params(wildcards):
    cfg = config["studies"][wildcards.study]
    study = Study(wildcards.study, cfg)
    # fine-tune settings are read by the adaptive strategy only: not a reason to retrain
    mm = {k: v for k, v in cfg["metamodel"].items() if k not in MM_NOT_TRAINING}
    return as_json({"metamodel": mm, "inputs": study.input_names, "outputs": study.outputs})


def mm_optimize_params(wildcards):
    cfg = config["studies"][wildcards.study]
    opt = cfg["optimize"]
    return as_json(
        {
            "space": {k: cfg[k] for k in OP_SPACE_KEYS if k in cfg},
            "optimize": opt,
            "solver": config["solvers"][opt["solver"]],
        }
    )


def mm_threads(section, key):
    def fn(wildcards):
        cfg = config["studies"][wildcards.study]
        if section == "solver":
            return max(1, int(config["solvers"][cfg["optimize"]["solver"]].get(key) or 1))
        return max(1, int(cfg[section].get(key) or 1))

    return fn


rule mm_train:
    input:
        "results/{study}/dataset.csv",
    output:
        model="results/{study}/metamodel/model.pt",
        meta="results/{study}/metamodel/metamodel.json",
    params:
        cfg=mm_train_params,
        seed=config["seed"],
    log:
        "results/logs/{study}/mm_train.log",
    benchmark:
        "results/benchmarks/rules/{study}/mm_train.tsv"
    threads: mm_threads("metamodel", "threads")
    resources:
        mem_mb=2000,
        runtime=60,
    shell:
        "simcalib mm-train --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --dataset {input} --threads {threads} "
        "--output-dir results/{wildcards.study}/metamodel > {log} 2>&1"


rule mm_optimize:
    input:
        model="results/{study}/metamodel/model.pt",
        meta="results/{study}/metamodel/metamodel.json",
        targets="results/{study}/targets.csv",
    output:
        "results/{study}/op/op.csv",
    params:
        cfg=mm_optimize_params,
        seed=config["seed"],
    log:
        "results/logs/{study}/mm_optimize.log",
    benchmark:
        "results/benchmarks/rules/{study}/mm_optimize.tsv"
    threads: mm_threads("solver", "threads")
    resources:
        mem_mb=4000,
        runtime=120,
    shell:
        "simcalib mm-optimize --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --metamodel results/{wildcards.study}/metamodel "
        "--targets {input.targets} --threads {threads} --output {output} > {log} 2>&1"


for _s in mm_studies():
    ALL_TARGETS += [
        f"results/{_s}/metamodel/model.pt",
        f"results/{_s}/metamodel/metamodel.json",
        f"results/{_s}/op/op.csv",
    ]
