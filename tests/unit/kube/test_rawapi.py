"""A 2xx answer is not trusted for its status code: bytes that do not parse (nested past the
interpreter's recursion limit included) and objects that lack what the API server always sends
(``metadata.name``, ``metadata.resourceVersion``) are ``Unavailable`` naming what is wrong,
never another exception and never a Lease a write's success could be concluded from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from k8slease.errors import Unavailable
from k8slease.kube.rawapi import _decode, map_api_exception

#: a Lease as the API server answers a GET, a create or an update
LEASE: dict[str, Any] = {
    "kind": "Lease",
    "apiVersion": "coordination.k8s.io/v1",
    "metadata": {"name": "demo", "namespace": "default", "resourceVersion": "42", "uid": "u"},
    "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
}

#: bytes that are not JSON, each failing json.loads differently
NOT_JSON = {
    "deep-array": b"[" * 100_000,
    "deep-object": b'{"a":' * 100_000,
    "deep-valid": b"[" * 100_000 + b"]" * 100_000,
    "not-utf8": b"\xff\xfe\xfd",
    "huge-integer": b'{"kind": "Lease", "metadata": {"name": ' + b"1" * 5000 + b"}}",
    "truncated": json.dumps(LEASE).encode()[:-3],
    "empty": b"",
}


@pytest.mark.parametrize("raw", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_an_answer_that_is_not_json_is_unavailable(raw: bytes) -> None:
    with pytest.raises(
        Unavailable, match=r"^get: the API server answered something that is not JSON$"
    ):
        _decode(raw, verb="get")


def _with(**changes: Any) -> bytes:
    body = json.loads(json.dumps(LEASE))
    for path, value in changes.items():
        where = body
        *parents, last = path.split("__")
        for parent in parents:
            where = where[parent]
        if value is _DROP:
            del where[last]
        else:
            where[last] = value
    return json.dumps(body).encode()


_DROP = object()

#: 200 answers meant to be a Lease that are not one, and what the error names
NOT_A_LEASE = {
    "metadata-a-string": (
        b'{"kind": "Lease", "metadata": "x", "spec": {}}',
        "a Lease whose metadata is 'x', not a mapping",
    ),
    "metadata-an-array": (_with(metadata=[1]), "a Lease whose metadata is an array, not a mapping"),
    "no-metadata": (_with(metadata=_DROP), "a Lease without metadata"),
    "empty-metadata": (
        b'{"kind": "Lease", "metadata": {}}',
        "a Lease without metadata.resourceVersion",
    ),
    "no-kind-empty-metadata": (b'{"metadata": {}}', "a Lease without metadata.resourceVersion"),
    "no-resource-version": (
        _with(metadata__resourceVersion=_DROP),
        "a Lease without metadata.resourceVersion",
    ),
    "empty-resource-version": (
        _with(metadata__resourceVersion=""),
        "a Lease without metadata.resourceVersion",
    ),
    "numeric-resource-version": (
        _with(metadata__resourceVersion=42),
        "a Lease without metadata.resourceVersion",
    ),
    "no-name": (_with(metadata__name=_DROP), "a Lease without metadata.name"),
    "name-not-a-string": (_with(metadata__name={"a": 1}), "a Lease without metadata.name"),
    "spec-a-string": (_with(spec="x"), "a Lease whose spec is 'x', not a mapping"),
    "spec-null": (_with(spec=None), "a Lease whose spec is null, not a mapping"),
    "another-kind": (_with(kind="Pod"), "an object whose kind is 'Pod', not Lease"),
    "kind-not-a-string": (_with(kind=[[[]]]), "an object whose kind is an array, not Lease"),
    "an-array": (b"[]", "something that is not a Lease"),
    "a-string": (b'"Lease"', "something that is not a Lease"),
}


@pytest.mark.parametrize(("raw", "problem"), NOT_A_LEASE.values(), ids=NOT_A_LEASE.keys())
def test_an_answer_that_is_not_a_lease_is_unavailable_naming_what_is_wrong(
    raw: bytes, problem: str
) -> None:
    with pytest.raises(Unavailable) as caught:
        _decode(raw, verb="update")
    assert str(caught.value) == f"update: the API server answered {problem}"


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(LEASE).encode(),
        _with(kind=_DROP),  # a list's item, or a server that leaves kind out
        _with(spec=_DROP),
        _with(spec={"holderIdentity": ["hand", "edited"]}),  # spec content: LeaseRecord.problems
    ],
    ids=["as-served", "no-kind", "no-spec", "odd-spec-content"],
)
def test_a_lease_as_the_api_server_sends_it_is_decoded(raw: bytes) -> None:
    assert _decode(raw, verb="get") == json.loads(raw)


def _list(items: Any, **metadata: Any) -> bytes:
    return json.dumps(
        {
            "kind": "LeaseList",
            "apiVersion": "coordination.k8s.io/v1",
            "metadata": metadata,
            "items": items,
        }
    ).encode()


ITEM = {key: value for key, value in LEASE.items() if key not in ("kind", "apiVersion")}


@pytest.mark.parametrize(
    "raw",
    [
        _list([ITEM, ITEM], resourceVersion="9"),
        _list([], resourceVersion="9"),
        _list(None, resourceVersion="9"),
    ],
    ids=["items", "empty", "null-items"],
)
def test_a_list_as_the_api_server_sends_it_is_decoded(raw: bytes) -> None:
    assert _decode(raw, verb="list", kind="LeaseList") == json.loads(raw)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (_list([]), "a LeaseList without metadata.resourceVersion"),
        (b'{"kind": "LeaseList", "metadata": "x", "items": []}', "a LeaseList without metadata"),
        (_list({"a": 1}, resourceVersion="9"), "a LeaseList whose items are not a list"),
        (
            _list([ITEM, {"metadata": {"name": "b"}}], resourceVersion="9"),
            "a LeaseList whose item 1 is a Lease without metadata.resourceVersion",
        ),
        (
            _list(["x"], resourceVersion="9"),
            "a LeaseList whose item 0 is something that is not a Lease",
        ),
        (json.dumps(LEASE).encode(), "something that is not a LeaseList"),
    ],
    ids=[
        "no-resource-version",
        "metadata-a-string",
        "items-a-map",
        "item-without-rv",
        "item-a-string",
        "a-lease",
    ],
)
def test_a_list_that_is_not_one_is_unavailable_naming_what_is_wrong(
    raw: bytes, problem: str
) -> None:
    with pytest.raises(Unavailable) as caught:
        _decode(raw, verb="list", kind="LeaseList")
    assert str(caught.value) == f"list: the API server answered {problem}"


def test_a_deletes_status_answer_is_decoded_and_garbage_is_not() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    assert _decode(json.dumps(status).encode(), verb="delete", kind="Status") == status
    with pytest.raises(Unavailable, match="not JSON"):
        _decode(b"[" * 100_000, verb="delete", kind="Status")
    with pytest.raises(Unavailable, match="answered a Status without metadata"):
        _decode(b'{"kind": "Status", "metadata": "x"}', verb="delete", kind="Status")


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000, b'{"reason": ' * 100_000, b'{"reason": [[1]], "message": {"a": 1}}', b"\xff"],
    ids=["deep-array", "deep-object", "not-strings", "not-utf8"],
)
def test_an_error_answer_with_a_garbage_body_maps_by_its_status_code(body: bytes) -> None:
    error = ApiException(status=503, reason="Service Unavailable")
    error.body = body  # type: ignore[assignment]  # send() stores the answer's bytes
    mapped = map_api_exception(error, verb="get")
    assert isinstance(mapped, Unavailable)
    assert str(mapped) == "get: HTTP 503 Service Unavailable: Service Unavailable"


#: answers that are a Lease, but not the one asked for ("demo" in "default"), and the error
ANOTHER_LEASE = {
    "another-name": (_with(metadata__name="other"), "the Lease 'default/other' instead of"),
    "another-namespace": (
        _with(metadata__namespace="kube-system"),
        "the Lease 'kube-system/demo' instead of",
    ),
    "both": (
        _with(metadata__name="other", metadata__namespace="kube-system"),
        "the Lease 'kube-system/other' instead of",
    ),
    "another-name-no-namespace": (
        _with(metadata__name="other", metadata__namespace=_DROP),
        "the Lease 'other' instead of",
    ),
    "a-terminal-escape": (
        _with(metadata__name="\x1b[2J" + "x" * 1000),
        "the Lease 'default/\\x1b[2J" + "x" * 244 + "...(+756 chars)' instead of",
    ),
}


@pytest.mark.parametrize(("raw", "problem"), ANOTHER_LEASE.values(), ids=ANOTHER_LEASE.keys())
@pytest.mark.parametrize("verb", ["get", "create", "update"])
def test_an_answer_that_is_another_lease_is_unavailable_naming_both(
    raw: bytes, problem: str, verb: str
) -> None:
    """Before: accepted, so the elector or a job lock acted on another Lease's record."""
    with pytest.raises(Unavailable) as caught:
        _decode(raw, verb=verb, namespace="default", name="demo")
    assert str(caught.value) == f"{verb}: the API server answered {problem} 'default/demo'"


def test_the_lease_asked_for_is_decoded_with_or_without_its_namespace() -> None:
    for raw in (json.dumps(LEASE).encode(), _with(metadata__namespace=_DROP)):
        assert _decode(raw, verb="get", namespace="default", name="demo") == json.loads(raw)


def test_a_namespace_that_is_not_a_string_is_unavailable() -> None:
    with pytest.raises(Unavailable) as caught:
        _decode(_with(metadata__namespace=["default"]), verb="get")
    assert str(caught.value) == (
        "get: the API server answered a Lease whose metadata.namespace is an array, not a string"
    )


def test_a_list_item_in_another_namespace_is_unavailable() -> None:
    """A list has many names: only the namespace is the one asked for."""
    other = {**ITEM, "metadata": {**ITEM["metadata"], "name": "b", "namespace": "kube-system"}}
    listed = _list([ITEM, other], resourceVersion="9")
    with pytest.raises(Unavailable) as caught:
        _decode(listed, verb="list", kind="LeaseList", namespace="default")
    assert str(caught.value) == (
        "list: the API server answered a LeaseList whose item 1 is a Lease in namespace "
        "'kube-system', not 'default'"
    )
    renamed = {**ITEM, "metadata": {**ITEM["metadata"], "name": "b"}}
    both = _list([ITEM, renamed], resourceVersion="9")
    assert _decode(both, verb="list", kind="LeaseList", namespace="default") == json.loads(both)
