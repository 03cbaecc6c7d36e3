# simcalib: calibrating expensive simulators.  See README.md.
#
#   snakemake --cores 8                          # the default config, every study
#   snakemake --cores 8 --configfile config/paper.yaml   # the papers' scale
#   snakemake --profile workflow/profiles/slurm  # on a SLURM cluster
#
# A config stands alone: `--configfile my.yaml` runs exactly what my.yaml defines;
# config/config.yaml is read only when no --configfile is given (Snakemake would
# otherwise merge the two and run every default study as well).  `--config key=value`
# overrides apply either way.  The config is validated (schema, defaults, semantic
# checks) before any job runs.

import sys

# Validate with this checkout's library, the one the rules run (shell.prefix below):
# without this, an installed simcalib of another checkout or version would check
# the config and the rules would then run different code.
sys.path.insert(0, f"{workflow.basedir}/src")

from simcalib.config import check_config_files, validate_config
from simcalib.errors import SimcalibError

if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# Every rule calls `python -m simcalib` with this checkout's library first on the path:
# the same code the Snakefile validated with, also inside the rules' conda environment
# (envs/simcalib.yaml: the dependencies only) under --software-deployment-method conda.
shell.prefix(f'export PYTHONPATH="{workflow.basedir}/src${{{{PYTHONPATH:+:$PYTHONPATH}}}}"; ')


# Snakemake read the config files with a loader that keeps the last of two equal keys;
# re-read them strictly so a duplicate key fails here, naming its key path.  A config
# error is printed alone (the key path and the fix), without Snakemake's traceback
# frames of this file, and the run stops before any job.
try:
    check_config_files([*workflow.configfiles, *workflow.overwrite_configfiles])
    validate_config(config)
except SimcalibError as exc:
    print(
        f"simcalib: {exc}\n(`simcalib check CONFIG` reads and checks a config file "
        "alone; docs/running.md, 'Troubleshooting')",
        file=sys.stderr,
    )
    raise SystemExit(1) from None


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/metamodel.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/seq_posterior.smk"
include: "workflow/rules/bayes.smk"
include: "workflow/rules/bayes_replication.smk"
include: "workflow/rules/multisource.smk"
include: "workflow/rules/curves.smk"
# last: the report depends on every other stage's final targets
include: "workflow/rules/report.smk"


# At the end of every run, success or failure: what may be wrong, and where to look.
onstart:
    run_started()


onsuccess:
    print_run_summary(failed=False)


onerror:
    print_run_summary(failed=True)


rule all:
    default_target: True
    input:
        ALL_TARGETS,


# One target per study: `snakemake --cores 2 results/<study>/all.done` builds that
# study's whole chain (design, simulation, targets, metamodel, OP, calibration and its
# figures) and nothing else; the flag file lists what it built.
localrules:
    study_all,


rule study_all:
    input:
        lambda w: [t for t in ALL_TARGETS if t.startswith(f"results/{w.study}/")],
    output:
        "results/{study}/all.done",
    log:
        "results/logs/{study}/all.log",
    wildcard_constraints:
        study="|".join(STUDIES) or "(?!)",
    run:
        write_done_flag(input, output[0], log[0])
