# Calibration stage (paper 1): strategies under a simulation budget, their summary and
# the experiments' figures.  One job per study x strategy (and per proximity value of
# the sweep); every job's params hold only the keys it reads, so changing a proximity
# value reruns only the jobs that use it and never retrains the metamodel.

CAL_STRATEGIES = ("rs", "op", "stp", "pts", "adaptive", "blackbox")
# study keys a calibration job needs to rebuild the study's space and simulator
CAL_STUDY_KEYS = ("simulator", "parameters", "contexts", "constraints", "outputs")
# strategies that start from the full-space OP point (solved once per target)
CAL_USES_ANCHORS = ("op", "pts", "adaptive")


wildcard_constraints:
    strategy="|".join(CAL_STRATEGIES),
    prox=r"[0-9][0-9.e+-]*",
    which="[A-Za-z0-9_]+",


localrules:
    calibration_summary,
    calibration_rs_vs_op,
    calibration_sweep,
    calibration_contexts,
    calibration_noise,


def cal_studies():
    return [s for s in STUDIES if config["studies"][s].get("calibration", {}).get("enabled")]


def cal_solver(wildcards):
    """The solver option set for OP solves: calibration.solver, else optimize.solver."""
    cfg = config["studies"][wildcards.study]
    name = (cfg.get("calibration") or {}).get("solver") or (cfg.get("optimize") or {}).get(
        "solver"
    )
    return as_json(dict((config.get("solvers") or {}).get(name, {})) if name else {})


def cal_params(strategy, with_proximity=True):
    """Study keys + only the calibration settings `strategy` reads."""

    def fn(wildcards):
        s = strategy or wildcards.strategy
        cfg = config["studies"][wildcards.study]
        cal = cfg["calibration"]
        sub = {k: cal[k] for k in ("sampling", "mc_samples", "rescore")}
        if s != "op":
            sub["budget"] = cal["budget"]
        if with_proximity and s in ("stp", "pts", "adaptive"):
            sub["proximity"] = cal["proximity"]
        if s in ("adaptive", "blackbox"):
            sub[s] = cal[s]
        out = cal_study_dict(cfg)
        out["calibration"] = sub
        if s == "adaptive" and cal["adaptive"]["update"] in ("fine_tune", "both"):
            out["metamodel"] = cfg["metamodel"]
        return as_json(out)

    return fn


def cal_study_dict(cfg):
    """The study keys a job needs, plus the input order (as_json sorts dict keys, and
    the metamodel's inputs are in config order)."""
    out = {k: cfg[k] for k in CAL_STUDY_KEYS if k in cfg}
    out["input_order"] = list(cfg["parameters"]) + list(cfg.get("contexts") or {})
    return out


def cal_study_only(wildcards):
    return as_json(cal_study_dict(config["studies"][wildcards.study]))


MM_FILES = {
    "model": "results/{study}/metamodel/model.pt",
    "meta": "results/{study}/metamodel/metamodel.json",
}


rule calibration_anchors:
    input:
        **MM_FILES,
        targets="results/{study}/targets.csv",
    output:
        "results/{study}/calibration/anchors.csv",
    params:
        cfg=cal_study_only,
        solver=cal_solver,
    log:
        "results/logs/{study}/calibration_anchors.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_anchors.tsv"
    threads: config["threads"]
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib calibrate-anchors --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {config[seed]} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "--output {output} > {log} 2>&1"


rule calibration_anchors_extra:
    input:
        **MM_FILES,
        targets="results/{study}/targets_{which}.csv",
    output:
        "results/{study}/calibration/targets_{which}/anchors.csv",
    params:
        cfg=cal_study_only,
        solver=cal_solver,
    log:
        "results/logs/{study}/calibration_anchors_{which}.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_anchors_{which}.tsv"
    threads: config["threads"]
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib calibrate-anchors --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {config[seed]} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "--output {output} > {log} 2>&1"


def cal_inputs(target_file, anchors_file):
    def fn(wildcards):
        d = {k: v.format(study=wildcards.study) for k, v in MM_FILES.items()}
        d["targets"] = target_file.format(**wildcards)
        if wildcards.strategy in CAL_USES_ANCHORS:
            d["anchors"] = anchors_file.format(**wildcards)
        return d

    return fn


def anchors_arg(wildcards, input):
    return f"--anchors {input.anchors}" if hasattr(input, "anchors") else ""


rule calibrate:
    input:
        unpack(cal_inputs("results/{study}/targets.csv",
                          "results/{study}/calibration/anchors.csv")),
    output:
        records="results/{study}/calibration/{strategy}.csv",
        runs="results/{study}/calibration/runs/{strategy}.csv",
    params:
        cfg=cal_params(None),
        solver=cal_solver,
        anchors=anchors_arg,
    log:
        "results/logs/{study}/calibrate_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibrate_{strategy}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib calibrate --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {config[seed]} --strategy {wildcards.strategy} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "{params.anchors} --output {output.records} --runs {output.runs} > {log} 2>&1"


rule calibrate_extra:
    input:
        unpack(cal_inputs("results/{study}/targets_{which}.csv",
                          "results/{study}/calibration/targets_{which}/anchors.csv")),
    output:
        records="results/{study}/calibration/targets_{which}/{strategy}.csv",
        runs="results/{study}/calibration/targets_{which}/runs/{strategy}.csv",
    params:
        cfg=cal_params(None),
        solver=cal_solver,
        anchors=anchors_arg,
    log:
        "results/logs/{study}/calibrate_{which}_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibrate_{which}_{strategy}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib calibrate --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {config[seed]} --strategy {wildcards.strategy} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "{params.anchors} --output {output.records} --runs {output.runs} > {log} 2>&1"


rule calibrate_sweep:
    input:
        **MM_FILES,
        targets="results/{study}/targets.csv",
        anchors="results/{study}/calibration/anchors.csv",
    output:
        records="results/{study}/calibration/sweep/pts_R{prox}.csv",
        runs="results/{study}/calibration/sweep/pts_R{prox}_runs.csv",
    params:
        cfg=cal_params("pts", with_proximity=False),
        solver=cal_solver,
    log:
        "results/logs/{study}/calibrate_sweep_R{prox}.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibrate_sweep_R{prox}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "simcalib calibrate --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {config[seed]} --strategy pts "
        "--proximity {wildcards.prox} --metamodel results/{wildcards.study}/metamodel "
        "--targets {input.targets} --anchors {input.anchors} "
        "--output {output.records} --runs {output.runs} > {log} 2>&1"


def cal_strategies(wildcards):
    return config["studies"][wildcards.study]["calibration"]["strategies"]


def cal_summary_figs(study):
    s = config["studies"][study]["calibration"]["strategies"]
    out = [f"results/{study}/calibration/strategies.png"]
    if "rs" in s and "op" in s:
        out += [f"results/{study}/calibration/rs_vs_op.csv",
                f"results/{study}/calibration/rs_vs_op.png"]
    return out


rule calibration_summary:
    input:
        lambda w: [f"results/{w.study}/calibration/{s}.csv" for s in cal_strategies(w)],
    output:
        summary=figure("results/{study}/calibration/summary.csv", "cal_summary", "Paper 1",
                       "{study}"),
        figure=figure("results/{study}/calibration/strategies.png", "cal_strategies",
                      "Paper 1", "{study}"),
    params:
        pairs=lambda w: " ".join(
            f"{s}=results/{w.study}/calibration/{s}.csv" for s in cal_strategies(w)
        ),
    log:
        "results/logs/{study}/calibration_summary.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_summary.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib calibration-summary --records {params.pairs} --output {output.summary} "
        "--figure {output.figure} --title '{wildcards.study}' > {log} 2>&1"


rule calibration_rs_vs_op:
    input:
        rs="results/{study}/calibration/rs.csv",
        op="results/{study}/calibration/op.csv",
    output:
        table=figure("results/{study}/calibration/rs_vs_op.csv", "cal_rs_vs_op", "Paper 1",
                     "{study}"),
        figure=figure("results/{study}/calibration/rs_vs_op.png", "cal_rs_vs_op", "Paper 1",
                      "{study}"),
    log:
        "results/logs/{study}/calibration_rs_vs_op.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_rs_vs_op.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib calibration-summary --records rs={input.rs} op={input.op} "
        "--output {output.table} --figure-rs-op {output.figure} > {log} 2>&1"


def sweep_values(study):
    return [f"{float(r):g}" for r in config["studies"][study]["calibration"]["sweep"]]


rule calibration_sweep:
    input:
        lambda w: [
            f"results/{w.study}/calibration/sweep/pts_R{r}.csv" for r in sweep_values(w.study)
        ],
    output:
        table=figure("results/{study}/calibration/sweep.csv", "cal_sweep", "Paper 1",
                     "{study}"),
        figure=figure("results/{study}/calibration/sweep.png", "cal_sweep", "Paper 1",
                      "{study}"),
    params:
        pairs=lambda w: " ".join(
            f"{r}=results/{w.study}/calibration/sweep/pts_R{r}.csv" for r in sweep_values(w.study)
        ),
    log:
        "results/logs/{study}/calibration_sweep.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_sweep.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib calibration-sweep --records {params.pairs} --output {output.table} "
        "--figure {output.figure} --title '{wildcards.study}: PtS proximity sweep' > {log} 2>&1"


rule calibration_contexts:
    input:
        ins="results/{study}/calibration/{strategy}.csv",
        oos="results/{study}/calibration/targets_{which}/{strategy}.csv",
    output:
        table=figure("results/{study}/calibration/contexts_{which}_{strategy}.csv",
                     "cal_contexts", "Paper 1", "{study}"),
        figure=figure("results/{study}/calibration/contexts_{which}_{strategy}.png",
                      "cal_contexts", "Paper 1", "{study}"),
    log:
        "results/logs/{study}/calibration_contexts_{which}_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_contexts_{which}_{strategy}.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib calibration-contexts --insample {input.ins} --outofsample {input.oos} "
        "--strategy {wildcards.strategy} --output {output.table} --figure {output.figure} "
        "> {log} 2>&1"


def noise_level(study):
    opts = config["studies"][study]["simulator"].get("options") or {}
    return float(opts.get("noise_rel", 0.0))


def noise_pairs(study):
    names = [study] + list(config["studies"][study]["calibration"]["noise_studies"])
    return {f"{s}:{noise_level(s):g}": f"results/{s}/calibration/pts.csv" for s in names}


rule calibration_noise:
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
        "results/logs/{study}/calibration_noise.log",
    benchmark:
        "results/benchmarks/rules/{study}/calibration_noise.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "simcalib calibration-noise --records {params.pairs} --output {output.table} "
        "--figure {output.figure} > {log} 2>&1"


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
