"""The devnet's honeypot list: committed in the manifest at the start, revealed at the end.

The last island is the honeypot (honest for a few rounds, then its cheat). Its entry
names the round it starts cheating (``cheats_from_round``), so the dashboard's catch rate
counts the rounds it cheated, not the honest ones before them. The entry, with a fresh
random salt, is hashed into ``honeypots.commitment`` before the run is
created; once the last round is final the list itself is posted to the service, which
checks it against the commitment and fills the dashboard's honeypot panel from it.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from hypertrain.devnet.errors import DevnetError
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment


def honeypot_list(
    hotkey: str, strategy: str, lying_auditor: str = "", *, honest_rounds: int = 0
) -> HoneypotList:
    """One island honeypot running ``strategy`` from round ``honest_rounds`` on (and, in the
    rollback scenario, the lying auditor ``lying_auditor``), salted so the commitment
    hides them."""
    island = HoneypotEntry(
        hotkey=hotkey, role="island", strategy=strategy, cheats_from_round=honest_rounds
    )
    entries = [island]
    if lying_auditor:
        entries.append(HoneypotEntry(hotkey=lying_auditor, role="auditor", strategy="lying"))
    return HoneypotList(salt=secrets.token_hex(32), entries=entries)


def committed(doc: dict[str, Any], honeypots: HoneypotList, reveal_round: int) -> dict[str, Any]:
    """``doc`` (a manifest document) committing to ``honeypots``, revealable after a round."""
    spec = {"commitment": commitment(honeypots), "reveal_round": reveal_round}
    return {**doc, "honeypots": spec}


def reveal(url: str, run_id: str, admin_token: str, honeypots: HoneypotList) -> None:
    """Publish the list (the reveal round must be final); a refusal is a DevnetError."""
    answer = httpx.post(
        f"{url}/admin/v1/runs/{run_id}/honeypots",
        json=honeypots.model_dump(mode="json"),
        headers={"Authorization": f"Bearer {admin_token}"},
        timeout=30,
    )
    if not answer.is_success:
        raise DevnetError(f"the service refused the honeypot reveal: {answer.text}")
