"""The challenge service: the coordinator of a Hypertrain network (FastAPI, no torch).

It holds runs, rounds, the roster and the ledger; admits islands by signed join
requests checked against the subnet metagraph; drives each round's state machine
from verified beacon rounds only; selects audits from public randomness
(:mod:`hypertrain.challenge.rounds.selection`, recomputable by anyone); records verdicts,
disputes and merge tapes; and answers the platform's ``get_weights``.

Entry points: :func:`hypertrain.challenge.app.create_app` (factory) and
``uvicorn hypertrain.challenge.app:app`` (built from the environment, see
docs/operator.md). Routes are listed in docs/challenge-routes.md.
Roles reach the service through :mod:`hypertrain.api` (the clients and the public
models both ends share), never through this package.
"""
