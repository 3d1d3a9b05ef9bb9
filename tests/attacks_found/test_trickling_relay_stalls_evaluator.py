"""A miner's relay that trickles its model's bytes holds the evaluator as long as it likes.

docs/competition.md (Evaluation): "No submission stops the evaluator. A model that cannot
be fetched (whatever its ``base_url`` or its relay answers), fails a check, ... runs past
its time limit ... is scored as refused ... the evaluator goes on with the next model and
the next cycle"; the module docstring of the evaluator loop: "Nothing a submitter controls
can stop the loop".

The revealed ``base_url`` is the miner's. Its "relay" answers the GET at once and then
sends one byte at a time, each well inside the client's read timeout (60 s). The download
has no overall deadline (the wall-clock limit applies to scoring, in the child), so a
4 MiB model trickled at one byte every 50 s holds the single evaluator loop for years:
no later model of the cycle and no later cycle is ever scored, and an unscored model
"earns nothing that cycle" (the competition stops paying anyone) for one registered
hotkey's reveal. Measured outside the suite: 60 bytes at 1 byte / 2 s were read to the
end in 120 s. Here the evaluator's own fetch reads two 16-byte files trickled at 4 bytes
a second from a real loopback server. The documented rule (docs/competition.md,
"Evaluation"): a model's whole download has a deadline of ``slack_s + size /
min_rate_bytes_s``; with the slack set to 1 s the deadline is about 1 s against the 4 s
the first file needs, so the safe outcome is that it gives the model up (a
``fetch_deadline`` refusal) before the server has sent the whole file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypertrain.competition.messages import CycleModel
from hypertrain.competition.submission import ModelFile, SubmissionError, model_hash
from hypertrain.evaluator.download import FetchLimits
from hypertrain.evaluator.sandbox import Limits
from tests.competition.world import EVALUATOR, HEX, MINERS, World, evaluator_of, world
from tests.evaluator.blob_server import BlobServer, serve_blobs, servers

__all__ = ["servers", "world"]  # the real competition service, loopback blob servers
BODY = b"\x01" * 16
GAP_S = 0.25  # the attacker's pace: one byte every quarter second (the attack itself)


def test_a_trickling_relay_is_given_up_within_the_models_time_limit(
    world: World, servers: list[BlobServer], tmp_path: Path
) -> None:
    """Proves the evaluator refuses a model whose bytes arrive slower than its fetch
    deadline allows, instead of waiting for the miner's server."""
    fetch_limits = FetchLimits(slack_s=1.0)  # about 1 s for 32 bytes at >= 1 MiB/s
    evaluator = evaluator_of(
        world, EVALUATOR, tmp_path, limits=Limits(time_s=1.0), fetch_limits=fetch_limits
    )
    digest = hashlib.sha256(BODY).hexdigest()
    trickle = serve_blobs(servers, {digest: BODY}, gap_s=GAP_S)  # the attacker's server
    files = [
        ModelFile(name=name, sha256=digest, size=len(BODY))
        for name in ("config.json", "model.safetensors")
    ]
    model = CycleModel(
        hotkey=MINERS[0].ss58_address, model_sha256=model_hash(files), commitment=HEX,
        commit_beacon_round=1, commit_seq=1, files=files, base_url=trickle.url,
    )  # fmt: skip
    try:
        evaluator.fetch(model)
        outcome = "fetched"
    except SubmissionError as exc:
        outcome = f"refused: {exc}"
    trickle.finish()
    assert trickle.sent and trickle.sent[-1] < len(BODY), (
        f"the evaluator waited for every trickled byte ({trickle.sent} of {len(BODY)};"
        f" {outcome}) with a fetch deadline of {fetch_limits.deadline_s(2 * len(BODY))} s"
    )
    assert outcome.startswith("refused: fetch_deadline"), outcome
