"""Lotka-Volterra for a yearly predator-prey count (the example of docs/bayes.md).

The classic model: prey (hare) grow exponentially and are eaten in proportion to
encounters, predators (lynx) grow from what they eat and die at a constant rate.
It is knowingly too simple (no prey saturation, no handling time): the discrepancy
term is what absorbs that.  The parameter names are the textbook's, including
``gamma`` and ``delta``, which simcalib keeps apart from its hyperparameters.  The
initial counts in 1990 are unknown and calibrated too (``z0`` names parameters).

Config: ``model: predator_prey_model:setting`` (found beside the config file or in
the working directory, no PYTHONPATH needed).
"""

from simcalib.bayes import ODEModel, Setting


def rhs(t, z, th, m):
    hare, lynx = z
    alpha, beta, delta, gamma, _h0, _p0 = th
    return [alpha * hare - beta * hare * lynx, delta * hare * lynx - gamma * lynx]


def setting() -> Setting:
    model = ODEModel(rhs, ["hare", "lynx"],
                     ["alpha", "beta", "delta", "gamma", "hare0", "lynx0"],
                     z0=["hare0", "lynx0"], t0=1990.0)
    bounds = {"alpha": (0.05, 3.0), "beta": (1e-4, 0.1), "delta": (1e-4, 0.05),
              "gamma": (0.05, 3.0), "hare0": (5.0, 300.0), "lynx0": (1.0, 100.0)}
    # t_end and n_obs are taken from the data file of the setting
    return Setting("predator_prey", model, ["hare", "lynx"], bounds, t_end=2009.0,
                   t_start=1990.0, positive=True)
