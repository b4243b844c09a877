"""Hypothesis strategies for hostile Lease content: anything the API server would store.

A Lease's spec fields are typed by the API server (a string holder, int32 counters, MicroTime
times) but its annotations are any strings, and a test double or a future server may hand us
anything JSON can say, so every field is drawn from three pools: well-formed values, values at
the edges (int32/int64 ceilings, years 1 and 9999 with the widest offsets, leap seconds, control
characters, lone surrogates, a megabyte), and arbitrary JSON of the wrong type.

``FUZZ_SCALE`` (environment ``K8SLEASE_FUZZ_SCALE``, default 1) multiplies the example counts:
``make test`` runs a few thousand per codec, ``make soak`` many more.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from k8slease.names import (
    ANN_CLAIMED_TICK,
    ANN_COMPLETED_TICK,
    ANN_FENCING_TOKEN,
    ANN_LAST_RUN,
    ANN_RUN_COUNTS,
    LABEL_GROUP,
    LABEL_JOB,
    LABEL_ROLE,
)

FUZZ_SCALE = max(1.0, float(os.environ.get("K8SLEASE_FUZZ_SCALE", "1") or "1"))


def fuzz_settings(examples: int) -> settings:
    """Settings for a property over hostile content: ``examples`` times :data:`FUZZ_SCALE`."""
    return settings(
        max_examples=int(examples * FUZZ_SCALE),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


#: Every code point, lone surrogates and controls included (what ``json.loads`` can yield).
any_char = st.characters(codec=None, categories=None)
any_text = st.text(any_char, max_size=40)
edge_ints = st.sampled_from(
    [
        -(2**63) - 1,
        -(2**63),
        -(2**31) - 1,
        -1,
        0,
        1,
        2**31 - 2,
        2**31 - 1,
        2**31,
        2**53 + 1,
        2**63 - 2,
        2**63 - 1,
        2**63,
        2**64,
        10**30,
    ]
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | edge_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text
)
#: A value of the wrong type for a field: cheap to draw (Hypothesis spends its time drawing,
#: not in the codecs), nested one level.
wrong = (
    json_scalars
    | st.lists(json_scalars, max_size=2)
    | st.dictionaries(st.text(max_size=3), json_scalars, max_size=2)
)
#: Arbitrary JSON, nested: what replaces a whole spec, annotation map or record.
any_json = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=6,
)

_OFFSETS = st.sampled_from(["Z", "z", "+00:00", "-00:00", "+23:59", "-23:59", "+14:00", "-12:00"])


def _render(moment: datetime, offset: str, digits: int, pad: bool) -> str:
    year = f"{moment.year:04d}" if pad else str(moment.year)
    frac = "" if digits == 0 else "." + f"{moment.microsecond:06d}".ljust(9, "7")[:digits]
    return f"{year}-{moment:%m-%dT%H:%M:%S}{frac}{offset}"


edge_moments = st.sampled_from(
    [
        datetime(1, 1, 1),
        datetime(1, 1, 1, 23, 59, 59, 999999),
        datetime(1, 1, 2),
        datetime(1, 6, 1),
        datetime(999, 12, 31, 23, 59, 59),
        datetime(1969, 12, 31, 23, 59, 59, 999999),
        datetime(2999, 1, 1),
        datetime(9999, 12, 30, 23, 59, 59, 999999),
        datetime(9999, 12, 31),
        datetime(9999, 12, 31, 23, 59, 59, 999999),
    ]
)
time_texts = st.builds(
    _render,
    st.datetimes() | edge_moments,
    _OFFSETS,
    st.sampled_from([0, 1, 3, 6, 9]),
    st.booleans(),
) | st.sampled_from(
    [
        "9999-12-31T23:59:59.999999-23:59",
        "0001-01-01T00:00:00+23:59",
        "2026-01-01T23:59:60Z",
        "2026-02-30T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:00:00+24:00",
        "soon",
        "",
        " 2026-01-01T00:00:00Z ",
        "2026-01-01T00:00:00",
        "\uff12\uff10\uff12\uff16-01-01T00:00:00Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00.1234567890Z",
    ]
)
times = time_texts | wrong

hostile_strings = any_text | st.sampled_from(
    [
        "",
        "\x00",
        "a\nb",
        "\x1b[31mred\x1b[0m",
        "\u202eevil",
        "\udc80\udcff",
        "x" * 1_000_000,
    ]
)


def _token_texts() -> st.SearchStrategy[Any]:
    digits = st.integers(min_value=0, max_value=2**70).map(str)
    odd = st.sampled_from(["", " 5", "+5", "-1", "1_000", "\u0663", "0x10", "9" * 5000, "1e3"])
    return digits | (edge_ints.map(str)) | odd | wrong


run_records = st.fixed_dictionaries(
    {},
    optional={
        "holder": hostile_strings | wrong,
        "tick": times,
        "started": times,
        "finished": times,
        "outcome": st.sampled_from(["succeeded", "failed", "lost", "ok"]) | wrong,
        "fencingToken": edge_ints | st.integers() | wrong,
        "error": hostile_strings | wrong,
    },
).map(lambda d: json.dumps(d))
count_maps = st.dictionaries(
    st.sampled_from(["succeeded", "failed", "lost"]) | any_text,
    edge_ints | st.integers() | wrong,
    max_size=4,
).map(json.dumps)
json_texts = wrong.map(json.dumps) | st.sampled_from(["[" * 50_000, "{", "nan", "1" * 5000])

annotations = st.fixed_dictionaries(
    {},
    optional={
        ANN_FENCING_TOKEN: _token_texts(),
        ANN_CLAIMED_TICK: times,
        ANN_COMPLETED_TICK: times,
        ANN_LAST_RUN: run_records | json_texts | wrong,
        ANN_RUN_COUNTS: count_maps | json_texts | wrong,
    },
)
spec = st.fixed_dictionaries(
    {},
    optional={
        "holderIdentity": hostile_strings | wrong,
        "leaseDurationSeconds": edge_ints | st.integers(min_value=-5, max_value=100) | wrong,
        "acquireTime": times,
        "renewTime": times,
        "leaseTransitions": edge_ints | st.integers(min_value=0, max_value=100) | wrong,
        "preferredHolder": wrong,
    },
)


def lease_json(
    *, name: str = "demo", role: str = "leader", group: str = "billing", job: str = ""
) -> st.SearchStrategy[dict[str, Any]]:
    """A Lease body as a hostile writer could leave it: the object is always a JSON object with
    ``metadata.name`` (the API server guarantees that much); everything else may be anything."""
    labels = {LABEL_GROUP: group, LABEL_ROLE: role}
    if job:
        labels[LABEL_JOB] = job
    metadata = st.fixed_dictionaries(
        {
            "name": st.just(name),
            "resourceVersion": st.integers(min_value=1, max_value=10**6).map(str),
            "labels": st.just(labels)
            | st.dictionaries(any_text, wrong, max_size=3).map(lambda d: {**d, **labels}),
        },
        optional={"annotations": annotations | any_json, "uid": wrong},
    )
    return st.fixed_dictionaries(
        {"metadata": metadata},
        optional={"spec": spec | any_json, "apiVersion": any_json, "kind": any_json},
    )


def aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC)


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)
