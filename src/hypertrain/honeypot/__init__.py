"""The operator's honeypots: deliberately dishonest participants that measure the audits.

Operator tooling only; production roles carry no honeypot switches. A honeypot wraps
a real role and injects its lie: :mod:`~hypertrain.honeypot.auditor` is an auditor
that flips its verdicts on chosen islands (and then plays any dispute honestly, so
the game must overturn it); :mod:`~hypertrain.honeypot.island` is a real miner that
cheats (:mod:`~hypertrain.honeypot.cheats`) after a number of honest rounds, or whose
arithmetic differs in one operation of one step.
"""
