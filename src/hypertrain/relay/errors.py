"""Typed errors of the relay: every refusal carries a short reason code and an HTTP status."""

from __future__ import annotations


class RelayError(ValueError):
    """A relay operation was refused; ``reason`` is machine-readable, ``status`` the HTTP code."""

    def __init__(self, reason: str, message: str, status: int = 400) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.detail = message
        self.status = status


class HashMismatchError(RelayError):
    """The bytes received do not hash to the SHA-256 they were announced under."""

    def __init__(self, expected: str, actual: str) -> None:
        super().__init__(
            "hash_mismatch", f"bytes hash to {actual}, not the announced {expected}", 400
        )


class SizeMismatchError(RelayError):
    """The bytes received are longer or shorter than the announced size."""

    def __init__(self, message: str) -> None:
        super().__init__("size_mismatch", message, 400)


class QuotaError(RelayError):
    """An upload exceeds the per-blob or per-hotkey-per-round byte limit."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason, message, 413)


class NotFoundError(RelayError):
    """No blob with this hash is held here (or upstream)."""

    def __init__(self, sha256: str) -> None:
        super().__init__("not_found", f"no blob {sha256}", 404)


class UpstreamError(RelayError):
    """The upstream relay could not be reached or refused a forwarded request."""

    def __init__(self, message: str) -> None:
        super().__init__("upstream_failed", message, 502)


class ArrivalError(RelayError):
    """A relay published an arrival record that is not a beacon round."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_arrival", message, 502)


class StorageError(RelayError):
    """The blob storage the settings name cannot be used (an S3 bucket missing or
    unreachable); raised when the relay starts, before it accepts anything."""

    def __init__(self, message: str) -> None:
        super().__init__("storage_unavailable", message, 503)
