"""Who plays the dispute scenario: its run, keys, honeypot list and dispute rules."""

from __future__ import annotations

from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList
from hypertrain.protocol.identity import Hotkey

RUN = "run-d"
WINDOW = 2  # the manifest's round.dispute_window_rounds (tests/challenge/helpers.py)
REFEREE = Hotkey.from_seed(b"\x66" * 32)
AUDITOR = Hotkey.from_seed(b"\x55" * 32)
OTHER_AUDITOR = Hotkey.from_seed(b"\x56" * 32)
THIRD_AUDITOR = Hotkey.from_seed(b"\x57" * 32)
ISLANDS = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(2)]
HONEYPOTS = HoneypotList(
    salt="5a" * 32,
    entries=[
        HoneypotEntry(hotkey=ISLANDS[0].ss58_address, role="island", strategy="honest"),
        HoneypotEntry(hotkey=ISLANDS[1].ss58_address, role="island", strategy="wrong-samples"),
        HoneypotEntry(hotkey=AUDITOR.ss58_address, role="auditor", strategy="lying"),
    ],
)
# the dispute section of dispute_run (the service fixture): the referee rules
REFEREED = {"bond": 0, "answer_rounds": 3, "referee_rounds": 3, "referees": [REFEREE.ss58_address]}
# the dispute rules of rules_run and jury_run, less their referees
RULES = {"bond": 0, "answer_rounds": 3, "referee_rounds": 3, "clock_rounds": 6}
CLOCK_ROUNDS = 60  # the manifest's default dispute.clock_rounds
REFEREE_ROUNDS, REFEREE_EXTENSIONS = 3, 2  # REFEREED's referee_rounds, the default extensions
BOUND = 2 * CLOCK_ROUNDS + REFEREE_ROUNDS * (1 + REFEREE_EXTENSIONS)  # a game's, in dispute_run


def addresses(*keys: Hotkey) -> frozenset[str]:
    return frozenset(k.ss58_address for k in keys)
