# Input functions, params and constants of the calibrate rules (workflow/rules/calibrate.smk),
# kept apart from the rules as `snakemake --lint` asks.

import json
from types import SimpleNamespace

from simcalib.metamodel.strategies.registry import job_settings, registry
from simcalib.metamodel.strategies.rounds import chunks
from simcalib.metamodel.strategies.settings import (
    merged_settings,
    solver_options,
    solver_set_name,
)
from simcalib.study.observations import resolve, target_sets
from simcalib.study.simulation import concurrent_calls

STRATEGIES = registry()
# study keys a calibration job needs to rebuild the study's space and simulator (and,
# added by study_keys of helpers/simulate.smk, its resolved series)
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
    if "sequential" in sub:
        # how the search is cut into jobs never changes its runs: not a reason to rerun
        sub["sequential"] = {
            k: v
            for k, v in sub["sequential"].items()
            if k not in ("jobs", "chunk_size", "step_local")
        }
    out = study_keys(wildcards.study, (*CAL_STUDY_KEYS, *spec.study_keys))
    # a declared stochastic simulator turns on choosing by mean (select.top: auto)
    out["noise"] = {"stochastic": (cfg.get("noise") or {}).get("stochastic", "auto")}
    out["calibration"] = sub
    return as_json(out)


def cal_threads(wildcards):
    """Parallel simulator runs inside one calibration job: the study's design.threads
    for a simulator that runs calls concurrently (a command), else 1 (the records do
    not depend on it: each run's seed comes from its run id)."""
    cfg = config["studies"][wildcards.study]
    return design_threads(wildcards.study) if concurrent_calls(cfg) else 1


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
    return as_json(study_keys(wildcards.study, CAL_STUDY_KEYS))


MM_FILES = {
    "model": "results/{study}/metamodel/model.pt",
    "meta": "results/{study}/metamodel/metamodel.json",
    "failure": "results/{study}/metamodel/failure.json",
}


def has_metamodel(study):
    return bool(config["studies"][study]["metamodel"]["enabled"])


def mm_files(study):
    """The study's metamodel files (none for a study that trains no metamodel: only
    sequential calibrates it)."""
    return {k: v.format(study=study) for k, v in MM_FILES.items()} if has_metamodel(study) else {}


def mm_arg(wildcards):
    """cal-run's --metamodel (nothing without one: Delta's scale from sd_ or the start)."""
    return (
        f"--metamodel results/{wildcards.study}/metamodel" if has_metamodel(wildcards.study) else ""
    )


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
    d = mm_files(wildcards.study)
    d["targets"] = f"results/{wildcards.study}/{tset}.csv"
    if STRATEGIES[wildcards.strategy].uses_anchor:
        d["anchors"] = f"results/{wildcards.study}/{caldir_of(tset)}/anchors.csv"
    if wildcards.strategy == "posterior":
        # the error scale kappa calibrated once per study by cal_posterior
        d["posterior"] = f"results/{wildcards.study}/calibration/posterior/posterior.json"
    if STRATEGIES[wildcards.strategy].design_key and has_design(wildcards.study):
        # the study's design runs: the start, counted, with sequential.use_design; else
        # their failed runs train its failure classifier (a study without a design
        # does not wait for one)
        d["design"] = f"results/{wildcards.study}/dataset.csv"
    return d


def cal_whole_inputs(wildcards):
    """cal_run's inputs (one job for the strategy's targets).  A strategy split into
    blocks, or sequential run as round jobs, asks for a file no rule makes instead, so
    Snakemake falls back to cal_seq_final or cal_merge (ruleorder: cal_run >
    cal_seq_final > cal_merge)."""
    if wildcards.strategy == "sequential" and seq_rounds(wildcards.study):
        return {"in_rounds": f"results/{wildcards.study}/{wildcards.caldir}/rounds/not_one_job"}
    if cal_blocks(wildcards.study, wildcards.caldir, wildcards.strategy) > 1:
        return {
            "in_blocks": f"results/{wildcards.study}/{wildcards.caldir}/blocks/"
            f"{wildcards.strategy}/runs_in_blocks"
        }
    return cal_inputs(wildcards)


# ---- sequential as round jobs (sequential.jobs): step -> chunk jobs -> step ... final ----

SEQ_DIR = "results/{study}/{caldir}/rounds/sequential"


def seq_rounds(study):
    """Whether the study's sequential search runs as round jobs: sequential.jobs
    rounds, or auto for a user's simulator (a command or a Python function: minutes
    to hours a run), never for the built-in ones (milliseconds a run, where a job's
    start-up costs more than its runs)."""
    cfg = config["studies"][study]
    mode = cfg["calibration"]["sequential"]["jobs"]
    if mode == "auto":
        return cfg["simulator"]["type"] in ("command", "python")
    return mode == "rounds"


def seq_plan(study, caldir):
    """The most runs of each step (rounds.plan): from the budget the search spends,
    the batch, the targets, and whether the start is known before the run."""
    from simcalib.metamodel.strategies.rounds import plan
    from simcalib.metamodel.strategies.runner import budget_split
    from simcalib.study import Study

    cfg = config["studies"][study]
    cal = merged_settings(cfg["calibration"])
    s = cal["sequential"]
    st = Study(study, cfg, partial=True)
    eff, top, reps = budget_split(st, cal, int(cal["budget"]), STRATEGIES["sequential"])
    exact = not cfg.get("contexts") and not s["use_design"]
    return plan(
        n_targets(study, caldir_targets(caldir)),
        eff - top * reps,
        len(st.space.tunable_names),
        int(s["initial_per_input"]),
        int(s["batch"]),
        exact,
    )


def seq_chunks(wildcards, step):
    size = config["studies"][wildcards.study]["calibration"]["sequential"]["chunk_size"]
    n = chunks(seq_plan(wildcards.study, wildcards.caldir)[int(step)], size)
    base = SEQ_DIR.format(study=wildcards.study, caldir=wildcards.caldir)
    return [f"{base}/sim_{step}_{c}.pkl" for c in range(n)]


def _seq_wc(wildcards):
    return SimpleNamespace(study=wildcards.study, caldir=wildcards.caldir, strategy="sequential")


def seq_step_inputs(wildcards):
    """A step reads what cal_run would, plus the previous step's state and runs."""
    d = cal_inputs(_seq_wc(wildcards))
    step = int(wildcards.step)
    if step > 0:
        base = SEQ_DIR.format(study=wildcards.study, caldir=wildcards.caldir)
        d["state"] = f"{base}/step_{step - 1}.pkl"
        d["sims"] = seq_chunks(wildcards, step - 1)
    return d


def _if_step_local(wildcards, inputs):
    """A _local rule's inputs: ``inputs(wildcards)`` where the study's
    sequential.step_local is true, else a file no rule makes, so that the rule cannot
    run and its cluster twin (lower in the ruleorder) does."""
    if not config["studies"][wildcards.study]["calibration"]["sequential"]["step_local"]:
        return {"remote": f"results/{wildcards.study}/{wildcards.caldir}/rounds/not_local"}
    return inputs(wildcards)


def seq_step_local_inputs(wildcards):
    """cal_seq_step_local's inputs: cal_seq_step's where step_local is true."""
    return _if_step_local(wildcards, seq_step_inputs)


def seq_sim_threads(wildcards):
    """Threads of a round's simulation job: one per run of its chunk for a simulator
    that runs calls concurrently (chunk_size is the knob of runs side by side in a job;
    design.threads, default 1, is the design's), 1 for an in-process Python function (its
    calls run one after another).  The records do not depend on it: each run's seed
    comes from its run id."""
    cfg = config["studies"][wildcards.study]
    if not concurrent_calls(cfg):
        return 1
    size = int(cfg["calibration"]["sequential"]["chunk_size"])
    rows = seq_plan(wildcards.study, wildcards.caldir)[int(wildcards.step)]
    return max(1, min(size, rows - int(wildcards.chunk) * size))  # the last chunk: the rest


def seq_sim_workers(wildcards, threads):
    """Runs side by side in a round's simulation job: inside a cluster job the cores it
    was given (seq_sim_threads, its --cpus-per-task), elsewhere the threads Snakemake
    grants (at most --cores).  A cluster job's own Snakemake caps {threads} at the CPUs
    it sees, which on a node that declares more CPUs than it has (the test cluster's
    SLURM_CPUS) is not the allocation.  The records do not depend on it."""
    return seq_sim_threads(wildcards) if workflow.remote_exec else threads


def seq_final_inputs(wildcards):
    """cal_seq_final's inputs: cal_run's, the last step's state and runs (a file no
    rule makes when the search runs as one job, so cal_run is used)."""
    if not seq_rounds(wildcards.study):
        return {"one_job": f"results/{wildcards.study}/{wildcards.caldir}/rounds/not_rounds"}
    d = cal_inputs(_seq_wc(wildcards))
    last = len(seq_plan(wildcards.study, wildcards.caldir)) - 1
    base = SEQ_DIR.format(study=wildcards.study, caldir=wildcards.caldir)
    d["state"] = f"{base}/step_{last}.pkl"
    d["sims"] = seq_chunks(wildcards, last)
    return d


def seq_final_local_inputs(wildcards):
    """cal_seq_final_local's inputs: cal_seq_final's where step_local is true (else
    cal_seq_final, or cal_run, runs)."""
    return _if_step_local(wildcards, seq_final_inputs)


def seq_params(wildcards):
    return cal_params(_seq_wc(wildcards))


def seq_extra_args(wildcards, input):
    """--design (and --proximity of a sweep directory) as cal_run gets them."""
    return cal_extra_args(_seq_wc(wildcards), input)


def seq_state_args(wildcards, input, flag="--state", sims="--sims"):
    if not hasattr(input, "state"):
        return ""
    return f"{flag} {input.state} {sims} " + " ".join(input.sims)


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
    """Studies whose design-metamodel posterior runs (calibration.posterior; it needs the
    design and the metamodel)."""
    return [
        s
        for s in cal_studies()
        if config["studies"][s]["calibration"]["posterior"]["enabled"] and has_metamodel(s)
    ]


def posterior_params(wildcards):
    """Study keys + the calibration.posterior section (nothing else reruns it)."""
    cfg = config["studies"][wildcards.study]
    out = study_keys(wildcards.study, CAL_STUDY_KEYS)
    out["calibration"] = {"posterior": cfg["calibration"]["posterior"]}
    return as_json(out)


# ---- calibration.one_job: a study's calibration phase as one `simcalib batch` job ----


def _wc(study, caldir, strategy=None):
    """Wildcards as cal_run's job for (study, caldir, strategy) would see them."""
    return SimpleNamespace(study=study, caldir=caldir, strategy=strategy)


def cal_caldirs(study):
    """Every calibration directory the workflow asks for, with its strategies: the
    study's targets, its extra target sets (extra_strategies), the PtS sweep."""
    cal = config["studies"][study]["calibration"]
    out = {"calibration": list(cal["strategies"])}
    for w in cal["extra_targets"]:
        out[f"calibration/targets_{w}"] = list(cal["extra_strategies"])
    for r in sweep_values(study):
        out[f"{SWEEP_PREFIX}{r}"] = ["pts"]
    return out


def _run_member(study, caldir, strategy):
    """(argv, log, inputs, outputs) of one strategy's cal-run, as its cal_run job."""
    w = _wc(study, caldir, strategy)
    inputs = cal_inputs(w)
    extra = cal_extra_args(w, SimpleNamespace(**inputs)).split()
    rec = f"results/{study}/{caldir}/{strategy}.csv"
    runs = f"results/{study}/{caldir}/runs/{strategy}.csv"
    argv = [
        "cal-run",
        "--study",
        study,
        "--params",
        cal_params(w),
        "--solver",
        cal_solver(w),
        "--seed",
        str(config["seed"]),
        "--strategy",
        strategy,
        *mm_arg(w).split(),
        "--targets",
        inputs["targets"],
        *extra,
        "--threads",
        str(cal_threads(w)),
        "--output",
        rec,
        "--output-runs",
        runs,
    ]
    log = f"results/logs/{study}/{caldir}/cal_run_{strategy}.log"
    return argv, log, list(inputs.values()), [rec, runs]


def _anchors_member(study, caldir):
    w = _wc(study, caldir)
    inputs = anchors_inputs(w)
    out = f"results/{study}/{caldir}/anchors.csv"
    argv = [
        "cal-anchors",
        "--study",
        study,
        "--params",
        cal_study_only(w),
        "--solver",
        cal_solver(w),
        "--seed",
        str(config["seed"]),
        "--metamodel",
        f"results/{study}/metamodel",
        "--targets",
        inputs["targets"],
        *solved_arg(w, SimpleNamespace(**inputs)).split(),
        "--output",
        out,
    ]
    log = f"results/logs/{study}/{caldir}/cal_anchors.log"
    return argv, log, list(inputs.values()), [out]


def _posterior_member(study):
    """cal_posterior's verb, arguments and files (first: a strategy may read its
    posterior.json)."""
    w = _wc(study, "calibration")
    base = f"results/{study}/calibration/posterior"
    inputs = {k: v.format(study=study) for k, v in MM_FILES.items()}
    inputs.update(targets=f"results/{study}/targets.csv", dataset=f"results/{study}/dataset.csv")
    argv = ["cal-posterior", "--study", study, "--params", posterior_params(w)]
    argv += ["--seed", str(config["seed"]), "--metamodel", f"results/{study}/metamodel"]
    argv += ["--targets", inputs["targets"], "--dataset", inputs["dataset"], "--output-dir", base]
    outs = [
        figure(f"{base}/posterior_summary.csv", "cal_posterior", "Posterior", study),
        figure(f"{base}/intervals.png", "cal_posterior", "Posterior", study),
        f"{base}/posterior.json",
        f"{base}/ppc.csv",
        directory(f"{base}/targets"),
    ]
    return argv, f"results/logs/{study}/cal_posterior.log", list(inputs.values()), outs


def _table_members(study, made):
    """The tables of the study's calibration the job can write itself, once it has made
    every record they read (``made``: the (caldir, strategy) it runs): cal_summary and
    cal_rs_vs_op for the study's targets, cal_sweep, and cal_contexts."""
    cal = config["studies"][study]["calibration"]
    base = f"results/{study}/calibration"
    rec = lambda c, s: f"results/{study}/{c}/{s}.csv"
    fig = lambda name, caption: figure(f"{base}/{name}", caption, "Paper 1", study)
    logs = f"results/logs/{study}"
    out = []
    strategies = cal["strategies"]
    if all(("calibration", s) in made for s in strategies):
        meta = mm_files(study).get("meta")
        targets = f"results/{study}/targets.csv"
        argv = ["cal-summary", "--records", *[f"{s}={rec('calibration', s)}" for s in strategies]]
        argv += ["--output", f"{base}/summary.csv", "--output-figure", f"{base}/strategies.png"]
        argv += ["--title", study]
        argv += ["--metamodel-info", meta] if meta else []
        argv += ["--targets", targets]  # the order of rule cal_summary's shell
        outs = [fig("summary.csv", "cal_summary"), fig("strategies.png", "cal_strategies")]
        out.append((argv, f"{logs}/cal_summary.log", [m for m in (meta, targets) if m], outs))
        if "rs" in strategies and "op" in strategies:
            argv = ["cal-summary", "--records", f"rs={rec('calibration', 'rs')}"]
            argv += [f"op={rec('calibration', 'op')}", "--targets", targets]
            argv += ["--output", f"{base}/rs_vs_op.csv"]
            argv += ["--output-figure-rs-op", f"{base}/rs_vs_op.png"]
            outs = [fig("rs_vs_op.csv", "cal_rs_vs_op"), fig("rs_vs_op.png", "cal_rs_vs_op")]
            out.append((argv, f"{logs}/cal_rs_vs_op.log", [], outs))
    sweep = sweep_records(study)
    if sweep and all((f"{SWEEP_PREFIX}{r}", "pts") in made for r in sweep):
        argv = ["cal-sweep", "--records", *[f"{r}={p}" for r, p in sweep.items()]]
        argv += ["--output", f"{base}/sweep.csv", "--output-figure", f"{base}/sweep.png"]
        argv += ["--title", f"{study}: PtS proximity sweep"]
        outs = [fig("sweep.csv", "cal_sweep"), fig("sweep.png", "cal_sweep")]
        out.append((argv, f"{logs}/cal_sweep.log", [], outs))
    for w in cal["extra_targets"]:
        for st in cal["extra_strategies"]:
            oos = f"calibration/targets_{w}"
            if ("calibration", st) not in made or (oos, st) not in made:
                continue
            name = f"contexts_{w}_{st}"
            argv = ["cal-contexts", "--insample", rec("calibration", st)]
            argv += ["--outofsample", rec(oos, st), "--strategy", st]
            argv += ["--output", f"{base}/{name}.csv", "--output-figure", f"{base}/{name}.png"]
            outs = [fig(f"{name}.csv", "cal_contexts"), fig(f"{name}.png", "cal_contexts")]
            out.append((argv, f"{logs}/cal_{name}.log", [], outs))
    return out


def cal_job_sets():
    """The `batch` job of each study with calibration.one_job, as
    (study, {plan, inputs, outputs, logs, benchmark, threads, priority}): the study's
    posterior (calibration.posterior), its OP anchors, its strategies of one block on every target set it calibrates (its
    targets, its extra target sets, the PtS sweep) and the tables of those records
    (cal_summary, cal_rs_vs_op, cal_sweep, cal_contexts).  A strategy split into
    blocks keeps its cal_run_block jobs (and the tables reading it, and anchors it
    starts from, their own jobs).  Each member is the verb and arguments of its own
    job; the priority (PRIORITY["calibrate"] plus its strategy runs and posterior)
    starts the biggest studies first."""
    sets = []
    for study in cal_studies():
        if not config["studies"][study]["calibration"].get("one_job"):
            continue
        pairs = [(c, s) for c, strats in cal_caldirs(study).items() for s in strats]
        made = {
            (c, s)
            for c, s in pairs
            if cal_blocks(study, c, s) == 1 and not (s == "sequential" and seq_rounds(study))
        }
        if not made:
            continue
        anchored = {}  # anchors' directory -> all its users run in this job
        for c, s in pairs:
            if STRATEGIES[s].uses_anchor:
                a = caldir_of(caldir_targets(c))
                anchored[a] = anchored.get(a, True) and (c, s) in made
        members = [_posterior_member(study)] if study in posterior_studies() else []
        members += [_anchors_member(study, a) for a, inside in anchored.items() if inside]
        members += [_run_member(study, c, s) for c, s in pairs if (c, s) in made]
        members += _table_members(study, made)
        outputs = [p for m in members for p in m[3]]
        # what the members read that the job does not make itself, each file once
        made_here = set(map(str, outputs))
        inputs = list(dict.fromkeys(p for m in members for p in m[2] if p not in made_here))
        sets.append(
            (
                study,
                {
                    "plan": json.dumps([{"argv": m[0], "log": m[1]} for m in members]),
                    "inputs": inputs,
                    "outputs": outputs,
                    "logs": [f"results/logs/{study}/cal_study.log"] + [m[1] for m in members],
                    "benchmark": f"results/benchmarks/rules/{study}/cal_study.tsv",
                    "threads": max(cal_threads(_wc(study, c, s)) for c, s in made),
                    "priority": PRIORITY["calibrate"]
                    + sum(m[0][0] in ("cal-run", "cal-posterior") for m in members),
                },
            )
        )
    return sets
