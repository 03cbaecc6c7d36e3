# Input functions, params and constants of the simulate rules (workflow/rules/simulate.smk),
# kept apart from the rules as `snakemake --lint` asks.

from functools import cache

from simcalib.study.observations import observed_file, resolve
from simcalib.study.series_study import series_params
from simcalib.study.simulation import n_chunks

# Keys each step reads, so a change elsewhere (metamodel, strategies) never re-simulates.
DESIGN_KEYS = ("parameters", "contexts", "constraints", "design")
SIM_KEYS = ("simulator", "parameters", "contexts", "outputs", "design")
# the probe re-runs design rows: the simulator, the space, the outputs, its own size
NOISE_KEYS = ("simulator", "parameters", "contexts", "outputs", "noise")
TARGET_KEYS = (
    "simulator",
    "parameters",
    "contexts",
    "constraints",
    "outputs",
    "targets",
    "extra_targets",
)


@cache
def resolved_series(study):
    """The study's `series` with its points resolved (declared, else the union of the
    observed ones), or None for a scalar study.  Every rule that builds the study's
    simulator or outputs carries it, so a change of a series' points or index reruns
    exactly those jobs, while a rule never reads the observation files itself (a new
    targets file with the same points re-simulates nothing).  Cached: the config does
    not change during a run and a DAG asks once per job."""
    cfg = config["studies"][study]
    return series_params(cfg, f"studies.{study}")


def study_keys(study, keys):
    """The given keys of the study's config, plus its resolved `series` (when it
    declares one): what a job that rebuilds the study needs in its `params:`."""
    cfg = config["studies"][study]
    out = {k: cfg[k] for k in keys if k in cfg}
    series = resolved_series(study)
    if series is not None:
        out["series"] = series
    return out


def sim_params(*keys):
    """`params:` function: study_keys as JSON (study_params plus `series`)."""

    def fn(wildcards):
        return as_json(study_keys(wildcards.study, keys))

    return fn


def has_design(study):
    """Whether the study simulates a design (a study calibrated only by sequential
    has none, and no design job runs for it)."""
    return "design" in config["studies"][study]


def design_threads(study):
    """Parallel simulator runs inside one simulation job: design.threads (1 without a
    design)."""
    return int((config["studies"][study].get("design") or {}).get("threads", 1))


def chunk_files(ext):
    def fn(wildcards):
        n = n_chunks(config["studies"][wildcards.study])
        return [f"results/{wildcards.study}/chunks/chunk_{i}.{ext}" for i in range(n)]

    return fn


def tset_name(wildcards):
    """The target set's name for `simcalib sim-targets --which`: "targets" (the study's
    own set) or the name of one of its extra_targets."""
    t = wildcards.tset
    return "targets" if t == "targets" else t[len("targets_") :]


def observations_input(wildcards):
    """An observed target set's file (so editing it reruns sim_targets and what follows);
    nothing for a simulated set."""
    path = observed_file(config["studies"][wildcards.study], tset_name(wildcards))
    return [str(resolve(path))] if path else []
