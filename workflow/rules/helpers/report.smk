# Input functions, params and constants of the report rules (workflow/rules/report.smk),
# kept apart from the rules as `snakemake --lint` asks.

import os

REPORT_INPUTS = list(ALL_TARGETS)
# a study calibrated without a metamodel (sequential alone) has an answer to report too
REPORT_STUDIES = [
    s
    for s in STUDIES
    if config["studies"][s]["metamodel"]["enabled"]
    or config["studies"][s]["calibration"]["enabled"]
]
REPORT_BAYES = list(config["bayes"]["settings"])
REPORT_MS = bool(
    config["multisource"]["analytic"]["enabled"] or config["multisource"]["hardening"]["enabled"]
)
REPORT_TABLES = "results/report/tables"


def report_table_pages():
    """One HTML table page per paper-1 study and for papers 2 and 3, registered under
    that paper's category."""
    pages = [
        figure(f"{REPORT_TABLES}/paper1_{s}.html", "tables", "Paper 1", s) for s in REPORT_STUDIES
    ]
    if REPORT_MS:
        pages.append(figure(f"{REPORT_TABLES}/paper2.html", "tables", "Paper 2", "tables"))
    if REPORT_BAYES:
        pages.append(figure(f"{REPORT_TABLES}/paper3.html", "tables", "Paper 3", "tables"))
    return pages


# The console summary at the end of every run (the Snakefile's onstart / onsuccess /
# onerror handlers): this run's job-log warnings and every flagged result, with the
# file to open, from the same function as the read-me-first page's flags.
RUN_STATE = {}


def run_started():
    from simcalib.report.flags import now

    RUN_STATE["since"] = now()


def report_cmd():
    """`snakemake --report` as it works for this run, typed where the run was started:
    its --configfile (else the default config's results are looked for: "Missing
    metadata"), and -s / -d where the run needed them."""
    from simcalib.report.console import report_command

    # where the user typed the command: the shell's PWD (Snakemake has moved to the
    # working directory of -d by now, and so has workflow.workdir_init)
    start = os.environ.get("PWD") or workflow.workdir_init

    def rel(path):
        """Relative to where the user is, absolute where that climbs out of it."""
        full = os.path.join(start, str(path))
        r = os.path.relpath(full, start)
        return os.path.abspath(full) if r.startswith("..") else r

    files = [rel(f) for f in workflow.overwrite_configfiles]
    snakefile = rel(workflow.main_snakefile)
    here = rel(os.getcwd())  # the working directory (-d) the run used
    return report_command(
        files,
        None if snakefile == "Snakefile" else snakefile,
        None if here == "." else here,
    )


def print_run_summary(failed):
    import sys

    from simcalib.report.flags import console_summary

    text = console_summary(
        "results",
        REPORT_STUDIES,
        REPORT_BAYES,
        config["report"]["flag_failed_share"],
        logs="results/logs",
        since=RUN_STATE.get("since"),
        failed=failed,
        page="results/report/summary.html",
        report_cmd=report_cmd(),
    )
    sys.stderr.write(text + "\n")
