# Input functions, params and constants of the curves rule (workflow/rules/curves.smk),
# kept apart from the rules as `snakemake --lint` asks.

import os

# Fresh runs at each answer whose spread is the band on a stochastic simulator, when
# the study re-scores none (calibration.rescore = 0; otherwise the band's runs are the
# re-scoring runs themselves, so its mean misfit is the records' rescored_error).  20
# runs put the 5 % and 95 % percentiles one run from the ends: a band, not a
# confidence interval of it.  A deterministic simulator is run once whatever this is.
CURVE_REPLICATES = 20
# the band: these percentiles of the replicates per point
CURVE_BAND = (5, 95)
# panels (target x series) drawn per figure; the others are in the CSV
CURVE_PANELS = 12
# study keys the job needs to rebuild the simulator (study_keys adds the series with
# its points resolved)
CURVE_STUDY_KEYS = ("simulator", "parameters", "contexts", "constraints", "outputs")


# the curves directory of a target set: curves/ for the study's targets,
# curves/targets_<name>/ for an extra set (as caldir's calibration/targets_<name>)
CURVE_DIR = r"curves(/targets_[A-Za-z0-9_]+)?"


def curves_caldir(wildcards):
    """The calibration directory whose records a curves directory draws."""
    return f"calibration{wildcards.curvedir.removeprefix('curves')}"


def curves_target_set(wildcards):
    """The target set's name ("targets" or "targets_<name>"), for the title."""
    return caldir_targets(curves_caldir(wildcards))


def curve_studies():
    """Calibrated studies that declare series: each strategy gets its curves job."""
    return [s for s in cal_studies() if config["studies"][s].get("series")]


def curves_params(wildcards):
    """The study's keys that build its simulator, its series with the points resolved
    (a new targets file that keeps the points reruns nothing here)."""
    cfg = config["studies"][wildcards.study]
    # the series as every rule that rebuilds the study gets it (helpers/simulate.smk)
    out = study_keys(wildcards.study, CURVE_STUDY_KEYS)
    # whether the simulator is noisy (one run or a band); the probe's size is not read
    out["noise"] = {"stochastic": (cfg.get("noise") or {}).get("stochastic", "auto")}
    return as_json(out)


def curves_inputs(wildcards):
    """The strategy's records and run log on the target set, the set's targets, the
    metamodel's sidecar (Δ's scale) where the study trains one, and the posterior whose
    predictive band is drawn (the study's own targets only: no posterior runs on an
    extra set)."""
    base = f"results/{wildcards.study}/{curves_caldir(wildcards)}"
    out = {
        "records": f"{base}/{wildcards.strategy}.csv",
        "runs": f"{base}/runs/{wildcards.strategy}.csv",
        "targets": f"results/{wildcards.study}/{curves_target_set(wildcards)}.csv",
    }
    out.update({k: v for k, v in mm_files(wildcards.study).items() if k == "meta"})
    if wildcards.curvedir != "curves":
        return out
    if uses_seq_posterior(wildcards):
        # sequential's answers: the band from its own posterior (its draws, run here)
        out["seq_posterior"] = f"{base}/sequential_posterior/posterior.json"
    elif wildcards.study in posterior_studies():
        # its predictive check's runs (ppc_runs.csv, written beside ppc.csv) are the
        # posterior predictive band, at no extra run
        out["ppc"] = f"{base}/posterior/ppc.csv"
    return out


def uses_seq_posterior(wildcards):
    """Whether the band of this job comes from sequential's own posterior: the
    strategy is sequential and its posterior runs (calibration.posterior.sequential)."""
    return wildcards.strategy == "sequential" and wildcards.study in seq_posterior_studies()


def curves_replicates(wildcards):
    k = int(config["studies"][wildcards.study]["calibration"]["rescore"])
    return k if k > 0 else CURVE_REPLICATES


def curves_extra_args(wildcards, input):
    """--metamodel-info (Δ's scale) and the posterior predictive band's source
    (--posterior-runs, or --seq-posterior with calibration.posterior.ppc_draws of its
    draws per target), where the study has them."""
    out = f"--metamodel-info {input.meta}" if hasattr(input, "meta") else ""
    if hasattr(input, "ppc"):
        out += f" --posterior-runs {os.path.join(os.path.dirname(input.ppc), 'ppc_runs.csv')}"
    if hasattr(input, "seq_posterior"):
        k = int(config["studies"][wildcards.study]["calibration"]["posterior"]["ppc_draws"])
        out += f" --seq-posterior {os.path.dirname(input.seq_posterior)} --ppc-draws {k}"
    return out


def curve_targets(study):
    """The curves CSV and figure of every strategy of a series study, on its targets
    and on each extra target set (its extra_strategies)."""
    cal = config["studies"][study]["calibration"]
    dirs = {"curves": cal["strategies"]}
    dirs.update({f"curves/targets_{w}": cal["extra_strategies"] for w in cal["extra_targets"]})
    return [
        f"results/{study}/{d}/{s}.{ext}"
        for d, strategies in dirs.items()
        for s in strategies
        for ext in ("csv", "png")
    ]
