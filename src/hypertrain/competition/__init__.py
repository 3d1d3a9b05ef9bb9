"""Competition mode: checkpoints submitted by commit-then-reveal, scored on held-out loss.

Everything here is pure and torch-free (the challenge service imports it): the
competition spec, the messages miners and evaluators sign, the hashes that bind a
model directory to its commitment, the checks a model directory must pass before
any compute, and the scoring rule (pairwise per-sample wins with an epsilon
advantage for the older model, softmax over win rates). The evaluator role that
computes the losses lives in :mod:`hypertrain.evaluator`.
"""
