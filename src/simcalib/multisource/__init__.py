"""iPro-NC: simultaneous probabilistic calibration of several computer models.

One network emulates every data source (a high-fidelity source ``s0`` without
calibration parameters and any number of low-fidelity sources, each with its own
set of parameters) and learns, per low-fidelity source, a diagonal normal
distribution over its parameters that makes it match the high-fidelity data.
Modules, one job each:

- :mod:`.problem`   declaration of sources/inputs/outputs, checks of a data table
- :mod:`.tensors`   scaling and the training tensors (masking, per-source weights)
- :mod:`.model`     the four blocks and the per-source calibration distributions
- :mod:`.loss`      paper Eq. 2-9 (NLL, interval score, KL on the theta sds)
- :mod:`.training`  fitting over seeds, validation monitoring
- :mod:`.readout`   posterior samples, theta summaries, predictions, RRMSE, latents
- :mod:`.analytic`  the analytic example (paper Eq. 10-12) and its theta^MSE
- :mod:`.hardening` the hardening-law study on the FE specimen (its three sources' runs)
- :mod:`.bar_fixture` the 1-D bar stand-in, kept as a fast TEST FIXTURE only
- :mod:`.baselines` direct least-squares calibration without an emulator
- :mod:`.plots`     the figures
"""
