# Input functions, params and constants of the multisource rules (workflow/rules/multisource.smk),
# kept apart from the rules as `snakemake --lint` asks.

from simcalib.multisource import params as ms_params

MS = config["multisource"]
MS_FIT_FILES = [
    "theta.csv",
    "theta_seeds.csv",
    "posterior.csv",
    "rrmse.csv",
    "predictions.csv",
    "latent.csv",
    "history.csv",
    "models.pt",
    "fit.json",
]
MS_AN_REPORT = [
    "rrmse.csv",
    "rrmse_lf.csv",
    "theta_summary.csv",
    "baselines.csv",
    "fig2_posteriors.csv",
    "fig2_posteriors.png",
    "fig3_curves.csv",
    "fig3_curves.png",
    "fig4_latent.csv",
    "fig4_latent.png",
]
MS_HD_REPORT = [
    "table3_theta_step1.csv",
    "table4_rrmse_step1.csv",
    "table5_rrmse_step2.csv",
    "theta_step2.csv",
    "baselines.csv",
    "fig_force.csv",
    "fig_force.png",
    "fig_fields.csv",
    "fig_fields.png",
]
MS_HD_STEPS = ["step1", "step2"]


def ms_report_file(case, name):
    """Figures and tables of a case, registered in the HTML report (Paper 2)."""
    path = f"results/multisource/{case}/{name}"
    if name.endswith(".png") or name.startswith(("fig", "table", "rrmse", "theta")):
        return figure(path, "multisource", "Paper 2", case)
    return path


def ms_fit_params(case, step=None):
    """params for ms-fit: the merged fit settings (multisource.fit, then the case's
    and the step's overrides), the scenario's sources and step-specific options, built
    by the library function `ms-fit --config` uses."""

    def fn(w):
        return as_json(ms_params.fit_params(config, case, w.ms_scenario, step))

    return fn


def ms_fit_runtime(case):
    """Minutes for a fit job (a generous estimate from the epochs and seeds)."""

    def fn(w):
        fit = {**MS["fit"], **MS[case]["fit"]}
        return max(
            10,
            int(fit["epochs"] * fit["n_seeds"] * (0.02 if case == "analytic" else 0.1) / 60) + 10,
        )

    return fn


def ms_fe_datasets(w):
    """ms_data's inputs: for the hardening case on the FE model, each source's FE study
    dataset (named inputs s0, s1, s2), so its runs are the simulation stage's (designed,
    chunked, journaled, cached); nothing for the analytic case or the bar fixture."""
    if w.ms_case != "hardening" or not MS["hardening"]["enabled"]:
        return {}
    return ms_params.fe_datasets(config)
