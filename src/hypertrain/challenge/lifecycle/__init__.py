"""The one place that sequences the service's resources.

The resource packages (rounds, admission, disputes, competition, platform) never call
each other's flows; what moves several of them together lives here: the intake of a
round's signed messages (:mod:`~hypertrain.challenge.lifecycle.intake`: a join through
admission, a verdict through the dispute games and the late verdicts) and the step of
every verified beacon round (:mod:`~hypertrain.challenge.lifecycle.clock`: the games'
deadlines, then each round's phase, then settlement).
"""
