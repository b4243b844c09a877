"""Differential sequences of the Lease API: what k8slease's clients rely on.

CRUD and every patch type, conflicts and preconditions, bodies the server refuses, label and
field selectors, watches (from a resourceVersion, filtered, too old: 410 Gone) and pagination.
Each is a function of a :class:`~tests.realserver.differential.Session` in a fresh namespace
(``s.ns``); ``sequences.py`` lists them.
"""

from __future__ import annotations

from tests.realserver.differential import Session
from tests.support.bodies import JSON_PATCH, MERGE, STRATEGIC
from tests.support.sequence_requests import COORD, T0, lease, leases, rv


def lease_crud(s: Session) -> None:
    _, created = s.request("create", "POST", leases(s), lease("crud"))
    s.request("get", "GET", leases(s, "crud"))
    s.request("list", "GET", leases(s))
    updated = {**created, "spec": {**created["spec"], "holderIdentity": "b"}}
    s.request("update", "PUT", leases(s, "crud"), updated)
    s.request(
        "merge-patch",
        "PATCH",
        leases(s, "crud"),
        {"spec": {"leaseTransitions": 2}},
        content_type=MERGE,
    )
    s.request(
        "json-patch",
        "PATCH",
        leases(s, "crud"),
        [{"op": "replace", "path": "/spec/holderIdentity", "value": "c"}],
        content_type=JSON_PATCH,
    )
    s.request(
        "strategic-patch",
        "PATCH",
        leases(s, "crud"),
        {"metadata": {"labels": {"tier": "x"}}},
        content_type=STRATEGIC,
    )
    s.request(
        "micro-time",
        "PATCH",
        leases(s, "crud"),
        {"spec": {"acquireTime": T0, "renewTime": "2024-01-02T03:04:05.5Z"}},
        content_type=MERGE,
    )
    s.request(
        "unknown-lease-field-dropped",
        "PATCH",
        leases(s, "crud"),
        {"spec": {"notAField": 1}},
        content_type=MERGE,
    )
    s.request("delete", "DELETE", leases(s, "crud"))
    s.request("get-deleted", "GET", leases(s, "crud"))
    s.request("delete-missing", "DELETE", leases(s, "crud"))
    s.request(
        "generate-name", "POST", leases(s), {**lease(""), "metadata": {"generateName": "gen-"}}
    )


def conflicts(s: Session) -> None:
    _, first = s.request("create", "POST", leases(s), lease("c"))
    s.request("create-again", "POST", leases(s), lease("c"))
    s.request("update", "PUT", leases(s, "c"), {**first, "spec": {"holderIdentity": "b"}})
    s.request("update-stale", "PUT", leases(s, "c"), {**first, "spec": {"holderIdentity": "x"}})
    s.request(
        "patch-stale-rv",
        "PATCH",
        leases(s, "c"),
        {"metadata": {"resourceVersion": rv(first)}, "spec": {"holderIdentity": "y"}},
        content_type=MERGE,
    )
    unconditional = {**first, "metadata": {"name": "c"}, "spec": {"holderIdentity": "z"}}
    s.request("update-unconditional", "PUT", leases(s, "c"), unconditional)
    s.request(
        "update-other-uid",
        "PUT",
        leases(s, "c"),
        {**unconditional, "metadata": {"name": "c", "uid": "0000-not-it"}},
    )
    s.request("update-missing", "PUT", leases(s, "nope"), {**lease("nope")})
    # a PUT of a Lease as read before its deletion: the UID is a precondition, never a create
    _, gone = s.request("create-gone", "POST", leases(s), lease("gone"))
    s.request("delete-gone", "DELETE", leases(s, "gone"))
    s.request("update-deleted", "PUT", leases(s, "gone"), {**gone, "spec": {"holderIdentity": "l"}})
    s.request("patch-missing", "PATCH", leases(s, "nope"), {"spec": {}}, content_type=MERGE)
    s.request(
        "delete-wrong-uid",
        "DELETE",
        leases(s, "c"),
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "0000-not-it"}},
    )
    s.request(
        "delete-wrong-rv",
        "DELETE",
        leases(s, "c"),
        {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"resourceVersion": rv(first)},
        },
    )
    s.request(
        "json-patch-test-fails",
        "PATCH",
        leases(s, "c"),
        [{"op": "test", "path": "/spec/holderIdentity", "value": "nobody"}],
        content_type=JSON_PATCH,
    )


def bad_bodies(s: Session) -> None:
    s.request("not-json", "POST", leases(s), raw_body=b"{not json")
    s.request("not-an-object", "POST", leases(s), ["a", "list"])
    s.request("wrong-kind", "POST", leases(s), {**lease("k"), "kind": "Pod"})
    s.request("wrong-api-version", "POST", leases(s), {**lease("k"), "apiVersion": "v1"})
    s.request(
        "namespace-mismatch",
        "POST",
        leases(s),
        {**lease("k"), "metadata": {"name": "k", "namespace": "elsewhere"}},
    )
    s.request("invalid-name", "POST", leases(s), lease("Not_Valid"))
    s.request("no-name", "POST", leases(s), {**lease(""), "metadata": {}})
    s.request("negative-duration", "POST", leases(s), lease("d", leaseDurationSeconds=-1))
    s.request("negative-transitions", "POST", leases(s), lease("t", leaseTransitions=-1))
    s.request("bad-micro-time", "POST", leases(s), lease("m", renewTime="yesterday"))
    s.request("string-duration", "POST", leases(s), lease("s", leaseDurationSeconds="15"))
    s.request("create", "POST", leases(s), lease("ok"))
    s.request("name-mismatch", "PUT", leases(s, "ok"), lease("other"))
    s.request("bad-patch-body", "PATCH", leases(s, "ok"), raw_body=b"{oops", content_type=MERGE)
    s.request(
        "unsupported-patch-type",
        "PATCH",
        leases(s, "ok"),
        {"spec": {}},
        content_type="application/xml",
    )
    s.request(
        "invalid-label",
        "PATCH",
        leases(s, "ok"),
        {"metadata": {"labels": {"bad key!": "v"}}},
        content_type=MERGE,
    )
    s.request("missing-namespace", "POST", f"{COORD}/namespaces/no-such-ns-x/leases", lease("n"))
    s.request("unknown-resource", "GET", f"{COORD}/namespaces/{s.ns}/leasez")
    s.request("method-not-allowed", "POST", leases(s, "ok"), lease("ok"))


def selectors(s: Session) -> None:
    for name, labels in (
        ("a1", {"app": "a", "tier": "web"}),
        ("a2", {"app": "a", "tier": "db"}),
        ("b1", {"app": "b"}),
        ("n1", {"other": "x"}),
    ):
        s.request(f"create-{name}", "POST", leases(s), lease(name, labels))
    for label, selector in (
        ("equals", "app=a"),
        ("double-equals", "app==b"),
        ("not-equals", "app!=a"),
        ("in", "tier in (web,db)"),
        ("notin", "tier notin (web)"),
        ("exists", "tier"),
        ("not-exists", "!tier"),
        ("and", "app=a,tier=db"),
        ("none", "app=zzz"),
    ):
        s.request(f"label-{label}", "GET", leases(s), query={"labelSelector": selector})
    s.request("label-malformed", "GET", leases(s), query={"labelSelector": "app in (a"})
    s.request("label-bad-value", "GET", leases(s), query={"labelSelector": "app=a b"})
    for label, selector in (
        ("name", "metadata.name=b1"),
        ("not-name", "metadata.name!=b1"),
        ("namespace", f"metadata.namespace={s.ns}"),
        ("both", "metadata.name=a1,metadata.namespace=other"),
    ):
        s.request(f"field-{label}", "GET", leases(s), query={"fieldSelector": selector})
    s.request(
        "field-unsupported", "GET", leases(s), query={"fieldSelector": "spec.holderIdentity=a"}
    )
    s.request("field-malformed", "GET", leases(s), query={"fieldSelector": "metadata.name"})
    s.request(
        "label-and-field",
        "GET",
        leases(s),
        query={"labelSelector": "app=a", "fieldSelector": "metadata.name!=a1"},
    )
    s.request("page-1", "GET", leases(s), query={"limit": "3"})
    s.request("delete-collection", "DELETE", leases(s), query={"labelSelector": "app=a"})
    s.request("after-delete-collection", "GET", leases(s))


def watches(s: Session) -> None:
    _, listed = s.request("list", "GET", leases(s))
    start = rv(listed)
    _, created = s.request("create", "POST", leases(s), lease("w", {"app": "w"}))
    s.request(
        "patch", "PATCH", leases(s, "w"), {"spec": {"holderIdentity": "b"}}, content_type=MERGE
    )
    s.request(
        "relabel",
        "PATCH",
        leases(s, "w"),
        {"metadata": {"labels": {"app": "gone"}}},
        content_type=MERGE,
    )
    s.request("create-other", "POST", leases(s), lease("x", {"app": "w"}))
    s.request("delete", "DELETE", leases(s, "w"))
    s.watch("watch-from-rv", leases(s), {"resourceVersion": start, "timeoutSeconds": "1"})
    s.watch(
        "watch-label",
        leases(s),
        {"resourceVersion": start, "labelSelector": "app=w", "timeoutSeconds": "1"},
    )
    s.watch(
        "watch-field",
        leases(s),
        {"resourceVersion": start, "fieldSelector": "metadata.name=w", "timeoutSeconds": "1"},
    )
    s.watch(
        "watch-from-created", leases(s), {"resourceVersion": rv(created), "timeoutSeconds": "1"}
    )
    s.watch("watch-current-state", leases(s), {"timeoutSeconds": "1"})
    s.watch("watch-bad-rv", leases(s), {"resourceVersion": "abc", "timeoutSeconds": "1"})


def gone(s: Session) -> None:
    """A watch from a resourceVersion older than the server's history: 410 Gone (Expired)."""
    for index in range(25):
        s.request(f"write-{index}", "POST", leases(s), lease(f"g{index}"))
    s.watch("watch-too-old", leases(s), {"resourceVersion": "1", "timeoutSeconds": "1"})


def pagination(s: Session) -> None:
    for index in range(5):
        s.request(f"create-{index}", "POST", leases(s), lease(f"p{index}"))
    _, first = s.request("page-1", "GET", leases(s), query={"limit": "2"})
    token = first["metadata"]["continue"]
    _, second = s.request("page-2", "GET", leases(s), query={"limit": "2", "continue": token})
    s.request(
        "page-3", "GET", leases(s), query={"limit": "2", "continue": second["metadata"]["continue"]}
    )
    s.request("bad-token", "GET", leases(s), query={"limit": "2", "continue": "not-a-token"})
    s.request("limit-zero", "GET", leases(s), query={"limit": "0"})
