"""What a stopped devnet needs to go on: ``--resume`` on the same ``--state-dir``.

Once every process of a run is up, the devnet writes ``session.json`` into its state: the
ports the service and the relay serve on (records name blob URLs on the relay's port, so
a resumed relay must serve on it again), the honeypot's strategy and the honeypot list
the manifest committed to (revealed at the end). Everything else a resumed run needs is
already on disk, kept by the roles themselves: the secrets, the beacon's chain, the
service's database, the relay's blobs, each island's work directory, the aggregator's
state and round 0's model.

A resumed devnet first stops the children the earlier one left running (it may have
been killed outright: :func:`procs.stop_stale`), then starts every role again on that
state without creating the run, training the warm start or joining islands again. The
rounds whose commit windows passed while it was down close as any round does that
islands missed; the run goes on from the next one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hypertrain.devnet.errors import DevnetError
from hypertrain.protocol.honeypots import HoneypotList

SESSION_FILE = "session.json"


@dataclass(frozen=True, slots=True)
class Session:
    service_port: int
    relay_port: int
    strategy: str
    honeypots: dict[str, Any]  # the committed HoneypotList, as JSON
    warm_start: bool  # round 0's model is the warm start's (state/genesis.model)

    def honeypot_list(self) -> HoneypotList:
        return HoneypotList.model_validate(self.honeypots)


def save(state: Path, session: Session) -> None:
    """Write the session (atomically: a devnet killed while writing leaves the old one)."""
    tmp = state / f"{SESSION_FILE}.part"
    tmp.write_text(json.dumps(asdict(session), indent=1), encoding="utf-8")
    tmp.replace(state / SESSION_FILE)


def load(state: Path) -> Session | None:
    """The session of a run that was fully started in ``state`` (None: nothing to resume,
    the run starts afresh); a session file that cannot be read is a :class:`DevnetError`."""
    path = state / SESSION_FILE
    if not path.exists():
        return None
    try:
        return Session(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise DevnetError(
            f"cannot resume from {path}: {exc} (remove --resume to start afresh)"
        ) from None
