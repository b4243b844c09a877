"""The request sequences the differential test replays on both servers, by name.

Each is a function of a :class:`~tests.realserver.differential.Session` in a fresh namespace
(``s.ns``, the same name on both servers). A sequence may read values from an answer (a
resourceVersion, a uid) to build its next request, so it makes the same requests on both servers;
only what the servers answer is compared. The Lease API's sequences are in
``lease_sequences.py``, the rest of the server's behaviour in ``server_sequences.py``; what
their requests are built from in ``sequence_requests.py``.
"""

from __future__ import annotations

from tests.realserver.differential import Sequence
from tests.support.lease_sequences import (
    bad_bodies,
    conflicts,
    gone,
    lease_crud,
    pagination,
    selectors,
    watches,
)
from tests.support.server_sequences import (
    definitions,
    dry_run,
    field_validation,
    namespaces_and_events,
    status_subresource,
    tables,
)

SEQUENCES: dict[str, Sequence] = {
    "lease_crud": lease_crud,
    "conflicts": conflicts,
    "bad_bodies": bad_bodies,
    "selectors": selectors,
    "watches": watches,
    "gone": gone,
    "tables": tables,
    "status_subresource": status_subresource,
    "dry_run": dry_run,
    "field_validation": field_validation,
    "namespaces_and_events": namespaces_and_events,
    "pagination": pagination,
    "definitions": definitions,
}
