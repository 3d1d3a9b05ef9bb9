"""The service's tables, below every resource: each module reads and writes its tables
and returns typed rows, with no policy. Today the dispute games' tables live here (the
games, the verdicts they set aside and the auditors they barred, the late verdicts'
windows), which the rounds read (a jury, a settlement, a view) and the disputes write;
the other resources' tables still live in their own packages."""
