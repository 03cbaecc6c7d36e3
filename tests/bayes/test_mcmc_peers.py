"""benchmarks/mcmc_peers.py: the NumPyro/JAX posterior is simcalib's (log densities equal
at random points, every constant included), and the benchmark skips cleanly without
the ``mcmc-peers`` extra."""

from __future__ import annotations

import pytest

from tests.fixtures.benchmarks import load_benchmark


def _mcmc_peers():
    return load_benchmark("mcmc_peers")


def test_benchmark_skips_cleanly_without_numpyro(monkeypatch, capsys, tmp_path):
    peers = _mcmc_peers()
    monkeypatch.setattr(peers, "peers_available", lambda: "numpyro")
    assert peers.main(["--quick", "--output", str(tmp_path / "x.csv")]) == 0
    assert "skipped" in capsys.readouterr().out and not (tmp_path / "x.csv").exists()


def test_kernel_spec_sets_leapfrog_steps_and_defaults_the_rest(monkeypatch):
    """``hmc:3000:1000::6`` (config/config.yaml's kernel) reaches the sampler with 6
    leapfrog steps; fields left out keep their defaults (half burn-in, linear scale,
    the schema's steps)."""
    peers = _mcmc_peers()
    assert peers.parse_kernel("hmc:3000:1000::6", 10) == ("hmc", 3000, 1000, "linear", 6,
                                                           None)
    assert peers.parse_kernel("mala", 800) == ("mala", 800, 400, "linear", None, None)
    assert peers.parse_kernel("hmc:3000:1000::3:reflect", 10)[4:] == (3, "reflect")
    seen = {}

    class Stop(Exception):
        pass

    def fake_run(pb, cfg, *a, **k):
        seen["cfg"] = cfg
        raise Stop

    monkeypatch.setattr(peers, "run", fake_run)
    with pytest.raises(Stop):
        peers.run_simcalib(None, "two_mass", "koh", "hmc:300:100:logit:6", 10, 0)
    cfg = seen["cfg"]
    assert (cfg.theta_kernel, cfg.leapfrog_steps, cfg.iterations, cfg.burn_in,
            cfg.theta_scale, cfg.theta_boundary) == ("hmc", 6, 300, 100, "logit", "reject")
    with pytest.raises(Stop):
        peers.run_simcalib(None, "two_mass", "koh", "hmc:300:100::3:reflect", 10, 0)
    assert seen["cfg"].theta_boundary == "reflect"


def test_numpyro_log_density_equals_simcalibs():
    pytest.importorskip("numpyro")
    pytest.importorskip("jax")
    import jax

    peers = _mcmc_peers()
    jax.config.update("jax_enable_x64", True)
    from simcalib.bayes.models import build_setting
    from simcalib.bayes.synthetic import simulate
    from simcalib.seeds import rng

    s = build_setting("two_mass", {"n_obs": 8})
    for method in ("koh", "mos"):
        pb = peers.Likelihood(s, simulate(s, rng(3, "peers")).obs, method)
        post = peers.JaxPosterior(pb)
        assert peers.check_equality(pb, post, rng(4, "peers"), n=2) < 1e-10, method
        # and it is a real comparison: another data set's density differs
        other = peers.Likelihood(s, simulate(s, rng(5, "peers")).obs, method)
        assert peers.check_equality(other, post, rng(4, "peers"), n=1) > 1e-3, method
