"""The one place that sequences the service's resources, above all of them.

What one message or one beacon round moves across several resources lives here: the
intake of a round's signed messages (:mod:`~hypertrain.challenge.lifecycle.intake`: a
join through admission, a verdict through the dispute games and the late verdicts) and
the step of every verified beacon round (:mod:`~hypertrain.challenge.lifecycle.clock`:
the games' deadlines, then each round's phase, then settlement). No resource imports it.
"""
