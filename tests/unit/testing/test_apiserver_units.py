"""Unit tests of the embedded API server's pure parts: selectors, patches, times, schemas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from k8slease.testing.patchformats import json_patch, merge_patch, strategic_merge_patch
from k8slease.testing.selectors import field_selector, label_selector
from k8slease.testing.statusbody import StatusError
from k8slease.testing.tables import human_duration, json_path
from k8slease.testing.validation import (
    SchemaValidator,
    format_micro_time,
    parse_micro_time,
    validate_name,
)


def labelled(**labels: str) -> dict[str, object]:
    return {"metadata": {"name": "n", "namespace": "ns", "labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a in (1, 2),b", {"a": "2", "b": "x"}, True),
        ("a notin (1,2)", {"a": "1"}, False),
        ("!a", {"b": "1"}, True),
        ("a", {}, False),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    accepts = label_selector(selector)
    assert accepts is not None and accepts(labelled(**labels)) is expected


def test_bad_selectors_are_bad_requests() -> None:
    with pytest.raises(StatusError) as info:
        label_selector("a in (x")
    assert info.value.code == 400
    with pytest.raises(StatusError) as info:
        field_selector("spec.x=1", frozenset({"metadata.name"}))
    assert info.value.body()["message"] == "field label not supported: spec.x"
    accepts = field_selector(
        "metadata.namespace=ns,metadata.name!=m", frozenset({"metadata.name", "metadata.namespace"})
    )
    assert accepts is not None and accepts(labelled())


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3]}
    assert merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}, "l": [3]}
    assert target["c"] == {"d": "e", "f": "g"}  # not mutated


def test_json_patch_rfc6902() -> None:
    doc = {"a": {"b": [1, 2]}, "c": 1}
    ops = [
        {"op": "add", "path": "/a/b/1", "value": 9},
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "remove", "path": "/c"},
        {"op": "copy", "from": "/a/b", "path": "/d"},
        {"op": "move", "from": "/d", "path": "/e"},
        {"op": "replace", "path": "/a/b/0", "value": 0},
        {"op": "test", "path": "/e/1", "value": 9},
        {"op": "add", "path": "/x~1y", "value": True},
    ]
    assert json_patch(doc, ops) == {"a": {"b": [0, 9, 2, 3]}, "e": [1, 9, 2, 3], "x/y": True}
    with pytest.raises(StatusError):
        json_patch(doc, [{"op": "test", "path": "/c", "value": 2}])
    with pytest.raises(StatusError):
        json_patch(doc, [{"op": "remove", "path": "/missing"}])


def test_strategic_merge_drops_directives() -> None:
    patch = {
        "$setElementOrder/x": [],
        "spec": {"$retainKeys": ["a"], "a": 1},
        "gone": {"$patch": "delete"},
    }
    assert strategic_merge_patch({"gone": {"k": 1}, "spec": {"b": 2}}, patch) == {
        "spec": {"a": 1, "b": 2}
    }


def test_strategic_merge_merges_finalizers_and_owner_references() -> None:
    target = {"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}]}}
    patch = {
        "metadata": {
            "finalizers": ["b"],
            "ownerReferences": [{"uid": "1", "name": "y"}, {"uid": "2", "name": "z"}],
        }
    }
    merged = strategic_merge_patch(target, patch)
    assert merged["metadata"]["finalizers"] == ["a", "b"]
    assert merged["metadata"]["ownerReferences"] == [
        {"uid": "1", "name": "y"},
        {"uid": "2", "name": "z"},
    ]
    removed = strategic_merge_patch(
        merged, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}
    )
    assert removed["metadata"]["finalizers"] == ["b"]


@given(
    st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(2999, 1, 1), timezones=st.just(UTC)
    )
)
def test_micro_time_round_trips(moment: datetime) -> None:
    text = format_micro_time(moment)
    assert parse_micro_time(text) == moment
    assert format_micro_time(parse_micro_time(text)) == text


def test_micro_time_accepts_offsets_and_rejects_other_spellings() -> None:
    east = parse_micro_time("2026-11-30T07:32:13.123456+02:00")
    assert east == datetime(2026, 11, 30, 5, 32, 13, 123456, tzinfo=UTC)
    for bad in (
        "2026-11-30T05:32:13Z",
        "2026-11-30T05:32:13.123Z",
        "2026-11-30 05:32:13.123456Z",
        "2026-13-30T05:32:13.123456Z",
    ):
        with pytest.raises(ValueError):
            parse_micro_time(bad)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (10 * 3600, "10h"),
        (3 * 86400 + 3600, "3d1h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: int, text: str) -> None:
    assert human_duration(timedelta(seconds=seconds).total_seconds()) == text


def test_json_path() -> None:
    obj = {"status": {"conditions": [{"type": "Ready"}]}, "spec": {"n": 0}}
    assert json_path(obj, ".status.conditions[0].type") == "Ready"
    assert json_path(obj, "{.spec.n}") == 0
    assert json_path(obj, ".missing.x") is None


def test_names() -> None:
    assert validate_name("a-b.c") == []
    assert validate_name("a.b", dns_label=True)[0]["field"] == "metadata.name"
    assert validate_name("")[0]["reason"] == "FieldValueRequired"


def test_schema_prunes_defaults_and_validates() -> None:
    validator = SchemaValidator(
        {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["n"],
                    "properties": {
                        "n": {"type": "integer", "maximum": 3},
                        "mode": {"type": "string", "default": "auto"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        "maybe": {"type": "string", "nullable": True},
                        "port": {"x-kubernetes-int-or-string": True},
                    },
                }
            },
        }
    )
    obj = {
        "metadata": {"name": "x"},
        "spec": {"n": 1, "junk": 1, "free": {"any": 1}, "maybe": None, "port": "http"},
        "top": 1,
    }
    assert validator.apply(obj) == []
    assert obj == {
        "metadata": {"name": "x"},
        "spec": {"n": 1, "free": {"any": 1}, "maybe": None, "port": "http", "mode": "auto"},
    }
    causes = validator.apply({"metadata": {}, "spec": {"n": 4}})
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.n",
            "message": "Invalid value: 4: spec.n in body should be less than or equal to 3",
        }
    ]
