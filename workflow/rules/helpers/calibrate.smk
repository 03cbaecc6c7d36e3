# Input functions, params and constants of the calibrate rules (workflow/rules/calibrate.smk),
# kept apart from the rules as `snakemake --lint` asks.

from simcalib.metamodel.strategies.registry import job_settings, reads_design, registry
from simcalib.metamodel.strategies.settings import (
    merged_settings,
    solver_options,
    solver_set_name,
)
from simcalib.study.observations import resolve, target_sets
from simcalib.study.simulation import concurrent_calls

STRATEGIES = registry()
# study keys a calibration job needs to rebuild the study's space and simulator
CAL_STUDY_KEYS = ("simulator", "parameters", "contexts", "constraints", "outputs")
SWEEP_PREFIX = "calibration/sweep/R"


def cal_studies():
    return [s for s in STUDIES if config["studies"][s]["calibration"]["enabled"]]


def caldir_of(tset):
    """Calibration directory of a target set ("targets" or "targets_<name>")."""
    return "calibration" if tset == "targets" else f"calibration/{tset}"


def caldir_targets(caldir):
    """The target set a calibration directory calibrates (a sweep uses the study's)."""
    _, sep, name = caldir.partition("targets_")
    return sep + name if sep else "targets"


def caldir_proximity(caldir):
    """The proximity a sweep directory fixes, else None (the config's value)."""
    return caldir[len(SWEEP_PREFIX) :] if caldir.startswith(SWEEP_PREFIX) else None


def cal_solver(wildcards):
    return as_json(solver_options(config, wildcards.study))


def cal_params(wildcards):
    """Study keys + only the calibration settings the job's strategy reads (a sweep job
    takes its proximity from the directory, not from the config)."""
    cfg = config["studies"][wildcards.study]
    spec = STRATEGIES[wildcards.strategy]
    sub = job_settings(wildcards.strategy, cfg["calibration"])
    if caldir_proximity(wildcards.caldir) is not None:
        sub.pop("proximity", None)
    out = {k: cfg[k] for k in (*CAL_STUDY_KEYS, *spec.study_keys) if k in cfg}
    # a declared stochastic simulator turns on choosing by mean (select.top: auto)
    out["noise"] = {"stochastic": (cfg.get("noise") or {}).get("stochastic", "auto")}
    out["calibration"] = sub
    return as_json(out)


def cal_threads(wildcards):
    """Parallel simulator runs inside one calibration job: the study's design.threads
    for a simulator that runs calls concurrently (a command), else 1 (the records do
    not depend on it: each run's seed comes from its run id)."""
    cfg = config["studies"][wildcards.study]
    return int(cfg["design"]["threads"]) if concurrent_calls(cfg) else 1


def n_targets(study, tset):
    """Targets of a target set, known before the run: ``n`` of a drawn set, the rows of
    an observed file (1 when it cannot be read yet: one block)."""
    which = "targets" if tset == "targets" else tset[len("targets_") :]
    spec = target_sets(config["studies"][study]).get(which) or {}
    if "n" in spec:
        return int(spec["n"])
    try:
        with open(resolve(spec["file"])) as f:
            return max(1, sum(1 for line in f if line.strip()) - 1)
    except (KeyError, OSError):
        return 1


def cal_blocks(study, caldir, strategy):
    """Jobs of one strategy: ceil(targets / calibration.block_size); one for a joint
    strategy (it searches all its targets at once)."""
    if STRATEGIES[strategy].joint is not None:
        return 1
    size = int(config["studies"][study]["calibration"]["block_size"])
    return max(1, -(-n_targets(study, caldir_targets(caldir)) // size))


def cal_block_files(wildcards):
    n = cal_blocks(wildcards.study, wildcards.caldir, wildcards.strategy)
    return [
        f"results/{wildcards.study}/{wildcards.caldir}/blocks/{wildcards.strategy}/{b}.pkl"
        for b in range(n)
    ]


def cal_block_arg(wildcards):
    n = cal_blocks(wildcards.study, wildcards.caldir, wildcards.strategy)
    return f"{wildcards.block}/{n}"


def cal_study_only(wildcards):
    cfg = config["studies"][wildcards.study]
    return as_json({k: cfg[k] for k in CAL_STUDY_KEYS if k in cfg})


MM_FILES = {
    "model": "results/{study}/metamodel/model.pt",
    "meta": "results/{study}/metamodel/metamodel.json",
    "failure": "results/{study}/metamodel/failure.json",
}


def anchors_inputs(wildcards):
    """Model files and the targets; for the study's own targets also mm_optimize's
    op.csv when it solved the same problems (same solver set, no output weights), so
    each full-space MILP is solved once per study."""
    d = {k: v.format(study=wildcards.study) for k, v in MM_FILES.items()}
    d["targets"] = f"results/{wildcards.study}/{caldir_targets(wildcards.caldir)}.csv"
    cfg = config["studies"][wildcards.study]
    opt = cfg["optimize"]
    if (
        wildcards.caldir == "calibration"
        and not opt.get("weights")
        and solver_set_name(cfg) == opt["solver"]
    ):
        d["solved"] = f"results/{wildcards.study}/op/op.csv"
    return d


def solved_arg(wildcards, input):
    return f"--solved {input.solved}" if hasattr(input, "solved") else ""


def cal_inputs(wildcards):
    tset = caldir_targets(wildcards.caldir)
    d = {k: v.format(study=wildcards.study) for k, v in MM_FILES.items()}
    d["targets"] = f"results/{wildcards.study}/{tset}.csv"
    if STRATEGIES[wildcards.strategy].uses_anchor:
        d["anchors"] = f"results/{wildcards.study}/{caldir_of(tset)}/anchors.csv"
    if wildcards.strategy == "posterior":
        # the error scale kappa calibrated once per study by cal_posterior
        d["posterior"] = f"results/{wildcards.study}/calibration/posterior/posterior.json"
    cal = config["studies"][wildcards.study]["calibration"]
    if reads_design(wildcards.strategy, merged_settings(job_settings(wildcards.strategy, cal))):
        # the study's design runs as the start, counted (sequential.use_design); only
        # then, so the default DAG does not depend on the design for this job
        d["design"] = f"results/{wildcards.study}/dataset.csv"
    return d


def cal_whole_inputs(wildcards):
    """cal_run's inputs (one job for the strategy's targets).  A strategy split into
    blocks asks for a file no rule makes instead, so Snakemake falls back to cal_merge
    (ruleorder: cal_run > cal_merge) and runs its blocks."""
    if cal_blocks(wildcards.study, wildcards.caldir, wildcards.strategy) > 1:
        return {
            "in_blocks": f"results/{wildcards.study}/{wildcards.caldir}/blocks/"
            f"{wildcards.strategy}/runs_in_blocks"
        }
    return cal_inputs(wildcards)


def cal_extra_args(wildcards, input):
    args = f"--anchors {input.anchors}" if hasattr(input, "anchors") else ""
    if hasattr(input, "posterior"):
        args += f" --posterior-meta {input.posterior}"
    if hasattr(input, "design"):
        args += f" --design {input.design}"
    prox = caldir_proximity(wildcards.caldir)
    return args + (f" --proximity {prox}" if prox is not None else "")


def cal_strategies(wildcards):
    return config["studies"][wildcards.study]["calibration"]["strategies"]


def cal_summary_figs(study):
    s = config["studies"][study]["calibration"]["strategies"]
    out = [f"results/{study}/calibration/strategies.png"]
    if "rs" in s and "op" in s:
        out += [
            f"results/{study}/calibration/rs_vs_op.csv",
            f"results/{study}/calibration/rs_vs_op.png",
        ]
    return out


def sweep_values(study):
    return [f"{float(r):g}" for r in config["studies"][study]["calibration"]["sweep"]]


def sweep_records(study):
    return {r: f"results/{study}/{SWEEP_PREFIX}{r}/pts.csv" for r in sweep_values(study)}


def noise_level(study):
    opts = config["studies"][study]["simulator"].get("options") or {}
    return float(opts.get("noise_rel", 0.0))


def noise_pairs(study):
    names = [study] + list(config["studies"][study]["calibration"]["noise_studies"])
    return {f"{s}:{noise_level(s):g}": f"results/{s}/calibration/pts.csv" for s in names}


def posterior_studies():
    return [s for s in cal_studies() if config["studies"][s]["calibration"]["posterior"]["enabled"]]


def posterior_params(wildcards):
    """Study keys + the calibration.posterior section (nothing else reruns it)."""
    cfg = config["studies"][wildcards.study]
    out = {k: cfg[k] for k in CAL_STUDY_KEYS if k in cfg}
    out["calibration"] = {"posterior": cfg["calibration"]["posterior"]}
    return as_json(out)
