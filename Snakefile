# simcalib: calibrating expensive simulators.  See README.md.
#
#   snakemake --cores 8                          # the default config, every study
#   snakemake --cores 8 --configfile config/paper.yaml   # the papers' scale
#   snakemake --profile workflow/profiles/slurm  # on a SLURM cluster
#
# The config is validated (schema, defaults, semantic checks) before any job runs.

from simcalib.config import check_config_files, validate_config


configfile: "config/config.yaml"


# One environment for every rule when run with --software-deployment-method conda.
conda: "envs/simcalib.yaml"


# Snakemake read the config files with a loader that keeps the last of two equal keys;
# re-read them strictly so a duplicate key fails here, naming its key path.
check_config_files([*workflow.configfiles, *workflow.overwrite_configfiles])
validate_config(config)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/metamodel.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/bayes.smk"
include: "workflow/rules/multisource.smk"
# last: the report depends on every other stage's final targets
include: "workflow/rules/report.smk"


rule all:
    input:
        ALL_TARGETS,
    default_target: True
