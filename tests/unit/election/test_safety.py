"""Safety property: with any interleaving of reads, writes, conflicts, lost answers, late watch
events and clock advances (all clocks at the same rate, arbitrary offsets and wall-clock skews),
two replicas never both believe they lead at the same instant.

The model (tests/unit/election/elector_model.py) runs the real
:class:`~k8slease.election.machine.ElectionMachine` of each replica against an in-memory store with
conditional writes. A replica believes it leads from the answer of a successful grant until
``renew_deadline`` after its last successful write was sent (or until it steps down), exactly what
``LeaderElector.is_leader`` reports.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k8slease.names import ANN_FENCING_TOKEN
from tests.unit.election.elector_model import NAME, Cluster, alternates

N = 3

replica = st.integers(min_value=0, max_value=N - 1)
#: Operation names, repeated to weight them: complete round trips, watch deliveries and clock
#: advances are common so that leadership and takeovers happen often; stops, crashes and hand
#: edits are rare.
OPS = (
    ["roundtrip"] * 30
    + ["act"] * 8
    + ["apply"] * 8
    + ["respond"] * 8
    + ["lose"] * 3
    + ["watch"] * 15
    + ["advance"] * 25
    + ["check"] * 3
    + ["watch_off", "watch_on", "watch_on"]
    + ["stop", "abdicate", "crash"]
    + ["edit:malform", "edit:relabel", "edit:foreign", "edit:untoken"]
)
step = st.tuples(st.sampled_from(OPS), replica, st.floats(min_value=0.0, max_value=4.0))
no_edit_step = st.tuples(
    st.sampled_from([op for op in OPS if not op.startswith("edit:")]),
    replica,
    st.floats(min_value=0.0, max_value=4.0),
)


def _edit(cluster: Cluster, kind: str) -> None:
    if NAME not in cluster.store.leases:
        return

    def change(lease: dict[str, Any]) -> None:
        spec = lease.setdefault("spec", {})
        if kind == "malform":
            spec["leaseDurationSeconds"] = -1
        elif kind == "relabel":
            lease["metadata"].setdefault("labels", {})["touched"] = "yes"
        elif kind == "foreign":
            # another well-behaved client: its duration is at least ours
            spec["holderIdentity"] = "go-controller"
            spec["leaseDurationSeconds"] = 10
        elif kind == "untoken":
            lease["metadata"].get("annotations", {}).pop(ANN_FENCING_TOKEN, None)

    cluster.store.edit(NAME, change)


Op = tuple[str, Any, float]


def run(ops: list[Op], offsets: list[float], skews: list[float]) -> Cluster:
    cluster = Cluster(N, offsets=offsets, skews=skews)
    for i in range(N):
        cluster.replicas[i].machine.set_watching(True, cluster.mono(i))
    crashed: set[int] = set()
    for op, arg, dt in ops:
        if arg in crashed:
            continue
        if op == "crash":
            crashed.add(arg)
        elif op.startswith("edit:"):
            _edit(cluster, op.removeprefix("edit:"))
        else:
            assert cluster.step(op, arg, dt), f"unknown op {op!r}"
        believers = cluster.believers()
        assert len(believers) <= 1, f"two leaders at t={cluster.t}: {believers}"
    for r in cluster.replicas:
        assert alternates(r.events), "on_stopped_leading only after a matching start"
    return cluster


offsets = st.lists(st.floats(min_value=0, max_value=1e6), min_size=N, max_size=N)
skews = st.lists(st.floats(min_value=-1e5, max_value=1e5), min_size=N, max_size=N)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=st.lists(step, min_size=150, max_size=300), offsets=offsets, skews=skews)
def test_never_two_leaders(ops: list[Op], offsets: list[float], skews: list[float]) -> None:
    run(ops, offsets, skews)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(no_edit_step, min_size=150, max_size=300), offsets=offsets, skews=skews)
def test_fencing_tokens_strictly_increase_with_every_grant(
    ops: list[Op], offsets: list[float], skews: list[float]
) -> None:
    cluster = run(ops, offsets, skews)
    tokens = cluster.started_tokens
    assert tokens == sorted(set(tokens)), tokens


def test_property_model_reaches_leadership_and_failover() -> None:
    """The model is not vacuous: leadership happens, moves on stop and after a crash."""
    cluster = Cluster(N)
    cluster.run_until(lambda: cluster.leader() is not None)
    first = cluster.leader()
    assert first is not None
    cluster.stop(first)
    cluster.run_until(lambda: cluster.leader() not in (None, first), limit=5)
    second = cluster.leader()
    # "crash" the second: it no longer acts at all
    crashed_at = cluster.t
    survivors = [i for i in range(N) if i not in (first, second)]
    while cluster.leader() in (None, second):
        cluster.advance(0.25)
        for i in survivors:
            cluster.replicas[i].machine.set_watching(True, cluster.mono(i))
            cluster.deliver_watch(i, 100)
            cluster.roundtrip(i)
    assert cluster.t - crashed_at >= 7.0, "not before the crashed leader's own deadline"
    assert cluster.leader() in survivors
