"""The one error the clients raise: the service refused, was unreachable, or answered
something unusable (the service's own errors live with the service)."""

from __future__ import annotations


class ServiceError(ValueError):
    """Raised by :class:`~hypertrain.api.client.ChallengeClient`, not by the service.

    The service refused a request, could not be reached, or answered something unusable;
    ``status`` is the HTTP status (0 when there was no answer) and ``code`` the service's
    short error code (``""`` when it gave none).
    """

    def __init__(self, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
