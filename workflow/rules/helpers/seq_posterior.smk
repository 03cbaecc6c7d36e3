# Input functions and params of rule cal_seq_posterior (workflow/rules/seq_posterior.smk),
# kept apart from the rule as `snakemake --lint` asks.  Uses caldir_targets and
# CAL_STUDY_KEYS of helpers/calibrate.smk and study_keys of helpers/simulate.smk
# (included before).


def seq_posterior_studies():
    """Studies whose calibration runs `sequential` with its posterior on
    (calibration.posterior.sequential, default true)."""
    return [
        s
        for s in cal_studies()
        if "sequential" in config["studies"][s]["calibration"]["strategies"]
        and config["studies"][s]["calibration"]["posterior"]["sequential"]
    ]


def seq_posterior_targets(wildcards):
    """The target set the calibration directory calibrated."""
    return f"results/{wildcards.study}/{caldir_targets(wildcards.caldir)}.csv"


def seq_posterior_params(wildcards):
    """Study keys + what the step reads: calibration.posterior, the sequential
    ensemble's settings and noise.stochastic (nothing else reruns it)."""
    cfg = config["studies"][wildcards.study]
    cal = cfg["calibration"]
    out = study_keys(wildcards.study, CAL_STUDY_KEYS)
    out["noise"] = {"stochastic": (cfg.get("noise") or {}).get("stochastic", "auto")}
    out["calibration"] = {
        "posterior": cal["posterior"],
        "sequential": {"ensemble": (cal.get("sequential") or {}).get("ensemble") or {}},
    }
    return as_json(out)
