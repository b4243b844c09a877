"""The node cluster's DNS check and the CoreDNS it builds (issue: the cold CI path)."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from k8slease.testing.cluster import config as c
from k8slease.testing.cluster.build import coredns_main
from k8slease.testing.cluster.dns import a_query, a_records


def _reply(query: bytes, *answers: tuple[int, bytes], rcode: int = 0) -> bytes:
    """A reply to ``query`` (its question copied) with ``answers`` as (type, rdata), each named
    by a compression pointer to the question's name."""
    ident = query[:2]
    header = ident + struct.pack(">HHHHH", 0x8180 | rcode, 1, len(answers), 0, 0)
    records = b"".join(
        b"\xc0\x0c" + struct.pack(">HHIH", kind, 1, 5, len(data)) + data for kind, data in answers
    )
    return header + query[12:] + records


def test_a_query_asks_one_question_for_the_names_a_records() -> None:
    query = a_query("kubernetes.default.svc.cluster.local")
    assert struct.unpack(">HHHHHH", query[:12])[1:] == (0x0100, 1, 0, 0, 0)
    assert query[12:] == (
        b"\x0akubernetes\x07default\x03svc\x07cluster\x05local\x00" + struct.pack(">HH", 1, 1)
    )


@pytest.mark.parametrize("name", ["", ".", "a" * 64 + ".local"])
def test_a_query_refuses_what_is_not_a_dns_name(name: str) -> None:
    with pytest.raises(ValueError, match="not a DNS name"):
        a_query(name)


def test_a_records_reads_the_addresses_past_other_records() -> None:
    query = a_query("kubernetes.default.svc.cluster.local")
    cname = b"\x03foo\x00"
    reply = _reply(query, (5, cname), (1, bytes([10, 215, 0, 1])), (1, bytes([10, 215, 0, 2])))
    assert a_records(reply) == ["10.215.0.1", "10.215.0.2"]
    assert a_records(_reply(query)) == []


def test_a_records_refuses_errors_and_truncated_replies() -> None:
    query = a_query("x.local")
    with pytest.raises(ValueError, match="rcode 2"):
        a_records(_reply(query, rcode=2))  # SERVFAIL: CoreDNS not synced with the API yet
    with pytest.raises(ValueError, match="not an answer"):
        a_records(query)  # a question, not a reply
    with pytest.raises(ValueError, match="truncated"):
        a_records(_reply(query, (1, bytes([10, 0, 0, 1])))[:-2])
    with pytest.raises(ValueError, match="header"):
        a_records(b"\x00")


def test_the_built_coredns_has_every_plugin_the_corefile_uses() -> None:
    corefile = c.corefile(kubeconfig=Path("/k"))
    # the server block's directives: the first word of each line one level in
    used = re.findall(r"^ {4}(\w+)", corefile, flags=re.MULTILINE)
    assert used and set(used) <= set(c.COREDNS_PLUGINS), (used, c.COREDNS_PLUGINS)
    main = coredns_main(c.COREDNS_PLUGINS)
    for name in c.COREDNS_PLUGINS:
        assert f'_ "github.com/coredns/coredns/plugin/{name}"' in main
        assert f'\t"{name}",' in main
    assert "dnsserver.Directives = directives" in main and "coremain.Run()" in main
