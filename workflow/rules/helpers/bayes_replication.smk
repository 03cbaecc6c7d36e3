# Input functions, params and constants of the replication-study rules
# (workflow/rules/bayes_replication.smk), kept apart from the rules as `snakemake --lint` asks.

import os

from simcalib.bayes.params import replication_params
from simcalib.bayes.replication import blocks as replication_blocks

REPLICATION = config["bayes"]["replication_study"]
REPLICATION_DIR = "results/bayes/_replications"
REPLICATION_BLOCKS = replication_blocks(REPLICATION["replications"], REPLICATION["block"])


def replication_records(wildcards):
    return expand(
        f"{REPLICATION_DIR}/{{setting}}/{{protocol}}/{{method}}/block{{block}}.json",
        setting=REPLICATION["settings"],
        protocol=REPLICATION["protocols"],
        method=config["bayes"]["methods"],
        block=REPLICATION_BLOCKS,
    )


def replication_minutes(wildcards):
    """Generous runtime (minutes): ~10 ms per iteration, chain and run on a loaded core."""
    s = config["bayes"]["sampler"]
    return 10 + int(s["iterations"] * s["chains"] * REPLICATION["block"] * 0.01 / 60)
