"""Kill each role of a running devnet and restart it: the chain goes on.

One tiny network on loopback (module fixture, every role its own process) serves every
test. Each test SIGKILLs one role's process group mid-run, as a crash would, restarts it
with the same command line, environment and listening socket on its own state directory
(``Supervisor.restart``), and then requires: the rounds open and settle past the one
that was open at the kill, the ledger verifies and holds exactly one pool per settled
round (no unit lost or doubled), and no other role exited.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import httpx
import pytest
from rich.console import Console

from hypertrain.devnet import chaos, orchestrator, prep, roles
from hypertrain.devnet.config import DevnetConfig
from hypertrain.devnet.orchestrator import Devnet
from hypertrain.devnet.procs import Supervisor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROUNDS = 100  # more than the tests use: the aggregator stops after this many
SETTLE_TIMEOUT_S = 240.0  # a bound for a stuck chain, not a pace: rounds take seconds
LONG_LIVED = ("beacon", "service", "relay", "auditor", "witness", "aggregator",
              "island-1", "island-2", "island-3")  # fmt: skip


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    tmp = tmp_path_factory.mktemp("restarts")
    cfg = DevnetConfig(
        rounds=ROUNDS, islands=2, inner_steps=4, checkpoint_interval=2, preset="tiny",
        seq_len=32, vocab_size=512, port=0, state_dir=tmp / "devnet",
        cache_dir=tmp / "cache", honeypot="bad-update", baseline=False, live_view=False,
        warm_start_percent=2,
    )  # fmt: skip
    state = cfg.state_dir / "state"
    devnet = Devnet(cfg, Console(quiet=True), Supervisor(state / "logs"), state)
    devnet.strategy = "bad-update"
    try:
        dataset = prep.prepared_dataset(cfg.cache_dir, prep.default_corpus(), 512, 32)
        devnet.dataset = dataset
        orchestrator.start(devnet, dataset)
        wait_final(devnet, 0)
        yield devnet
    finally:
        devnet.sup.stop_all()
        shutil.rmtree(state, ignore_errors=True)


def rounds(net: Devnet) -> dict[int, str]:
    """Round -> phase, from the service's dashboard document (empty while it is away)."""
    try:
        net.doc = net.get(f"/v1/runs/{roles.RUN_ID}/dashboard")
    except httpx.HTTPError:  # a restarting service: asked again at the next poll
        return {}
    assert net.doc is not None
    return {r["round"]: r["phase"] for r in net.doc["rounds"]}


def wait_final(net: Devnet, last: int, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Poll until rounds 0..``last`` are all final; fail if a role exits meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        net.sup.check(ignore=[c.name for c in net.sup.children if c.name.startswith("join-")])
        phases = rounds(net)
        if phases and all(phases.get(r) == "final" for r in range(last + 1)):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"rounds 0..{last} not final in {timeout_s:.0f} s: {phases}")
        time.sleep(0.5)


def newest(net: Devnet) -> int:
    deadline = time.monotonic() + 60
    while not (phases := rounds(net)):
        assert time.monotonic() < deadline, "the service did not answer"
        time.sleep(0.5)
    return max(phases)


def kill_and_go_on(net: Devnet, role: chaos.Role) -> None:
    """Kill ``role`` mid-run, restart it, and require the chain to go on (see the module)."""
    open_at_kill = newest(net)
    others = {c.name: c.process.pid for c in net.sup.children if c.name in LONG_LIVED}
    event = chaos.kill_and_restart(net.sup, role, open_at_kill)
    assert event.child == chaos.target(net.sup, role) and event.round == open_at_kill
    assert net.sup.child(event.child).restarts >= 1
    # the round open at the kill and the next one both open and settle
    wait_final(net, open_at_kill + 1)
    for name, pid in others.items():  # no other role exited (or was restarted)
        child = net.sup.child(name)
        if name != event.child:
            assert child.alive and child.process.pid == pid, (name, child.tail())
    assert net.sup.child(event.child).alive
    money = chaos.ledger_check(net.state / "service", roles.RUN_ID)
    assert money.verified, money.detail
    assert money.units_lost_or_doubled == 0 and money.ok, money


def test_the_chain_goes_on_after_the_service_is_killed(net: Devnet) -> None:
    """The restarted service serves on the same port: the devnet keeps its socket."""
    url = net.url
    kill_and_go_on(net, "service")
    assert net.url == url and rounds(net)


def test_the_chain_goes_on_after_the_relay_is_killed(net: Devnet) -> None:
    kill_and_go_on(net, "relay")


def test_the_chain_goes_on_after_the_aggregator_is_killed(net: Devnet) -> None:
    kill_and_go_on(net, "aggregator")


def test_the_chain_goes_on_after_the_auditor_is_killed(net: Devnet) -> None:
    kill_and_go_on(net, "auditor")


def test_the_chain_goes_on_after_an_island_is_killed(net: Devnet) -> None:
    kill_and_go_on(net, "island")


def test_the_chain_goes_on_after_the_witness_is_killed(net: Devnet) -> None:
    kill_and_go_on(net, "witness")


def test_roles_restarted_while_the_service_is_away_wait_for_it(net: Devnet) -> None:
    """The witness and the aggregator start while the service is down (its connections
    time out in the held socket's backlog), wait for it, and the chain goes on."""
    open_at_kill = newest(net)
    net.sup.kill("service")
    for name in ("witness", "aggregator"):
        net.sup.restart(name)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while "service_unreachable" not in net.sup.child("witness").tail(1 << 16):
        assert net.sup.child("witness").alive, net.sup.child("witness").tail()
        assert time.monotonic() < deadline, "the witness never found the service away"
        time.sleep(0.5)
    net.sup.restart("service")
    wait_final(net, open_at_kill + 1)
    for name in LONG_LIVED:
        assert net.sup.child(name).alive, (name, net.sup.child(name).tail())
    money = chaos.ledger_check(net.state / "service", roles.RUN_ID)
    assert money.ok and money.units_lost_or_doubled == 0, money
