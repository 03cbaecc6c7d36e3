# Calibration stage (paper 1): strategies under a simulation budget, their summary and
# the experiments' figures.  One job per study x target set x strategy; every job's
# params hold only the keys its strategy reads (the strategy registry says which), so
# changing a proximity value reruns only the jobs that use it and never retrains.
#
# A calibration directory ({caldir}) names the target set and, for the PtS proximity
# sweep, the proximity:
#   calibration                  the study's targets (results/<study>/targets.csv)
#   calibration/targets_<name>   an extra target set (results/<study>/targets_<name>.csv)
#   calibration/sweep/R<value>   PtS on the study's targets at proximity <value>

from simcalib.metamodel.strategies.registry import job_settings, registry
from simcalib.metamodel.strategies.settings import solver_options, solver_set_name

STRATEGIES = registry()
# study keys a calibration job needs to rebuild the study's space and simulator
CAL_STUDY_KEYS = ("simulator", "parameters", "contexts", "constraints", "outputs")
SWEEP_PREFIX = "calibration/sweep/R"


wildcard_constraints:
    strategy="|".join(STRATEGIES),
    caldir=r"calibration(/targets_[A-Za-z0-9_]+|/sweep/R[0-9][0-9.e+-]*)?",
    which="[A-Za-z0-9_]+",


localrules:
    cal_summary,
    cal_rs_vs_op,
    cal_sweep,
    cal_contexts,
    cal_noise,


def cal_studies():
    return [s for s in STUDIES if config["studies"][s].get("calibration", {}).get("enabled")]


def caldir_of(tset):
    """Calibration directory of a target set ("targets" or "targets_<name>")."""
    return "calibration" if tset == "targets" else f"calibration/{tset}"


def caldir_targets(caldir):
    """The target set a calibration directory calibrates (a sweep uses the study's)."""
    return caldir.split("/", 1)[1] if caldir.startswith("calibration/targets_") else "targets"


def caldir_proximity(caldir):
    """The proximity a sweep directory fixes, else None (the config's value)."""
    return caldir[len(SWEEP_PREFIX):] if caldir.startswith(SWEEP_PREFIX) else None


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
    out["calibration"] = sub
    return as_json(out)


def cal_min_r2(wildcards):
    """metamodel.min_r2 (the schema's default once that key exists; 0.9 until then)."""
    return config["studies"][wildcards.study].get("metamodel", {}).get("min_r2", 0.9)


def cal_study_only(wildcards):
    cfg = config["studies"][wildcards.study]
    return as_json({k: cfg[k] for k in CAL_STUDY_KEYS if k in cfg})


MM_FILES = {
    "model": "results/{study}/metamodel/model.pt",
    "meta": "results/{study}/metamodel/metamodel.json",
}


def anchors_inputs(wildcards):
    """Model files and the targets; for the study's own targets also mm_optimize's
    op.csv when it solved the same problems (same solver set, no output weights), so
    each full-space MILP is solved once per study."""
    d = {k: v.format(study=wildcards.study) for k, v in MM_FILES.items()}
    d["targets"] = f"results/{wildcards.study}/{caldir_targets(wildcards.caldir)}.csv"
    cfg = config["studies"][wildcards.study]
    opt = cfg.get("optimize") or {}
    if (wildcards.caldir == "calibration" and not opt.get("weights")
            and solver_set_name(cfg) == opt.get("solver")):
        d["solved"] = f"results/{wildcards.study}/op/op.csv"
    return d


def solved_arg(wildcards, input):
    return f"--solved {input.solved}" if hasattr(input, "solved") else ""


rule cal_anchors:
    input:
        unpack(anchors_inputs),
    output:
        "results/{study}/{caldir}/anchors.csv",
    params:
        cfg=cal_study_only,
        solver=cal_solver,
        seed=config["seed"],
        solved=solved_arg,
    log:
        "results/logs/{study}/{caldir}/cal_anchors.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_anchors.tsv"
    threads: config["threads"]
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib cal-anchors --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "{params.solved} --output {output} > {log} 2>&1"


def cal_inputs(wildcards):
    tset = caldir_targets(wildcards.caldir)
    d = {k: v.format(study=wildcards.study) for k, v in MM_FILES.items()}
    d["targets"] = f"results/{wildcards.study}/{tset}.csv"
    if STRATEGIES[wildcards.strategy].uses_anchor:
        d["anchors"] = f"results/{wildcards.study}/{caldir_of(tset)}/anchors.csv"
    return d


def cal_extra_args(wildcards, input):
    args = f"--anchors {input.anchors}" if hasattr(input, "anchors") else ""
    prox = caldir_proximity(wildcards.caldir)
    return args + (f" --proximity {prox}" if prox is not None else "")


rule cal_run:
    input:
        unpack(cal_inputs),
    output:
        records="results/{study}/{caldir}/{strategy}.csv",
        runs="results/{study}/{caldir}/runs/{strategy}.csv",
    params:
        cfg=cal_params,
        solver=cal_solver,
        extra=cal_extra_args,
        seed=config["seed"],
        min_r2=cal_min_r2,
    log:
        "results/logs/{study}/{caldir}/cal_run_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_run_{strategy}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib cal-run --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} --strategy {wildcards.strategy} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "{params.extra} --min-r2 {params.min_r2} --output {output.records} "
        "--output-runs {output.runs} > {log} 2>&1"


def cal_strategies(wildcards):
    return config["studies"][wildcards.study]["calibration"]["strategies"]


def cal_summary_figs(study):
    s = config["studies"][study]["calibration"]["strategies"]
    out = [f"results/{study}/calibration/strategies.png"]
    if "rs" in s and "op" in s:
        out += [f"results/{study}/calibration/rs_vs_op.csv",
                f"results/{study}/calibration/rs_vs_op.png"]
    return out


rule cal_summary:
    input:
        records=lambda w: [f"results/{w.study}/calibration/{s}.csv" for s in cal_strategies(w)],
        meta=MM_FILES["meta"],
    output:
        summary=figure("results/{study}/calibration/summary.csv", "cal_summary", "Paper 1",
                       "{study}"),
        figure=figure("results/{study}/calibration/strategies.png", "cal_strategies",
                      "Paper 1", "{study}"),
    params:
        pairs=lambda w: " ".join(
            f"{s}=results/{w.study}/calibration/{s}.csv" for s in cal_strategies(w)
        ),
        min_r2=cal_min_r2,
    log:
        "results/logs/{study}/cal_summary.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_summary.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib cal-summary --records {params.pairs} --output {output.summary} "
        "--output-figure {output.figure} --title '{wildcards.study}' "
        "--metamodel-info {input.meta} "
        "--min-r2 {params.min_r2} > {log} 2>&1"


rule cal_rs_vs_op:
    input:
        rs="results/{study}/calibration/rs.csv",
        op="results/{study}/calibration/op.csv",
    output:
        table=figure("results/{study}/calibration/rs_vs_op.csv", "cal_rs_vs_op", "Paper 1",
                     "{study}"),
        figure=figure("results/{study}/calibration/rs_vs_op.png", "cal_rs_vs_op", "Paper 1",
                      "{study}"),
    log:
        "results/logs/{study}/cal_rs_vs_op.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_rs_vs_op.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib cal-summary --records rs={input.rs} op={input.op} "
        "--output {output.table} --output-figure-rs-op {output.figure} > {log} 2>&1"


def sweep_values(study):
    return [f"{float(r):g}" for r in config["studies"][study]["calibration"]["sweep"]]


def sweep_records(study):
    return {r: f"results/{study}/{SWEEP_PREFIX}{r}/pts.csv" for r in sweep_values(study)}


rule cal_sweep:
    input:
        lambda w: list(sweep_records(w.study).values()),
    output:
        table=figure("results/{study}/calibration/sweep.csv", "cal_sweep", "Paper 1",
                     "{study}"),
        figure=figure("results/{study}/calibration/sweep.png", "cal_sweep", "Paper 1",
                      "{study}"),
    params:
        pairs=lambda w: " ".join(f"{r}={p}" for r, p in sweep_records(w.study).items()),
    log:
        "results/logs/{study}/cal_sweep.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_sweep.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib cal-sweep --records {params.pairs} --output {output.table} "
        "--output-figure {output.figure} "
        "--title '{wildcards.study}: PtS proximity sweep' > {log} 2>&1"


rule cal_contexts:
    input:
        ins="results/{study}/calibration/{strategy}.csv",
        oos="results/{study}/calibration/targets_{which}/{strategy}.csv",
    output:
        table=figure("results/{study}/calibration/contexts_{which}_{strategy}.csv",
                     "cal_contexts", "Paper 1", "{study}"),
        figure=figure("results/{study}/calibration/contexts_{which}_{strategy}.png",
                      "cal_contexts", "Paper 1", "{study}"),
    log:
        "results/logs/{study}/cal_contexts_{which}_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_contexts_{which}_{strategy}.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib cal-contexts --insample {input.ins} --outofsample {input.oos} "
        "--strategy {wildcards.strategy} --output {output.table} --output-figure {output.figure} "
        "> {log} 2>&1"


def noise_level(study):
    opts = config["studies"][study]["simulator"].get("options") or {}
    return float(opts.get("noise_rel", 0.0))


def noise_pairs(study):
    names = [study] + list(config["studies"][study]["calibration"]["noise_studies"])
    return {f"{s}:{noise_level(s):g}": f"results/{s}/calibration/pts.csv" for s in names}


rule cal_noise:
    input:
        lambda w: list(noise_pairs(w.study).values()),
    output:
        table=figure("results/{study}/calibration/noise.csv", "cal_noise", "Paper 1",
                     "{study}"),
        figure=figure("results/{study}/calibration/noise.png", "cal_noise", "Paper 1",
                      "{study}"),
    params:
        pairs=lambda w: " ".join(f"{k}={v}" for k, v in noise_pairs(w.study).items()),
    log:
        "results/logs/{study}/cal_noise.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_noise.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib cal-noise --records {params.pairs} --output {output.table} "
        "--output-figure {output.figure} > {log} 2>&1"


for _s in cal_studies():
    _cal = config["studies"][_s]["calibration"]
    ALL_TARGETS += [f"results/{_s}/calibration/summary.csv"] + cal_summary_figs(_s)
    if _cal["sweep"]:
        ALL_TARGETS += [f"results/{_s}/calibration/sweep.csv",
                        f"results/{_s}/calibration/sweep.png"]
    for _w in _cal["extra_targets"]:
        for _st in _cal["extra_strategies"]:
            ALL_TARGETS += [f"results/{_s}/calibration/contexts_{_w}_{_st}.csv",
                            f"results/{_s}/calibration/contexts_{_w}_{_st}.png"]
    if _cal["noise_studies"]:
        ALL_TARGETS += [f"results/{_s}/calibration/noise.csv",
                        f"results/{_s}/calibration/noise.png"]
