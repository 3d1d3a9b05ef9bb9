"""The challenge service database's schema, one module per version.

``MIGRATIONS[i]`` takes the database from version ``i`` to ``i + 1``
(:func:`hypertrain.challenge.database.migrate` runs each inside one transaction, so an
interrupted upgrade leaves the old version). A version is never edited once released: a
change to the schema is a new module, appended here. The scripts name every table; the
storage module that owns a table (``tests/test_layering.py``) is the only code that reads
or writes it.
"""

from __future__ import annotations

from typing import Final

from hypertrain.challenge.migrations import (
    v01_initial,
    v02_nonces,
    v03_layouts,
    v04_admission,
    v05_dispute_game,
    v06_competition,
    v07_reassigned_verdicts,
    v08_verdict_windows,
    v09_proven_faults,
    v10_leave_honeypots,
    v11_departures,
    v12_compete_references,
    v13_tape_attestations,
    v14_admission_backoff,
    v15_late_panels,
    v16_run_baselines,
    v17_drop_honeypot_reveals,
)

MIGRATIONS: Final[tuple[str, ...]] = (
    v01_initial.SCRIPT,
    v02_nonces.SCRIPT,
    v03_layouts.SCRIPT,
    v04_admission.SCRIPT,
    v05_dispute_game.SCRIPT,
    v06_competition.SCRIPT,
    v07_reassigned_verdicts.SCRIPT,
    v08_verdict_windows.SCRIPT,
    v09_proven_faults.SCRIPT,
    v10_leave_honeypots.SCRIPT,
    v11_departures.SCRIPT,
    v12_compete_references.SCRIPT,
    v13_tape_attestations.SCRIPT,
    v14_admission_backoff.SCRIPT,
    v15_late_panels.SCRIPT,
    v16_run_baselines.SCRIPT,
    v17_drop_honeypot_reveals.SCRIPT,
)
