"""The iPro-NC loss, paper Eq. 2-9.

    L = sum_i (L_NLL_i^em + L_NLL_i^cal) + beta_IS (L_IS^em + L_IS^cal) + beta_KL L_KL

Per-source normalisation (Eq. 3-4 and the text after Eq. 9) is carried by the row
weights built in :mod:`.tensors`: every (source, output column) cell is a mean over
its own non-missing rows, then cells are summed.  The interval-score terms use the
same weights.  ``L_KL`` acts on the theta-hat standard deviations only.  Eq. 9 as
printed, ``log(s/s_p) + s_p/(2 s) - 1/2``, is minimal at s = s_p/2 (it is not the
Gaussian KL); ``kl: gaussian`` selects ``log(s_p/s) + s^2/(2 s_p^2) - 1/2`` instead,
minimal at s = s_p.  Weight decay is applied by the optimiser to network weights
only, not here.
"""

from __future__ import annotations

import math

import torch

LOG_2PI = math.log(2 * math.pi)


def gaussian_nll(y: torch.Tensor, mu: torch.Tensor, sd: torch.Tensor) -> torch.Tensor:
    """Elementwise -log N(y; mu, sd^2) (Eq. 7 before averaging)."""
    return 0.5 * LOG_2PI + torch.log(sd) + 0.5 * ((y - mu) / sd) ** 2


def interval_score(y: torch.Tensor, mu: torch.Tensor, sd: torch.Tensor,
                   phi: float = 0.05, z: float = 1.96) -> torch.Tensor:
    """Elementwise interval score of the interval mu +- z sd (Eq. 8 before averaging)."""
    lo, up = mu - z * sd, mu + z * sd
    return ((up - lo) + (2.0 / phi) * (lo - y) * (y < lo)
            + (2.0 / phi) * (y - up) * (y > up))


def kl_sd(sd: torch.Tensor, sigma_p: float, form: str = "paper") -> torch.Tensor:
    """Eq. 9 summed over the given theta-hat standard deviations."""
    if form == "paper":
        return (torch.log(sd / sigma_p) + sigma_p / (2 * sd) - 0.5).sum()
    if form == "gaussian":
        return (torch.log(sigma_p / sd) + sd ** 2 / (2 * sigma_p ** 2) - 0.5).sum()
    raise ValueError(f"unknown KL form {form!r}")


def ipronc_loss(y: torch.Tensor, mu: torch.Tensor, sd: torch.Tensor, w: torch.Tensor,
                is_cal: torch.Tensor, theta_sd: torch.Tensor, *, beta_is: float,
                beta_kl: float, sigma_p: float, phi: float = 0.05, z: float = 1.96,
                kl_form: str = "paper", beta_nll: float = 0.0) -> dict[str, torch.Tensor]:
    """All terms of Eq. 2.  ``w`` [N, ny] holds the per-source weights (0 = masked),
    ``is_cal`` [N, 1] marks calibration rows, ``theta_sd`` the learned sds.

    ``beta_nll`` > 0 weights each cell's NLL by its predicted variance to the power
    beta, held constant in the gradient (beta-NLL, Seitzer et al., ICLR 2022): with
    the plain NLL (0, the paper) a cell the network finds hard gets a large sd early,
    which scales its mean's gradient by 1/sd^2, so the hardest outputs stay underfit
    (the hardening study's out-of-plane displacements); 0.5 is the authors' choice."""
    y = torch.where(w > 0, y, mu.detach())          # keep masked cells finite
    nll = gaussian_nll(y, mu, sd) * w
    if beta_nll > 0:
        nll = nll * sd.detach() ** (2.0 * beta_nll)
    isc = interval_score(y, mu, sd, phi, z) * w
    cal = is_cal.to(w.dtype)
    terms = {
        "nll_em": (nll * (1 - cal)).sum(), "nll_cal": (nll * cal).sum(),
        "is_em": (isc * (1 - cal)).sum(), "is_cal": (isc * cal).sum(),
        "kl": kl_sd(theta_sd, sigma_p, kl_form) if theta_sd.numel() else y.new_zeros(()),
    }
    terms["total"] = (terms["nll_em"] + terms["nll_cal"]
                      + beta_is * (terms["is_em"] + terms["is_cal"]) + beta_kl * terms["kl"])
    return terms
