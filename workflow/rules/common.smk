# Shared helpers: the list every stage appends its final targets to, params as JSON,
# wildcard constraints.

import json

ALL_TARGETS = []

STUDIES = list(config["studies"])

# Job priorities.  Snakemake starts the ready jobs of highest priority first (and,
# without priorities, those with the largest input files), so work that others wait
# for goes first: simulations, then the fits behind them (metamodel, OP, the
# multi-source fits and least squares on the FE data), then calibration; the leaves
# (Bayes chains, then tables, figures and reports) fill the cores around those
# chains.  On the default config at --cores 2 this took the FE -> multi-source chain
# off the end of the run (docs/running.md, "Job order").
PRIORITY = {"simulate": 30, "fit": 25, "analytic": 20, "calibrate": 10, "sample": 5}


wildcard_constraints:
    study="[A-Za-z][A-Za-z0-9_-]*",
    chunk=r"\d+",


def as_json(obj):
    """A config sub-dict as compact JSON for `params:` (so a change in exactly these
    values, and no others, makes Snakemake rerun the rule).  Keys keep the config's
    order: the order of parameters and outputs is meaningful (column order)."""
    return json.dumps(obj, separators=(",", ":"))


def study_params(*keys):
    """`params:` function: only the given keys of the study's config."""

    def fn(wildcards):
        cfg = config["studies"][wildcards.study]
        return as_json({k: cfg[k] for k in keys if k in cfg})

    return fn


# The report's menu names the method, not the paper: a user's own study is no paper's.
REPORT_CATEGORIES = {
    "Paper 1": "1 Metamodel calibration",
    "Posterior": "1 Metamodel calibration",
    "Paper 2": "2 Multi-source calibration (iPro-NC)",
    "Paper 3": "3 Bayesian calibration (KOH vs MOS)",
}


def figure(path, caption, category, subcategory=None):
    """Register an output in the HTML report (`snakemake --report`), with a caption
    from workflow/report/<caption>.rst and a category (the method, REPORT_CATEGORIES;
    rules name it by paper)."""
    kwargs = {"category": REPORT_CATEGORIES.get(category, category)}
    if subcategory:
        kwargs["subcategory"] = subcategory
    return report(path, caption=f"../report/{caption}.rst", **kwargs)


def write_done_flag(files, flag, log):
    """The study's all.done lists the final files it stands for (so a user sees what
    `results/<study>/all.done` built); the log says how many."""
    from simcalib import io

    io.write_text("\n".join(sorted(files)) + "\n", flag)
    io.write_text(f"{len(files)} final files present\n", log)
