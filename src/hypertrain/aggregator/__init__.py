"""The aggregator: merge a round's accepted updates into the next model, reproducibly.

Public API (one concept per module):

* ``combine``: ``combine(manifest, start, momentum, candidates, fetch) -> Combined``, the
  merge as a pure function (two streaming passes: exact norms, then the weighted clipped
  sum; the outer step and the int8 broadcast), which the parity simulator runs too.
* ``merge``: ``MergeInputs``, ``merge(inputs, blobs) -> MergeResult`` (availability,
  ``combine`` and the tape).
* ``norms``: ``update_norm`` (order-free exact L2 norm from the int8 codes).
* ``screen``: ``screen`` (median, outlier rejection, clip factors), ``token_weights``.
* ``outer``: ``nesterov_step``, ``encode_outer_state`` / ``decode_outer_state``.
* ``tape``: ``Tape``, ``Candidate``, ``Included``, ``Excluded``, ``decode_tape``.
* ``verify``: ``verify_tape`` (recompute and compare).
* ``rebase``: ``rebase`` (a proven-faulty update rolled out, later rounds replayed),
  ``rollback`` (one round), ``check_correction``.
* ``rollbacks``: the runner's side of it (poll the service's proven faults, publish).
* ``records``: every record a merge stands on (manifest, round open, assignments,
  commits, verdicts), verified through ``hypertrain.evidence``, the checks every role uses.
* ``collect``: candidates and collect-stage exclusions from a round record (``records``).
* ``runner``: ``genesis``, ``merge_round``, ``follow`` (the process mode).
* ``blobs``: blob sources (memory, or a relay with a disk cache).

It reaches the challenge service through ``hypertrain.api.client.ChallengeClient``
and relays through ``hypertrain.relay.client.RelayClient``.

docs/aggregator.md explains the design.
"""
