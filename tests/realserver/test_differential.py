"""Differential fidelity: every sequence in ``sequences.py`` runs on the embedded server and on a
real kube-apiserver, and their answers must match (status codes, Status reasons and details,
Warning headers, and the bodies with volatile values masked; see ``differential.py``).

A difference the embedded server keeps on purpose is listed in ``KNOWN`` with its reason (and in
docs/fidelity.md); each listed difference must still occur, so the list cannot go stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from k8slease.testing import APIServer
from k8slease.testing.pytest_plugin import wait_established
from tests.realserver.differential import Response, Session, differences, normalise
from tests.support.sequence_requests import widget_crd
from tests.support.sequences import SEQUENCES

#: The embedded server's watch window in this module: small, so that the ``gone`` sequence's
#: 25 writes push resourceVersion 1 out of it (see KNOWN["gone"]).
EMBEDDED_WATCH_WINDOW = 20

#: sequence -> response label -> why its difference is kept (see docs/fidelity.md).
KNOWN: dict[str, dict[str, str]] = {
    "gone": {
        "watch-too-old": "kube-apiserver's watch cache replays every event it holds since it "
        "started, however old the resourceVersion asked for, and answers 410 only once that "
        "version has left the cache (sized by load and a 75 s freshness, not by a count); etcd "
        "compaction does not change that. The embedded server keeps a fixed window of events "
        "(history_size, 1000 by default; 20 here) and answers 410 before it, so clients' "
        "re-list paths can be tested on demand.",
    },
}
#: Known differences that come and go with the real server's state: after many Lease writes
#: (a full test session) its watch cache has moved past resourceVersion 1 and it answers 410 too.
STATE_DEPENDENT = {("gone", "watch-too-old")}


@pytest.fixture(scope="module")
def embedded() -> Iterator[APIServer]:
    with APIServer(history_size=EMBEDDED_WATCH_WINDOW) as server:
        _install_crd(server)
        yield server


@pytest.fixture(scope="module")
def real(k8s_real_apiserver: Any) -> Any:
    _install_crd(k8s_real_apiserver)
    return k8s_real_apiserver


def _install_crd(server: Any) -> None:
    api = server.api_client()
    try:
        manifest = widget_crd()
        session = Session(api, "")
        status, _ = session.request(
            "crd", "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", manifest
        )
        assert status in (201, 409), session.responses[-1]
        wait_established(api, manifest["metadata"]["name"])
    finally:
        api.close()


def _replay(server: Any, name: str, namespace: str) -> list[Response]:
    api = server.api_client()
    try:
        setup = Session(api, namespace)
        status, body = setup.request(
            "namespace",
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
        assert status == 201, body
        session = Session(api, namespace)
        SEQUENCES[name](session)
        return session.responses
    finally:
        api.close()


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_embedded_server_answers_like_kube_apiserver(
    name: str, embedded: APIServer, real: Any, fidelity_tally: dict[str, int]
) -> None:
    namespace = f"diff-{name.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    ours = _replay(embedded, name, namespace)
    theirs = _replay(real, name, namespace)
    found = differences(ours, theirs)
    known = KNOWN.get(name, {})
    unexplained = {label: lines for label, lines in found.items() if label not in known}
    stale = sorted(label for label in set(known) - set(found)
                   if (name, label) not in STATE_DEPENDENT)  # fmt: skip
    fidelity_tally["sequences"] += 1
    fidelity_tally["pairs"] += len(ours)
    fidelity_tally["differences"] += len(found)
    fidelity_tally["known"] += len(found) - len(unexplained)
    report = [f"{label}: {line}" for label, lines in unexplained.items() for line in lines]
    assert not unexplained, f"{len(unexplained)} responses differ:\n" + "\n".join(report)
    assert not stale, f"listed as known but no longer different: {stale}"


def test_server_set_times_in_table_cells_are_masked_and_their_rendering_kept() -> None:
    """A CRD's "Created At" is when each server made it (the two made it a second apart in a
    make test run, and the sequence failed); a cell of another rendering is still compared."""
    columns = [{"name": "Name", "type": "string"}, {"name": "Created At", "type": "date"}]

    def table(created: str) -> dict[str, Any]:
        return {"kind": "Table", "columnDefinitions": columns, "rows": [{"cells": ["w", created]}]}

    def answer(body: dict[str, Any]) -> Response:
        return Response("crd-table", 200, normalise(body), [], [])

    ours, theirs = answer(table("2026-12-03T10:12:49Z")), answer(table("2026-12-03T10:12:50Z"))
    assert differences([ours], [theirs]) == {}
    assert differences([ours], [answer(table("2026-12-03 10:12:50"))]) != {}
