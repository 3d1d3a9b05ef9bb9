"""The torch side of disputes: the parties' traces and the referee's one-operation check.

``trace`` replays one step of a segment under a dispatch mode that records every
operation (name, arguments, input and output digests) section by section; ``party``
answers the game's queries from a segment's start checkpoint; ``recompute`` is what a
referee runs: one operation on tensors whose digests both parties agreed on.
"""
