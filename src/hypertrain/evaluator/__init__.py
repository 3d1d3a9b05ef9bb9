"""The evaluator role of competition mode: score submitted models on held-out pages."""
