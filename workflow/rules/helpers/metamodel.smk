# Input functions, params and constants of the metamodel rules (workflow/rules/metamodel.smk),
# kept apart from the rules as `snakemake --lint` asks.

from simcalib.study import Study
from simcalib.study.noise import noise_facts, probe_pairs

# study keys that define the tunable space the OP searches
OP_SPACE_KEYS = ("parameters", "contexts", "constraints")
MM_NOT_TRAINING = ("enabled", "fine_tune_epochs", "fine_tune_lr")


def mm_studies():
    return [s for s in STUDIES if config["studies"][s]["metamodel"]["enabled"]]


def mm_train_inputs(wildcards):
    """The dataset, and the noise probe when the study runs one (its noise ceiling is
    recorded in metamodel.json and judged by the trust flag)."""
    d = {"dataset": f"results/{wildcards.study}/dataset.csv"}
    if probe_pairs(config["studies"][wildcards.study]) > 0:
        d["probe"] = f"results/{wildcards.study}/noise_probe.csv"
    return d


def probe_arg(wildcards, input):
    return f"--noise-probe {input.probe}" if hasattr(input, "probe") else ""


def mm_train_params(wildcards):
    cfg = config["studies"][wildcards.study]
    study = Study(wildcards.study, cfg)
    # fine-tune settings are read by the adaptive strategy only: not a reason to retrain
    mm = {k: v for k, v in cfg["metamodel"].items() if k not in MM_NOT_TRAINING}
    out = {"metamodel": mm, "inputs": study.input_names, "outputs": study.outputs}
    facts = noise_facts(cfg)
    if facts["stochastic"] is not None or facts["replicates"] > 1:
        out["noise"] = facts  # whether it is stochastic; replicates give the noise
    return as_json(out)


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


def milp_cores(solver):
    """Cores a MILP job reserves.  HiGHS's branch and bound runs on one core whatever
    its ``threads`` option (the default epidemic OP at threads 2: 4.39 s wall, 4.45 s
    user), so a HiGHS job reserves one.  A two-core reservation also waits until no
    one-core job is ready: it pushed every OP job, and the calibration behind it, to
    the end of the default DAG, one at a time.  Gurobi uses its ``threads``.  The
    solver's own thread count always comes from the option set, never from the
    cores Snakemake grants, so the OP answer does not depend on ``--cores``."""
    if solver.get("backend", "highs") == "highs":
        return 1
    return max(1, int(solver.get("threads") or 1))


def mm_threads(section, key):
    def fn(wildcards):
        cfg = config["studies"][wildcards.study]
        if section == "solver":
            return milp_cores(config["solvers"][cfg["optimize"]["solver"]])
        return max(1, int(cfg[section].get(key) or 1))

    return fn
