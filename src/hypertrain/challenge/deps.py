"""FastAPI dependencies: the live state, the three bearer tokens, the shared path parameters.

Tokens are compared in constant time (:class:`~hypertrain.challenge.settings.Secret`)
and never logged; a missing or wrong token is 401, a route whose token is not
configured is 503 (it cannot be used at all, rather than being open).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, Final, ParamSpec, TypeVar

from fastapi import Depends, Header, Path, Request

from hypertrain.challenge.errors import AuthError, ForbiddenError, UnavailableError
from hypertrain.challenge.settings import Secret
from hypertrain.challenge.state import ServiceState


def get_state(request: Request) -> ServiceState:
    state: ServiceState | None = getattr(request.app.state, "service", None)
    if state is None:
        raise UnavailableError("the service is starting")
    return state


State = Annotated[ServiceState, Depends(get_state)]
# Path parameters the routers share: a run id, a round index.
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
RoundIndex = Annotated[int, Path(ge=0, le=2**53 - 1)]
# The error statuses a signed-message route may answer (the body is always an ``Error``).
ERRORS: Final[dict[int | str, dict[str, object]]] = {
    code: {} for code in (400, 401, 403, 404, 409, 413, 503)
}
P = ParamSpec("P")
T = TypeVar("T")


def serialized(route: Callable[P, T]) -> Callable[P, T]:
    """Run a plain ``def`` route (FastAPI's thread pool) holding the writer lock.

    The route takes the live state as its ``state`` parameter; the database and the
    ledger are then used by one request at a time, and never on the event loop.
    """

    @functools.wraps(route)
    def locked(*args: P.args, **kwargs: P.kwargs) -> T:
        state: Any = kwargs["state"]
        with state.lock:
            return route(*args, **kwargs)

    return locked


def _check_bearer(secret: Secret | None, authorization: str | None, what: str) -> None:
    if secret is None:
        raise UnavailableError(f"the {what} token is not configured on this service")
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not presented:
        raise AuthError(f"this route needs 'Authorization: Bearer <{what} token>'")
    if not secret.matches(presented.strip()):
        raise AuthError(f"wrong {what} token")


def require_internal(
    state: State,
    authorization: Annotated[str | None, Header()] = None,
    x_platform_challenge_slug: Annotated[str | None, Header()] = None,
) -> None:
    _check_bearer(state.settings.internal_token, authorization, "internal")
    if x_platform_challenge_slug != state.settings.slug:
        raise ForbiddenError(f"X-Platform-Challenge-Slug must be {state.settings.slug!r}")


def require_admin(state: State, authorization: Annotated[str | None, Header()] = None) -> None:
    _check_bearer(state.settings.admin_token, authorization, "admin")


def require_worker(state: State, authorization: Annotated[str | None, Header()] = None) -> None:
    _check_bearer(state.settings.worker_token, authorization, "worker")
