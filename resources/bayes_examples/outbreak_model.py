"""SIR for a small outbreak's counts (the example of docs/bayes.md).

Susceptible, infectious and recovered counts; infection at rate ``beta S I / N`` and
recovery at rate ``gamma`` (the epidemiologists' name: simcalib keeps it apart from
the discrepancy variance, which is ``hyper_gamma`` in every output).  The model has
no latent period, which the real disease has: the discrepancy term absorbs that.
The initial susceptible and infectious counts on day 0 are unknown and calibrated
(``z0`` entries are parameters); nobody has recovered yet.

Config: ``model: outbreak_model:setting``.
"""

from simcalib.bayes import ODEModel, Setting


def rhs(t, z, th, m):
    s, i, r = z
    beta, gamma, _s0, _i0 = th
    n = s + i + r
    return [-beta * s * i / n, beta * s * i / n - gamma * i, gamma * i]


def setting() -> Setting:
    model = ODEModel(rhs, ["S", "I", "R"], ["beta", "gamma", "S0", "I0"],
                     z0=["S0", "I0", 0.0], t0=0.0)
    bounds = {"beta": (0.05, 3.0), "gamma": (0.02, 1.0), "S0": (100.0, 1500.0),
              "I0": (0.1, 50.0)}
    return Setting("outbreak", model, ["S", "I", "R"], bounds, t_end=40.0, positive=True)
