"""The Helm chart lints and renders offline for every supported Kubernetes version, and every
rendered object is valid against that version's schemas (kubernetes-validate, strict)."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from charts import render_manifests as rm

#: Value sets that switch on every template branch.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "manifests": rm.manifest_values(),
    "cluster-wide": {"operator": {"clusterWide": True}, "exampleApp": {"enabled": True}},
    "multi-namespace": {
        "operator": {"watchNamespaces": ["team-a", "team-b"], "logLevel": "debug"},
        "elector": {
            "bindings": [
                {"serviceAccount": "billing"},
                {"serviceAccount": "reports", "namespace": "team-a"},
                {"serviceAccount": "ledger", "namespace": "team-a"},
            ]
        },
    },
    "everything-set": {
        "fullnameOverride": "jobs",
        "commonLabels": {"team": "payments"},
        "image": {"repository": "registry.example/k8slease", "digest": "sha256:" + "a" * 64},
        "imagePullSecrets": [{"name": "regcred"}],
        "operator": {
            "extraArgs": ["--log-format=json"],
            "env": [{"name": "TZ", "value": "UTC"}],
            "podAnnotations": {"a": "b"},
            "podLabels": {"c": "d"},
            "priorityClassName": "system-cluster-critical",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {}},
            "serviceAccount": {"annotations": {"iam": "role"}},
        },
        "exampleApp": {
            "enabled": True,
            "args": ["--interval", "5"],
            "env": [{"name": "EXTRA", "value": "1"}],
            "livenessProbe": {"exec": {"command": ["true"]}},
            "readinessProbe": {"exec": {"command": ["true"]}},
            "podAnnotations": {"a": "b"},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"podAntiAffinity": {}},
            "serviceAccount": {"create": False, "name": "existing-sa"},
            "scheduledJobGroup": {"create": False},
        },
    },
}


@pytest.mark.parametrize("kube_version", rm.KUBE_VERSIONS)
@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_chart_lints_clean(values_name: str, kube_version: str) -> None:
    report = rm.lint(VALUE_SETS[values_name], kube_version=kube_version)
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [] and serious == [], report


@pytest.mark.parametrize("kube_version", rm.KUBE_VERSIONS)
@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_rendered_objects_match_kubernetes_schemas(values_name: str, kube_version: str) -> None:
    objects = rm.render_objects(VALUE_SETS[values_name], kube_version=kube_version)
    assert objects, "the chart rendered nothing"
    builtin = [obj for obj in objects if obj["kind"] != "ScheduledJobGroup"]
    errors = [rm.validate_against_kubernetes(obj, kube_version) for obj in builtin]
    assert [e for e in errors if e] == []
    validator = rm.crd_validator()
    for obj in objects:
        if obj["kind"] == "ScheduledJobGroup":
            assert [e.message for e in validator.iter_errors(obj)] == []


@pytest.mark.parametrize("kube_version", rm.KUBE_VERSIONS)
def test_crd_matches_the_kubernetes_schema(kube_version: str) -> None:
    (crd,) = rm.crd_objects()
    assert rm.validate_against_kubernetes(crd, kube_version) is None


def test_strict_validation_is_not_vacuous() -> None:
    """A typo in a rendered Deployment must be caught, or the schema test above proves nothing."""
    deployment = next(o for o in rm.render_objects() if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    error = rm.validate_against_kubernetes(deployment, "1.30")
    assert error is not None and "imagePullPolicyy" in error


def test_render_refuses_kubernetes_older_than_chart_kube_version() -> None:
    with pytest.raises(helm_python.HelmRenderError, match=r"needs Kubernetes >=1\.27"):
        rm.render_objects(kube_version="1.26")


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"operator": {"replicas": 2}}, "/operator/replicas"),
        ({"operatr": {}}, "operatr"),
        ({"operator": {"clusterWide": "yes"}}, "/operator/clusterWide"),
        ({"operator": {"health": {"port": 80, "path": "/healthz"}}}, "/operator/health/port"),
        ({"elector": {"bindings": [{"namespace": "x"}]}}, "/elector/bindings/0"),
        ({"elector": {"bindings": [{"serviceAccount": "Bad_Name"}]}}, "serviceAccount"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"containerSecurityContext": {"readOnlyRootFilesystem": False}}, "readOnlyRoot"),
        ({"containerSecurityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}, "capabilities"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, "/podSecurityContext/runAsNonRoot"),
    ],
)
def test_values_schema_rejects_bad_values(values: dict[str, Any], where: str) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=where):
        rm.render_objects(values)


def test_cluster_wide_and_watch_namespaces_conflict() -> None:
    values = {"operator": {"clusterWide": True, "watchNamespaces": ["a"]}}
    with pytest.raises(helm_python.HelmRenderError, match="watchNamespaces"):
        rm.render_objects(values)


def test_rendered_yaml_has_no_duplicate_keys() -> None:
    with pytest.raises(rm.DuplicateKeyError):
        rm.load_documents("metadata:\n  labels:\n    a: '1'\n    a: '2'\n")
    # render_objects parses with the same loader, so every value set above is already checked.
    assert rm.render_objects(VALUE_SETS["everything-set"])


@pytest.mark.parametrize("values_name", sorted(VALUE_SETS))
def test_every_object_has_the_standard_labels(values_name: str) -> None:
    for obj in rm.render_objects(VALUE_SETS[values_name]):
        labels = obj["metadata"]["labels"]
        for key in ("name", "instance", "version", "component", "part-of", "managed-by"):
            assert f"app.kubernetes.io/{key}" in labels, (obj["kind"], key)
        assert labels["helm.sh/chart"] == "k8slease-0.1.0"
        if obj["kind"] == "Deployment":
            selector = obj["spec"]["selector"]["matchLabels"]
            pod_labels = obj["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= pod_labels.items()


def test_managed_by_defaults_to_helm_and_can_be_overridden() -> None:
    default = rm.render_objects()
    assert {o["metadata"]["labels"]["app.kubernetes.io/managed-by"] for o in default} == {"Helm"}
    manifests = rm.render_objects(rm.manifest_values())
    managed = {o["metadata"]["labels"]["app.kubernetes.io/managed-by"] for o in manifests}
    assert managed == {"kubectl"}


def test_namespaced_objects_carry_the_release_namespace() -> None:
    for obj in rm.render_objects(VALUE_SETS["manifests"], namespace="jobs"):
        if obj["apiVersion"].startswith("admissionregistration.k8s.io/"):
            assert "namespace" not in obj["metadata"], "admission policies are cluster-scoped"
            continue
        assert obj["metadata"].get("namespace") == "jobs", obj["kind"]


def _deployment(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    (deployment,) = [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    return deployment


@pytest.mark.parametrize("component", ["operator", "example-app"])
def test_pods_are_hardened(component: str) -> None:
    pod = _deployment(rm.render_objects(rm.manifest_values()), component)["spec"]["template"]
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] > 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"]["cpu"]
        assert container["resources"]["requests"]["memory"]
        assert container["resources"]["limits"]["memory"]
        # A read-only root needs somewhere writable for temporary files.
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_operator_deployment_runs_the_operator_with_probes_on_its_health_endpoint() -> None:
    deployment = _deployment(rm.render_objects(), "operator")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "k8slease", "operator"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in container["args"]
    assert "--namespace=k8slease" in container["args"]
    assert "--all-namespaces" not in container["args"]
    assert container["ports"] == [{"name": "health", "containerPort": 8080, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["image"] == "k8slease:0.1.0"


def test_operator_arguments_follow_the_scope_values() -> None:
    values = VALUE_SETS["multi-namespace"]
    (container,) = _deployment(rm.render_objects(values), "operator")["spec"]["template"]["spec"][
        "containers"
    ]
    assert "--namespace=team-a" in container["args"] and "--namespace=team-b" in container["args"]
    assert "--namespace=k8slease" not in container["args"]
    assert "--verbose" in container["args"]
    wide = _deployment(rm.render_objects({"operator": {"clusterWide": True}}), "operator")
    args = wide["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" in args and not any(a.startswith("--namespace") for a in args)


def test_image_digest_wins_over_tag() -> None:
    deployment = _deployment(rm.render_objects(VALUE_SETS["everything-set"]), "operator")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example/k8slease@sha256:" + "a" * 64


def test_example_app_is_off_by_default() -> None:
    components = {
        o["metadata"]["labels"]["app.kubernetes.io/component"] for o in rm.render_objects()
    }
    assert components == {"operator", "elector", "admission"}


def test_example_app_runs_three_replicas_with_downward_api_identity() -> None:
    objects = rm.render_objects({"exampleApp": {"enabled": True}})
    deployment = _deployment(objects, "example-app")
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "billing-app"
    assert 5 <= pod["terminationGracePeriodSeconds"] <= 120
    (container,) = pod["containers"]
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["K8SLEASE_GROUP"]["value"] == "billing"
    assert container["command"] == ["python", "-m", "k8slease.cli.demoapp.billing_app"]
    (group,) = [o for o in objects if o["kind"] == "ScheduledJobGroup"]
    assert group["metadata"]["name"] == "billing" and group["spec"]["leaseName"] == "billing"


def test_notes_tell_the_user_to_get_scheduledjobgroups() -> None:
    assert "kubectl get scheduledjobgroups -n k8slease" in rm.render_notes()
    wide = rm.render_notes({"operator": {"clusterWide": True}})
    assert "kubectl get scheduledjobgroups --all-namespaces" in wide
    example = rm.render_notes({"exampleApp": {"enabled": True}})
    assert "kubectl -n k8slease get scheduledjobgroup billing" in example


def test_notes_ask_for_bindings_only_when_none_are_set() -> None:
    empty = rm.render_notes()
    assert "by listing their ServiceAccount in the chart values" in empty
    bound = rm.render_notes(
        {
            "elector": {
                "bindings": [
                    {"serviceAccount": "billing-app"},
                    {"serviceAccount": "reports", "namespace": "reporting"},
                ]
            }
        }
    )
    assert "by listing their ServiceAccount" not in bound
    assert "bound to\nthese ServiceAccounts: k8slease/billing-app, reporting/reports." in bound
    assert "does not create the Role" not in bound
    example = rm.render_notes({"exampleApp": {"enabled": True}, "elector": {"createRole": False}})
    assert "k8slease/billing-app" in example and "by listing their ServiceAccount" not in example
    assert "does not create the Role itself (elector.createRole=false)" in example
