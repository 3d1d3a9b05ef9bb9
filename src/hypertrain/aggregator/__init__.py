"""The aggregator: merge a round's accepted updates into the next model, reproducibly.

Public API (one concept per module):

* ``merge``: ``MergeInputs``, ``merge(inputs, blobs) -> MergeResult`` (two streaming
  passes: exact norms, then the token-weighted clipped sum and the outer step).
* ``norms``: ``update_norm`` (order-free exact L2 norm from the int8 codes).
* ``screen``: ``screen`` (median, outlier rejection, clip factors), ``token_weights``.
* ``outer``: ``nesterov_step``, ``encode_outer_state`` / ``decode_outer_state``.
* ``tape``: ``Tape``, ``Candidate``, ``Included``, ``Excluded``, ``decode_tape``.
* ``verify``: ``verify_tape`` (recompute and compare).
* ``rebase``: ``rebase`` (a proven-faulty update rolled out, later rounds replayed),
  ``rollback`` (one round), ``check_correction``.
* ``rollbacks``: the runner's side of it (poll the service's proven faults, publish).
* ``collect``: candidates from a round record (signed commits, verdicts).
* ``runner``: ``genesis``, ``merge_round``, ``follow`` (the process mode).
* ``blobs``: blob sources (memory, or a relay with a disk cache).

It reaches the challenge service through ``hypertrain.api.client.ChallengeClient``
and relays through ``hypertrain.relay.client.RelayClient``.

docs/aggregator.md explains the design.
"""
