"""ServiceAccounts on the real server: the chart's RBAC objects applied, tokens from the
TokenRequest API, Roles with one verb taken away, and waiting for RBAC to take effect (asked of
the server itself through SubjectAccessReview)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client

from charts import render_manifests as rm
from tests.support.polling import poll
from tests.support.rest import Rest

RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def chart_rbac(namespace: str, values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chart's ServiceAccounts, Roles and bindings rendered for release ``namespace``."""
    objects = rm.render_objects(dict(values), namespace=namespace)
    return [o for o in objects if o["kind"] in RBAC_KINDS]


def create_all(rest: Rest, objects: Iterable[Mapping[str, Any]]) -> None:
    for obj in objects:
        answer = rest.create(obj, fieldValidation="Strict")
        assert answer.status == 201, (obj["kind"], obj["metadata"]["name"], answer.body)


def request_token(admin: Any, namespace: str, service_account: str) -> str:
    """A token for ``namespace/service_account`` from the TokenRequest API (one hour)."""
    core = kubernetes.client.CoreV1Api(admin)
    request = kubernetes.client.AuthenticationV1TokenRequest(
        spec=kubernetes.client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    answer = core.create_namespaced_service_account_token(service_account, namespace, request)
    token: str = answer.status.token
    assert token, "the TokenRequest API returned no token"
    return token


@dataclass
class Accounts:
    """The cluster as the tests' service accounts see it: ``server``, its ``admin`` client (and
    ``rest`` over it), the test ``namespace``; every client made is kept in ``clients`` to be
    closed."""

    server: Any
    admin: Any
    rest: Rest
    namespace: str
    clients: list[Any] = field(default_factory=list, init=False)

    def client_as(self, account: str) -> Any:
        client = self.server.api_client(token=request_token(self.admin, self.namespace, account))
        self.clients.append(client)
        return client

    def rest_as(self, account: str) -> Rest:
        return Rest(self.client_as(account))


@dataclass(frozen=True)
class Access:
    """One (verb, resource) question about an account, for :func:`wait_for_access`."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    subresource: str = ""
    name: str = ""


def allowed(admin: Any, user: str, access: Access) -> bool:
    """What the server's authorizer answers now for ``user`` doing ``access``."""
    review = kubernetes.client.V1SubjectAccessReview(
        spec=kubernetes.client.V1SubjectAccessReviewSpec(
            user=user,
            groups=["system:serviceaccounts", "system:authenticated"],
            resource_attributes=kubernetes.client.V1ResourceAttributes(
                verb=access.verb,
                resource=access.resource,
                group=access.group,
                namespace=access.namespace or None,
                subresource=access.subresource or None,
                name=access.name or None,
            ),
        )
    )
    answer = kubernetes.client.AuthorizationV1Api(admin).create_subject_access_review(review)
    return bool(answer.status.allowed)


def wait_for_access(
    admin: Any, user: str, access: Access, expected: bool, timeout: float = 10.0
) -> None:
    """Until the authorizer's answer for ``access`` is ``expected``: RBAC objects reach the
    authorizer through its informers a moment after they are written. Asks every 50 ms: nothing
    announces that moment (a watch of the RBAC objects sees the write, not the authorizer's
    cache), only asking tells."""
    poll(
        f"{user} {access} allowed={expected}",
        lambda: allowed(admin, user, access) == expected,
        timeout,
    )


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def without(role: Mapping[str, Any], group: str, resource: str, verb: str) -> dict[str, Any]:
    """A copy of ``role`` that grants everything it did except ``verb`` on ``group/resource``."""
    variant = copy.deepcopy(dict(role))
    rules = []
    for rule in variant["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            others = [r for r in rule["resources"] if r != resource]
            if others:
                rules.append({**rule, "resources": others})
            rest = [v for v in rule["verbs"] if v != verb]
            if rest:
                rules.append({**rule, "resources": [resource], "verbs": rest})
        else:
            rules.append(rule)
    variant["rules"] = rules
    return variant


def grants(role: Mapping[str, Any]) -> set[tuple[str, str, str]]:
    """Every (apiGroup, resource, verb) ``role`` grants."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
