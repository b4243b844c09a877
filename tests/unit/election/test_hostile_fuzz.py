"""Issue 23: hostile Lease content through the election machines and the lock rules.

Three real :class:`~k8slease.election.machine.ElectionMachine` replicas (the model of
test_safety.py) contend while the Lease is overwritten, at any moment, with anything the API
server would store (support/hostile.py). Nothing raises, never two leaders, and once the Lease is
left alone (the edit "repaired" by the replicas' own writes) a leader emerges within the longer
of the hostile duration and ours, plus retries: the group never freezes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from k8slease.lease.record import INT32_MAX, record_from_lease
from tests.support.hostile import fuzz_settings, lease_json
from tests.unit.election.elector_model import NAME, Cluster

N = 3

leader_leases = lease_json(name=NAME, role="leader", group=NAME)
OPS = ["roundtrip"] * 6 + ["watch"] * 4 + ["advance"] * 5 + ["act", "apply", "respond", "hostile"]
steps = st.lists(
    st.tuples(
        st.sampled_from(OPS),
        st.integers(min_value=0, max_value=N - 1),
        st.floats(min_value=0.0, max_value=4.0),
    ),
    min_size=20,
    max_size=80,
)


def _overwrite(cluster: Cluster, hostile: dict[str, Any]) -> None:
    if NAME not in cluster.store.leases:
        return

    def change(lease: dict[str, Any]) -> None:
        metadata = lease["metadata"]
        lease.clear()
        lease.update({k: v for k, v in hostile.items() if k != "metadata"})
        kept = {"name": NAME, "resourceVersion": metadata["resourceVersion"]}
        lease["metadata"] = {**hostile["metadata"], **kept}

    cluster.store.edit(NAME, change)


ISSUE_23_EDITS = [
    {
        "metadata": {
            "name": NAME,
            "annotations": {
                "k8slease.io/claimed-tick": "9999-12-31T23:59:59.999999-23:59",
                "k8slease.io/fencing-token": str(2**63 - 1),
            },
        },
        "spec": {
            "holderIdentity": "ghost\x00\x1b[2J\u202e",
            "leaseDurationSeconds": 10,
            "leaseTransitions": 2**31 - 1,
            "renewTime": "9999-12-30T23:59:59.999999+14:00",
        },
    }
]


@fuzz_settings(150)
@given(ops=steps, edits=st.lists(leader_leases, min_size=1, max_size=4))
@example(ops=[("roundtrip", 0, 0.0)] * 3 + [("hostile", 0, 0.0)], edits=ISSUE_23_EDITS)
def test_hostile_leases_never_crash_a_machine_nor_freeze_the_group(
    ops: list[tuple[str, int, float]], edits: list[dict[str, Any]]
) -> None:
    cluster = Cluster(N)
    for i in range(N):
        cluster.replicas[i].machine.set_watching(True, cluster.mono(i))
    pending_edits = list(edits)
    assert pending_edits
    for op, i, dt in ops:
        if op == "hostile":
            if pending_edits:
                _overwrite(cluster, pending_edits.pop())
        else:
            assert cluster.step(op, i, dt, watch_events=3), f"unknown op {op!r}"
        assert len(cluster.believers()) <= 1
    if len(pending_edits) == len(edits):  # none landed yet (no Lease): elect, then edit
        cluster.run_until(lambda: NAME in cluster.store.leases, limit=60)
    if pending_edits:
        _overwrite(cluster, pending_edits.pop())  # the last edit stands; nobody repairs it by hand
    for i in range(N):  # settle requests in flight
        cluster.apply(i)
        cluster.respond(i)
    # left alone: a leader within the longest duration anyone must wait out, plus retries
    stored = cluster.store.leases.get(NAME)
    record = record_from_lease(stored) if stored is not None else None
    hostile_duration = record.duration_seconds if record is not None else 0
    assert 0 <= hostile_duration <= INT32_MAX
    if hostile_duration > 3600:
        return  # a duration of days is honoured (rule 2); the model would have to run for days
    wait = max(hostile_duration, cluster.timing.lease_duration) + 4 * cluster.timing.retry_interval
    for i in range(N):  # every replica sees the edit before the group is judged
        cluster.deliver_watch(i, 1000)

    def repaired() -> bool:
        leader = cluster.leader()
        stored = cluster.store.leases.get(NAME)
        if leader is None or stored is None:
            return False
        record = record_from_lease(stored)
        return record.problems == () and record.holder == f"r{leader}"

    cluster.run_until(repaired, limit=wait + 10)
