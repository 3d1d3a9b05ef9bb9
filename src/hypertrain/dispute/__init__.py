"""The dispute game: bisection from step to layer to operation, then a referee ruling.

A pure state machine over signed, typed messages (no torch, no web): the challenge
service stores a :class:`~hypertrain.dispute.model.Game` and feeds it the parties'
answers and the referee's ruling; islands, auditors and referees compute the hashes
they answer with. Every transition returns a new game or raises a
:class:`~hypertrain.dispute.errors.DisputeError`, so a refused message changes nothing.
"""
