#!/usr/bin/env bash
# Refresh the gallery of docs/overview.md from a default run:  snakemake --cores 2 && bash docs/gallery/update.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cp results/epidemic/calibration/strategies.png docs/gallery/epidemic_strategies.png
cp results/epidemic/calibration/sweep.png docs/gallery/epidemic_sweep.png
cp results/rosenbrock/calibration/contexts_outofsample_pts.png docs/gallery/rosenbrock_contexts.png
cp results/multisource/analytic/fig2_posteriors.png docs/gallery/ipronc_posteriors.png
cp results/multisource/analytic/fig3_curves.png docs/gallery/ipronc_curves.png
cp results/bayes/two_mass/figures/output_uq_rep0.png docs/gallery/bayes_two_mass_uq.png
