# The report: results/report/summary.md (every headline table beside the papers'
# numbers, and the runtime table from the rules' benchmark files), the same tables as
# HTML pages for the Snakemake report (summary.html, the "read me first" page, and one
# page per paper under results/report/tables/), all from one `simcalib report-summary`.
# Included last, so it depends on every final target of the other stages.  The HTML
# report: `snakemake --report results/report.html` (figures are registered in their
# own rules with report(..., category="Paper N")).

REPORT_INPUTS = list(ALL_TARGETS)
REPORT_STUDIES = [
    s for s in STUDIES if config["studies"][s].get("metamodel", {}).get("enabled")
]
REPORT_BAYES = list(config.get("bayes", {}).get("settings", []) or [])
REPORT_MS = bool(
    config.get("multisource", {}).get("analytic", {}).get("enabled")
    or config.get("multisource", {}).get("hardening", {}).get("enabled")
)
REPORT_TABLES = "results/report/tables"


def report_table_pages():
    """One HTML table page per paper-1 study and for papers 2 and 3, registered under
    that paper's category."""
    pages = [
        figure(f"{REPORT_TABLES}/paper1_{s}.html", "tables", "Paper 1", s)
        for s in REPORT_STUDIES
    ]
    if REPORT_MS:
        pages.append(figure(f"{REPORT_TABLES}/paper2.html", "tables", "Paper 2", "tables"))
    if REPORT_BAYES:
        pages.append(figure(f"{REPORT_TABLES}/paper3.html", "tables", "Paper 3", "tables"))
    return pages


localrules:
    report_summary,


rule report_summary:
    input:
        REPORT_INPUTS,
    output:
        summary="results/report/summary.md",
        runtime="results/report/runtime.csv",
        html=figure("results/report/summary.html", "summary", "0 Read me first"),
        tables=report_table_pages(),
    params:
        studies=" ".join(REPORT_STUDIES),
        bayes=" ".join(REPORT_BAYES),
        multisource="--multisource" if REPORT_MS else "",
        tables=REPORT_TABLES,
    log:
        "results/logs/report/summary.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        "../../envs/simcalib.yaml"
    shell:
        "python -m simcalib report-summary --results results --studies {params.studies} "
        "--bayes-settings {params.bayes} {params.multisource} "
        "--output {output.summary} --output-runtime {output.runtime} "
        "--output-html {output.html} --output-tables-dir {params.tables} > {log} 2>&1"


ALL_TARGETS += ["results/report/summary.md", "results/report/summary.html"]
