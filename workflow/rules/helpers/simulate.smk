# Input functions, params and constants of the simulate rules (workflow/rules/simulate.smk),
# kept apart from the rules as `snakemake --lint` asks.

from simcalib.study.observations import observed_file, resolve
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
