"""Competition mode: specs, commit and reveal of models, evaluation cycles, scores."""
