"""Disputes: the dispute games over verdicts, late verdicts' own windows, and the
honeypot reveal with its public table."""
