"""A lying auditor: replays like any auditor, then signs the opposite verdict.

``python -m hypertrain.honeypot.auditor`` takes the flags of ``hypertrain auditor run``
plus ``--flip HOTKEY`` (repeatable; none = every island) and ``--after-round N`` (lie
only from round N on, so a devnet shows honest rounds first). In a dispute it answers
from its honest replay, so its own hashes reach the island's leaf and the verdict is
overturned: the measurement of whether the dispute game protects honest islands.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.follow import follow
from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import Auditor, RoundRecords, emit_json
from hypertrain.evidence.verify import verify_manifest
from hypertrain.protocol.cliargs import add_relay_url, add_service_url
from hypertrain.protocol.identity import load_key_file
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.profile import apply_profile


@dataclass(frozen=True, slots=True)
class LyingAuditor(Auditor):
    flip: frozenset[str] = field(default_factory=frozenset)  # empty: every island
    after_round: int = 0

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        honest = Auditor.judge(self, detail, assignment)
        targeted = not self.flip or assignment.hotkey in self.flip
        if not targeted or assignment.round < self.after_round:
            return honest
        if honest.result == "mismatch":
            return AuditOutcome("match", None, honest.update_checked, "", honest.segments)
        first = honest.segments[0]
        return AuditOutcome(
            "mismatch", first + 1, honest.update_checked, "", honest.segments, "segment"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hypertrain.honeypot.auditor")
    add_service_url(parser, required=True)
    add_relay_url(parser, required=True)
    for flag in ("--run-id", "--key-file", "--worker-token-file"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--dataset-dir", required=True, help="prepared dataset dir")
    parser.add_argument("--coordinator", default="", help="pinned coordinator SS58")
    parser.add_argument("--flip", action="append", default=[], help="island hotkey to lie about")
    parser.add_argument("--after-round", type=int, default=0, help="lie from this round on")
    parser.add_argument(
        "--poll-s", type=float, default=1.0, help="seconds between polls (default 1)"
    )
    args = parser.parse_args(argv)
    token = Path(args.worker_token_file).read_text(encoding="utf-8").strip()
    service = ChallengeClient(args.service_url, worker_token=token)
    manifest = verify_manifest(
        service.manifest_envelope(args.run_id), args.run_id, args.coordinator or None
    )
    det = manifest.determinism
    apply_profile(det)  # may re-execute this process with the run's CPU switches
    check_determinism(configure_determinism(det.num_threads, "cpu", det.dtype), det)
    key = load_key_file(Path(args.key_file))
    with RelayClient(args.relay_url, key, args.run_id) as relay:
        auditor = LyingAuditor(
            service,
            relay,
            key,
            manifest,
            Path(args.dataset_dir),
            flip=frozenset(args.flip),
            after_round=args.after_round,
        )
        emit_json("started", run_id=args.run_id, hotkey=key.ss58_address, honeypot="lying")
        follow(auditor, poll_s=args.poll_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
