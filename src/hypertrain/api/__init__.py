"""The challenge service as its callers see it: the HTTP clients and the public models.

Every role reaches the service through :class:`hypertrain.api.client.ChallengeClient`
(and :class:`hypertrain.api.competition.CompetitionClient` in competition mode):
torch-free, httpx, raising :class:`hypertrain.api.errors.ServiceError`. The answers are
parsed into :mod:`hypertrain.api.models`, the same pydantic models the service declares
as its response models, so both ends read one definition of every field. The package
sits below the roles and the evidence they share, and above nothing of the service:
the service imports it, never the other way round.
"""
