"""Options the operator refuses at start, with one line and exit status 2: ``--peering`` (the
operator runs as one replica: no kopf peering is installed) and an ``--auto-create-group`` that
can name no group (it would be ignored without a word)."""

from __future__ import annotations

import kopf
import pytest

from k8slease.errors import ConfigError
from k8slease.operator import command
from k8slease.operator.handlers import configure_kopf
from k8slease.operator.settings import OperatorConfig, check_auto_create_group


def test_peering_is_refused_and_standalone_still_accepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        command.main(["--peering", "--namespace", "apps"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --peering" in capsys.readouterr().err
    # the chart, the manifests and the image pass --standalone: it stays accepted
    assert command.settings_from_args(["--standalone", "--namespace=apps"]).namespaces == ("apps",)


def test_kopf_always_runs_standalone() -> None:
    """Also under ``kopf run`` without ``--standalone``: no KopfPeering resource exists."""
    settings = kopf.OperatorSettings()
    settings.peering.standalone = False
    configure_kopf(settings, OperatorConfig(all_namespaces=True))
    assert settings.peering.standalone is True


@pytest.mark.parametrize(
    "entry", ["billing", "team-a/billing", "*", "team-a/*", "billing.leader", "a" * 63]
)
def test_auto_create_groups_that_can_name_a_group_are_accepted(entry: str) -> None:
    assert check_auto_create_group(entry, source="--auto-create-group") == entry
    assert command.settings_from_args(["--auto-create-group", entry]).auto_create_groups == (entry,)


@pytest.mark.parametrize(
    "entry", ["Bad Group/x/y", "billing/", "/billing", "*/billing", "Billing", "a" * 64, ""]
)
def test_auto_create_groups_that_name_nothing_are_refused(
    entry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=r"is not GROUP, NAMESPACE/GROUP, '\*' or"):
        OperatorConfig(auto_create_groups=(entry,))
    assert command.main(["--auto-create-group", entry, "--namespace", "apps"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"k8slease operator: --auto-create-group={entry!r} is not GROUP, NAMESPACE/GROUP, '*' or "
        "'NAMESPACE/*' (a namespace is a DNS label; a group a DNS subdomain name of at most 63 "
        "characters, as its ScheduledJobGroup is named after it)\n"
    )
