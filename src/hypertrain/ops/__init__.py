"""Operator workflow commands: ``hypertrain run init`` and ``hypertrain keys``."""
