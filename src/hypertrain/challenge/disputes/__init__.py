"""Disputes: the dispute games over verdicts and late verdicts' own windows."""
