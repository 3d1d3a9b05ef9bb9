"""The former home of the dispute game's tables, kept for one name.

The tables and their queries are the challenge service's storage now
(``hypertrain.challenge.disputes.game_storage`` and its parts); the public record of a
game is :class:`hypertrain.dispute.view.DisputeView`, re-exported here for the importers
that still name this module (``hypertrain.api``, ``hypertrain.evidence``). Import it from
:mod:`hypertrain.dispute.view`; this module goes once none names it.
"""

from hypertrain.dispute.view import DisputeView

__all__ = ["DisputeView"]
