# Input functions, params and constants of the bayes rules (workflow/rules/bayes.smk),
# kept apart from the rules as `snakemake --lint` asks.

import os

from simcalib.bayes.checks import check_data_settings
from simcalib.bayes.params import data_params as bayes_data_params
from simcalib.bayes.params import run_params as bayes_run_params_of

# the validated config: the schema filled every default (its one source)
BAYES = config["bayes"]
BAYES_SETTINGS = list(BAYES["settings"])
BAYES_METHODS = list(BAYES["methods"])
BAYES_REPS = list(range(int(BAYES["replications"])))
# user model modules and data files are found beside the config file(s), then in the
# working directory (no PYTHONPATH needed); relative, so moving the project reruns nothing
# (then the workflow's own directory, for the shipped examples under resources/)
BAYES_SEARCH = list(
    dict.fromkeys(
        [os.path.relpath(os.path.dirname(os.path.abspath(str(f)))) for f in workflow.configfiles]
        + [os.path.relpath(workflow.basedir)]
    )
)
BAYES_DATA_SETTINGS = check_data_settings(config, BAYES_SEARCH)
BAYES_SYNTHETIC = [s for s in BAYES_SETTINGS if s not in BAYES_DATA_SETTINGS]


def bayes_options(setting):
    return BAYES["setting_options"].get(setting, {})


def bayes_run_params(setting):
    """bayes-run's params, built by the library function `bayes-run --config` uses."""
    return as_json(bayes_run_params_of(config, setting, BAYES_SEARCH))


def bayes_run_minutes(wildcards):
    """Generous runtime (minutes): ~10 ms per iteration and chain covers the slowest
    model (FitzHugh-Nagumo) on a loaded core, plus start-up and prediction."""
    s = {**BAYES["sampler"], **(bayes_options(wildcards.setting).get("sampler") or {})}
    return 10 + int(s["iterations"] * s["chains"] * 0.01 / 60)


def bayes_runs(setting, name):
    return expand(
        f"results/bayes/{setting}/{{method}}/rep{{rep}}/{name}",
        method=BAYES_METHODS,
        rep=BAYES_REPS,
    )


def bayes_data_files(setting, name):
    return expand(f"results/bayes/{setting}/data/rep{{rep}}/{name}", rep=BAYES_REPS)


def bayes_data_file(wildcards):
    return BAYES_DATA_SETTINGS[wildcards.setting]
