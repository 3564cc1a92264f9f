"""Prediction (the elastic profile's `Predict=true`): the backend learns the shape of each pipeline from
the job identifiers its requests carry, and starts the next stage's pods while the current stage runs.

`shape` is the learned model (pure: identifiers and times in, what comes next out), `plan` the decision
(the pool's state and the model's predictions in, "start these pods" out, as the warm pool decides),
`forecaster` the doing part that feeds the model from the requests and hands plans to the pools, and
`store` what survives a restart (the shape only, in a ConfigMap).
"""
