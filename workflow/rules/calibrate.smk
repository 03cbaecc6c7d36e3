# Calibration stage (paper 1): strategies under a simulation budget, their summary and
# the experiments' figures.  One job per study x target set x strategy: cal_run writes
# the strategy's records itself when its targets make one block
# (calibration.block_size); a strategy split into blocks runs one cal_run_block job per
# block and cal_merge joins them into the records one job writes, byte for byte.  Every
# job's params hold only the keys its strategy reads (the strategy registry says
# which), so changing a proximity value reruns only the jobs that use it and never
# retrains.
#
# A calibration directory ({caldir}) names the target set and, for the PtS proximity
# sweep, the proximity:
#   calibration                  the study's targets (results/<study>/targets.csv)
#   calibration/targets_<name>   an extra target set (results/<study>/targets_<name>.csv)
#   calibration/sweep/R<value>   PtS on the study's targets at proximity <value>


include: "helpers/calibrate.smk"


wildcard_constraints:
    strategy="|".join(STRATEGIES),
    caldir=r"calibration(/targets_[A-Za-z0-9_]+|/sweep/R[0-9][0-9.e+-]*)?",
    which="[A-Za-z0-9_]+",
    block="[0-9]+",
    step="[0-9]+",


localrules:
    cal_merge,
    cal_summary,
    cal_rs_vs_op,
    cal_sweep,
    cal_contexts,
    cal_noise,


rule cal_anchors:
    input:
        unpack(anchors_inputs),
    output:
        "results/{study}/{caldir}/anchors.csv",
    log:
        "results/logs/{study}/{caldir}/cal_anchors.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_anchors.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: lambda w: milp_cores(solver_options(config, w.study))
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        cfg=cal_study_only,
        solver=cal_solver,
        seed=config["seed"],
        solved=solved_arg,
    shell:
        "python -m simcalib cal-anchors --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} "
        "--metamodel results/{wildcards.study}/metamodel --targets {input.targets} "
        "{params.solved} --output {output} > {log} 2>&1"


# a strategy of one block: one job, no merge (a job and a process fewer per strategy:
# the default config's toy studies spend more on job start-up than on their runs)
rule cal_run:
    input:
        unpack(cal_whole_inputs),
    output:
        records="results/{study}/{caldir}/{strategy}.csv",
        runs="results/{study}/{caldir}/runs/{strategy}.csv",
    log:
        "results/logs/{study}/{caldir}/cal_run_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_run_{strategy}.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: cal_threads
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        cfg=cal_params,
        solver=cal_solver,
        extra=cal_extra_args,
        seed=config["seed"],
        mm=mm_arg,
    shell:
        "python -m simcalib cal-run --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} --strategy {wildcards.strategy} "
        "{params.mm} --targets {input.targets} "
        "{params.extra} --threads {threads} "
        "--output {output.records} --output-runs {output.runs} > {log} 2>&1"


# a strategy in blocks: cal_run_block per block, joined by cal_merge (cal_run, when
# its inputs exist, i.e. for one block, is preferred); sequential as round jobs:
# cal_seq_step per round, cal_seq_sim per chunk of its runs, then cal_seq_final
ruleorder: cal_run > cal_seq_final_local > cal_seq_final > cal_merge
# a round's step (and the final step) as a local rule where sequential.step_local says so
# (no queue, start-up or status-check wait a round); the _local rules' inputs hold a file
# no rule makes otherwise, so cal_seq_step and cal_seq_final are used
ruleorder: cal_seq_step_local > cal_seq_step


# one step of sequential's search (step 0: the start; then the ensemble fit and one
# round's proposal MILPs), reading the previous step's state and runs
rule cal_seq_step:
    input:
        unpack(seq_step_inputs),
    output:
        state="results/{study}/{caldir}/rounds/sequential/step_{step}.pkl",
        props="results/{study}/{caldir}/rounds/sequential/props_{step}.pkl",
    log:
        "results/logs/{study}/{caldir}/cal_seq_step_{step}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_seq_step_{step}.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        cfg=seq_params,
        solver=cal_solver,
        extra=seq_extra_args,
        seed=config["seed"],
        mm=mm_arg,
        state=lambda w, input: seq_state_args(w, input),
    shell:
        "python -m simcalib cal-step --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} {params.mm} "
        "--targets {input.targets} {params.extra} --step {wildcards.step} {params.state} "
        "--output-state {output.state} --output-proposals {output.props} > {log} 2>&1"


use rule cal_seq_step as cal_seq_step_local with:
    input:
        unpack(seq_step_local_inputs),


localrules:
    cal_seq_step_local,


# chunk_size of one step's proposals, simulated (journaled run by run)
rule cal_seq_sim:
    input:
        "results/{study}/{caldir}/rounds/sequential/props_{step}.pkl",
    output:
        "results/{study}/{caldir}/rounds/sequential/sim_{step}_{chunk}.pkl",
    log:
        "results/logs/{study}/{caldir}/cal_seq_sim_{step}_{chunk}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_seq_sim_{step}_{chunk}.tsv"
    priority: PRIORITY["simulate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: seq_sim_threads
    resources:
        mem_mb=2000,
        runtime=240,
        # runs side by side; a resource, not a param: --cores is no reason to rerun
        sim_workers=seq_sim_workers,
    params:
        cfg=cal_study_only,
        seed=config["seed"],
        size=lambda w: config["studies"][w.study]["calibration"]["sequential"]["chunk_size"],
    shell:
        "python -m simcalib cal-sim --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --proposals {input} --chunk {wildcards.chunk} "
        "--chunk-size {params.size} --threads {resources.sim_workers} --output {output} > {log} 2>&1"


# the search's end: the last runs entered, the answer and the records (cal-run's code)
rule cal_seq_final:
    input:
        unpack(seq_final_inputs),
    output:
        records="results/{study}/{caldir}/sequential.csv",
        runs="results/{study}/{caldir}/runs/sequential.csv",
    log:
        "results/logs/{study}/{caldir}/cal_run_sequential.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_run_sequential.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: lambda w: cal_threads(_seq_wc(w))
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        cfg=seq_params,
        solver=cal_solver,
        extra=seq_extra_args,
        seed=config["seed"],
        mm=mm_arg,
        state=lambda w, input: seq_state_args(w, input, "--round-state", "--round-sims"),
    shell:
        "python -m simcalib cal-run --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} --strategy sequential {params.mm} "
        "--targets {input.targets} {params.extra} --threads {threads} {params.state} "
        "--output {output.records} --output-runs {output.runs} > {log} 2>&1"


use rule cal_seq_final as cal_seq_final_local with:
    input:
        unpack(seq_final_local_inputs),


localrules:
    cal_seq_final_local,


rule cal_run_block:
    input:
        unpack(cal_inputs),
    output:
        temp("results/{study}/{caldir}/blocks/{strategy}/{block}.pkl"),
    log:
        "results/logs/{study}/{caldir}/cal_run_{strategy}_{block}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_run_{strategy}_{block}.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: cal_threads
    resources:
        mem_mb=4000,
        runtime=240,
    params:
        cfg=cal_params,
        solver=cal_solver,
        extra=cal_extra_args,
        seed=config["seed"],
        mm=mm_arg,
        block=cal_block_arg,
    shell:
        "python -m simcalib cal-run --study {wildcards.study} --params {params.cfg:q} "
        "--solver {params.solver:q} --seed {params.seed} --strategy {wildcards.strategy} "
        "{params.mm} --targets {input.targets} "
        "{params.extra} --threads {threads} --block {params.block} "
        "--output-block {output} > {log} 2>&1"


rule cal_merge:
    input:
        cal_block_files,
    output:
        records="results/{study}/{caldir}/{strategy}.csv",
        runs="results/{study}/{caldir}/runs/{strategy}.csv",
    log:
        "results/logs/{study}/{caldir}/cal_merge_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/{caldir}/cal_merge_{strategy}.tsv"
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m simcalib cal-merge --study {wildcards.study} --blocks {input} "
        "--output {output.records} --output-runs {output.runs} > {log} 2>&1"


rule cal_posterior:
    input:
        unpack(lambda w: {k: v.format(study=w.study) for k, v in MM_FILES.items()}),
        targets="results/{study}/targets.csv",
        dataset="results/{study}/dataset.csv",
    output:
        summary=figure(
            "results/{study}/calibration/posterior/posterior_summary.csv",
            "cal_posterior",
            "Posterior",
            "{study}",
        ),
        intervals=figure(
            "results/{study}/calibration/posterior/intervals.png",
            "cal_posterior",
            "Posterior",
            "{study}",
        ),
        meta="results/{study}/calibration/posterior/posterior.json",
        ppc="results/{study}/calibration/posterior/ppc.csv",
        targets=directory("results/{study}/calibration/posterior/targets"),
    log:
        "results/logs/{study}/cal_posterior.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_posterior.tsv"
    priority: PRIORITY["calibrate"]
    conda:
        "../../envs/simcalib.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        cfg=posterior_params,
        seed=config["seed"],
    shell:
        "python -m simcalib cal-posterior --study {wildcards.study} --params {params.cfg:q} "
        "--seed {params.seed} --metamodel results/{wildcards.study}/metamodel "
        "--targets {input.targets} --dataset {input.dataset} "
        "--output-dir results/{wildcards.study}/calibration/posterior > {log} 2>&1"


rule cal_summary:
    input:
        unpack(lambda w: {k: v for k, v in mm_files(w.study).items() if k == "meta"}),
        records=lambda w: [f"results/{w.study}/calibration/{s}.csv" for s in cal_strategies(w)],
        targets="results/{study}/targets.csv",
    output:
        summary=figure(
            "results/{study}/calibration/summary.csv", "cal_summary", "Paper 1", "{study}"
        ),
        figure=figure(
            "results/{study}/calibration/strategies.png", "cal_strategies", "Paper 1", "{study}"
        ),
    log:
        "results/logs/{study}/cal_summary.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_summary.tsv"
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        pairs=lambda w: " ".join(
            f"{s}=results/{w.study}/calibration/{s}.csv" for s in cal_strategies(w)
        ),
        meta=lambda w, input: f"--metamodel-info {input.meta}" if hasattr(input, "meta") else "",
    shell:
        "python -m simcalib cal-summary --records {params.pairs} --output {output.summary} "
        "--output-figure {output.figure} --title '{wildcards.study}' "
        "{params.meta} --targets {input.targets} > {log} 2>&1"


rule cal_rs_vs_op:
    input:
        rs="results/{study}/calibration/rs.csv",
        op="results/{study}/calibration/op.csv",
        targets="results/{study}/targets.csv",
    output:
        table=figure(
            "results/{study}/calibration/rs_vs_op.csv", "cal_rs_vs_op", "Paper 1", "{study}"
        ),
        figure=figure(
            "results/{study}/calibration/rs_vs_op.png", "cal_rs_vs_op", "Paper 1", "{study}"
        ),
    log:
        "results/logs/{study}/cal_rs_vs_op.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_rs_vs_op.tsv"
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m simcalib cal-summary --records rs={input.rs} op={input.op} "
        "--targets {input.targets} --output {output.table} "
        "--output-figure-rs-op {output.figure} > {log} 2>&1"


rule cal_sweep:
    input:
        lambda w: list(sweep_records(w.study).values()),
    output:
        table=figure("results/{study}/calibration/sweep.csv", "cal_sweep", "Paper 1", "{study}"),
        figure=figure("results/{study}/calibration/sweep.png", "cal_sweep", "Paper 1", "{study}"),
    log:
        "results/logs/{study}/cal_sweep.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_sweep.tsv"
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        pairs=lambda w: " ".join(f"{r}={p}" for r, p in sweep_records(w.study).items()),
    shell:
        "python -m simcalib cal-sweep --records {params.pairs} --output {output.table} "
        "--output-figure {output.figure} "
        "--title '{wildcards.study}: PtS proximity sweep' > {log} 2>&1"


rule cal_contexts:
    input:
        ins="results/{study}/calibration/{strategy}.csv",
        oos="results/{study}/calibration/targets_{which}/{strategy}.csv",
    output:
        table=figure(
            "results/{study}/calibration/contexts_{which}_{strategy}.csv",
            "cal_contexts",
            "Paper 1",
            "{study}",
        ),
        figure=figure(
            "results/{study}/calibration/contexts_{which}_{strategy}.png",
            "cal_contexts",
            "Paper 1",
            "{study}",
        ),
    log:
        "results/logs/{study}/cal_contexts_{which}_{strategy}.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_contexts_{which}_{strategy}.tsv"
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "python -m simcalib cal-contexts --insample {input.ins} --outofsample {input.oos} "
        "--strategy {wildcards.strategy} --output {output.table} --output-figure {output.figure} "
        "> {log} 2>&1"


rule cal_noise:
    input:
        lambda w: list(noise_pairs(w.study).values()),
    output:
        table=figure("results/{study}/calibration/noise.csv", "cal_noise", "Paper 1", "{study}"),
        figure=figure("results/{study}/calibration/noise.png", "cal_noise", "Paper 1", "{study}"),
    log:
        "results/logs/{study}/cal_noise.log",
    benchmark:
        "results/benchmarks/rules/{study}/cal_noise.tsv"
    conda:
        "../../envs/simcalib.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        pairs=lambda w: " ".join(f"{k}={v}" for k, v in noise_pairs(w.study).items()),
    shell:
        "python -m simcalib cal-noise --records {params.pairs} --output {output.table} "
        "--output-figure {output.figure} > {log} 2>&1"


for _s in posterior_studies():
    ALL_TARGETS += [
        f"results/{_s}/calibration/posterior/posterior_summary.csv",
        f"results/{_s}/calibration/posterior/intervals.png",
    ]

for _s in cal_studies():
    _cal = config["studies"][_s]["calibration"]
    ALL_TARGETS += [f"results/{_s}/calibration/summary.csv"] + cal_summary_figs(_s)
    if _cal["sweep"]:
        ALL_TARGETS += [
            f"results/{_s}/calibration/sweep.csv",
            f"results/{_s}/calibration/sweep.png",
        ]
    for _w in _cal["extra_targets"]:
        for _st in _cal["extra_strategies"]:
            ALL_TARGETS += [
                f"results/{_s}/calibration/contexts_{_w}_{_st}.csv",
                f"results/{_s}/calibration/contexts_{_w}_{_st}.png",
            ]
    if _cal["noise_studies"]:
        ALL_TARGETS += [
            f"results/{_s}/calibration/noise.csv",
            f"results/{_s}/calibration/noise.png",
        ]


# calibration.one_job: a study's whole calibration phase (OP anchors, its strategies of
# one block on each target set and the sweep, their tables) as one `simcalib batch` job,
# the verbs and arguments their own jobs would run, in one process: for simulators of
# milliseconds a run, where each job's start-up (~1.3 CPU s) costs more than its runs.
# Each member writes its own job's log.  These rules name their outputs without
# wildcards, so Snakemake prefers them to the rules above for those files.
for _study, _set in cal_job_sets():

    rule:
        name:
            f"cal_study_{_study}"
        input:
            _set["inputs"],
        output:
            _set["outputs"],
        log:
            _set["logs"],
        benchmark:
            _set["benchmark"]
        priority: _set["priority"]
        conda:
            "../../envs/simcalib.yaml"
        threads: _set["threads"]
        resources:
            mem_mb=4000,
            runtime=240,
        params:
            # a function: the plan's braces (a command simulator's {input_file}) are not
            # wildcards to expand
            plan=lambda wildcards, plan=_set["plan"]: plan,
        shell:
            "python -m simcalib batch --plan {params.plan:q} > {log[0]} 2>&1"
