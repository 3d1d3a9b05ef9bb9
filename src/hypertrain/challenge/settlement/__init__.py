"""Settlement, below every resource: a round settled from proof (:mod:`.settle`), proven
faults booked and merge corrections (:mod:`.rollbacks`), the audits awaiting a verdict
after a re-audit (:mod:`.reassigned`) and the tape witnesses' word (:mod:`.witness`).
The rounds call it from the clock, the disputes from a ruling or a closed window."""
