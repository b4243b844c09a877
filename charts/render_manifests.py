"""Render the k8slease chart offline, and write or check the plain manifests in ``manifests/``.

    python charts/render_manifests.py --write manifests/   # what `make manifests` runs
    python charts/render_manifests.py --check manifests/   # exit 1 when manifests/ drifted

No helm binary and no cluster: rendering goes through ``helm-python-sdk``, which embeds Helm's Go
SDK (v4) as a shared library inside its wheel. Its ``Chart.render`` has no Kubernetes-version
option, but the library's ``helm_render`` call takes ``kube_version`` and ``api_versions`` (it
fills ``.Capabilities`` from them), so :func:`render_templates` calls it with those options.

The tests import this file (see ``load_module`` in them) for the same rendering, YAML parsing and
validation helpers, so the chart is rendered one way everywhere.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CHARTS_DIR = Path(__file__).resolve().parent
CHART_DIR = CHARTS_DIR / "k8slease"
REPO_ROOT = CHARTS_DIR.parent
MANIFESTS_DIR = REPO_ROOT / "manifests"
MANIFEST_VALUES_FILE = CHARTS_DIR / "manifests-values.yaml"

#: The release the plain manifests are rendered as.
RELEASE_NAME = "k8slease"
NAMESPACE = "k8slease"

#: Kubernetes versions the chart is rendered and validated for (Chart.yaml: kubeVersion >=1.27).
KUBE_VERSIONS: tuple[str, ...] = ("1.27", "1.30", "1.33", "1.36")

HEADER = (
    "# Generated from charts/k8slease by charts/render_manifests.py; do not edit.\n"
    "# Change the chart (or charts/manifests-values.yaml) and run `make manifests`.\n"
)

#: manifests/ file for each app.kubernetes.io/component; kubectl applies a folder in name order.
COMPONENT_FILES: dict[str, str] = {
    "operator": "02-operator.yaml",
    "elector": "03-elector-rbac.yaml",
    "example-app": "04-example-app.yaml",
    "admission": "05-admission-policy.yaml",
}
NAMESPACE_FILE = "00-namespace.yaml"
CRDS_FILE = "01-crds.yaml"

#: Helm's install order for the kinds the chart renders; other kinds (custom resources) go last.
KIND_ORDER = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
)


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping in rendered YAML has the same key twice (PyYAML would keep the last silently)."""


class StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate mapping keys, which the API server would refuse."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKeyError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_documents(text: str) -> list[dict[str, Any]]:
    """Parse a multi-document YAML stream into its non-empty documents."""
    documents = []
    for document in yaml.load_all(text, Loader=StrictLoader):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ValueError(f"a YAML document is not a mapping: {document!r}")
        documents.append(document)
    return documents


def dump_documents(objects: Iterable[Mapping[str, Any]]) -> str:
    """Serialise objects as a YAML stream, keys in their template order."""
    parts = [
        yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False, width=4096)
        for obj in objects
    ]
    return "---\n".join(parts)


def _values_key(values: Mapping[str, Any] | None) -> str:
    return json.dumps(values or {}, sort_keys=True)


@cache
def _chart() -> Any:
    import helm_python

    return helm_python.Chart.load(str(CHART_DIR))


def kube_version_string(kube_version: str) -> str:
    """``1.30`` or ``v1.30`` -> ``v1.30.0``, the form Helm's capabilities take."""
    version = kube_version.removeprefix("v")
    if version.count(".") == 1:
        version += ".0"
    return f"v{version}"


@cache
def _render_cached(
    values_key: str, kube_version: str | None, namespace: str, release: str
) -> dict[str, str]:
    from helm_python import _native

    options: dict[str, Any] = {"name": release, "namespace": namespace, "is_install": True}
    if kube_version is not None:
        options["kube_version"] = kube_version_string(kube_version)
    values = json.loads(values_key)
    rendered = _native.call_string(
        "helm_render",
        _chart()._raw(),
        json.dumps(values) if values else None,
        json.dumps(options),
    )
    templates: dict[str, str] = json.loads(rendered)
    return templates


def render_templates(
    values: Mapping[str, Any] | None = None,
    *,
    kube_version: str | None = None,
    namespace: str = NAMESPACE,
    release: str = RELEASE_NAME,
) -> dict[str, str]:
    """Render the chart's templates offline: template path -> rendered text (NOTES.txt included).

    ``kube_version`` (``"1.30"``) sets ``.Capabilities.KubeVersion`` and is checked against the
    chart's ``kubeVersion`` constraint. Renders are cached per arguments.

    Raises ``helm_python.HelmValuesError`` when the values break values.schema.json and
    ``helm_python.HelmRenderError`` when a template fails.
    """
    return dict(_render_cached(_values_key(values), kube_version, namespace, release))


def render_objects(
    values: Mapping[str, Any] | None = None,
    *,
    kube_version: str | None = None,
    namespace: str = NAMESPACE,
    release: str = RELEASE_NAME,
) -> list[dict[str, Any]]:
    """The Kubernetes objects the chart's templates render to (CRDs not included)."""
    templates = render_templates(
        values, kube_version=kube_version, namespace=namespace, release=release
    )
    objects: list[dict[str, Any]] = []
    for path in sorted(templates):
        if path.endswith("NOTES.txt"):
            continue
        try:
            objects.extend(load_documents(templates[path]))
        except yaml.YAMLError as error:
            raise ValueError(f"{path} does not render to valid YAML: {error}") from error
    return copy.deepcopy(objects)


def render_notes(values: Mapping[str, Any] | None = None, **kwargs: Any) -> str:
    """The rendered NOTES.txt."""
    templates = render_templates(values, **kwargs)
    return next(text for path, text in templates.items() if path.endswith("/NOTES.txt"))


def crd_objects() -> list[dict[str, Any]]:
    """The CRDs the chart installs from its ``crds/`` folder (Helm does not template them)."""
    objects: list[dict[str, Any]] = []
    for crd in sorted(_chart().crds, key=lambda item: item["filename"]):
        objects.extend(load_documents(crd["data"]))
    return objects


def lint(values: Mapping[str, Any] | None = None, *, kube_version: str | None = None) -> Any:
    """``helm lint --strict`` of the chart: ``{"messages": [...], "errors": [...]}``."""
    import helm_python

    return helm_python.lint(
        str(CHART_DIR),
        dict(values) if values is not None else None,
        strict=True,
        namespace=NAMESPACE,
        kube_version=kube_version_string(kube_version) if kube_version else None,
    )


def validate_against_kubernetes(obj: Mapping[str, Any], kube_version: str) -> str | None:
    """Check a built-in object against that Kubernetes version's OpenAPI schema, offline.

    Uses kubernetes-validate in strict mode (unknown fields are errors, as with
    ``kubectl apply --validate=strict``). Returns the error, or None when the object is valid.
    Raises ``kubernetes_validate.utils.SchemaNotFoundError`` for kinds it has no schema for.
    """
    import kubernetes_validate
    from kubernetes_validate.utils import ValidationError

    try:
        kubernetes_validate.validate(dict(obj), kube_version, strict=True)
    except ValidationError as error:
        path = ".".join(str(part) for part in error.path)
        return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}: {path}: {error.message}"
    return None


def _structural(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD's structural schema as JSON Schema that, like the API server's strict field
    validation, rejects fields the schema does not declare."""
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            result[key] = {name: _structural(sub) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            result[key] = _structural(value)
        else:
            result[key] = value
    if (
        "properties" in result
        and not result.get("x-kubernetes-preserve-unknown-fields")
        and "additionalProperties" not in result
    ):
        result["additionalProperties"] = False
    return result


def crd_validator(kind: str = "ScheduledJobGroup", version: str = "v1alpha1") -> Any:
    """A jsonschema validator for custom resources of ``kind`` at ``version``, from the CRD."""
    import jsonschema

    for crd in crd_objects():
        if crd["spec"]["names"]["kind"] != kind:
            continue
        for served in crd["spec"]["versions"]:
            if served["name"] == version:
                schema = _structural(served["schema"]["openAPIV3Schema"])
                return jsonschema.Draft7Validator(
                    schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
                )
    raise LookupError(f"the chart has no CRD serving {kind} {version}")


def manifest_values() -> dict[str, Any]:
    """The values ``manifests/`` is rendered with."""
    values: dict[str, Any] = yaml.safe_load(MANIFEST_VALUES_FILE.read_text()) or {}
    return values


def _kind_rank(obj: Mapping[str, Any]) -> int:
    kind = obj.get("kind")
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def namespace_object() -> dict[str, Any]:
    """The Namespace of the plain manifests (Helm creates it with --create-namespace instead).

    It enforces the "restricted" Pod Security Standard: the operator and the example app pass it.
    """
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NAMESPACE,
            "labels": {
                "app.kubernetes.io/part-of": "k8slease",
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
            },
        },
    }


def manifest_files(values: Mapping[str, Any] | None = None) -> dict[str, str]:
    """What ``manifests/`` must contain: file name -> text."""
    objects = [
        obj
        for obj in render_objects(manifest_values() if values is None else values)
        # Hooks (the `helm test` Pod and its account) are Helm's: kubectl apply has none.
        if "helm.sh/hook" not in (obj.get("metadata", {}).get("annotations") or {})
    ]
    grouped: dict[str, list[dict[str, Any]]] = {name: [] for name in COMPONENT_FILES.values()}
    for obj in objects:
        component = obj.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component")
        if component not in COMPONENT_FILES:
            name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
            raise ValueError(f"{name} has no known app.kubernetes.io/component: {component!r}")
        grouped[COMPONENT_FILES[component]].append(obj)
    files = {
        NAMESPACE_FILE: HEADER + dump_documents([namespace_object()]),
        CRDS_FILE: HEADER + dump_documents(crd_objects()),
    }
    for name, members in grouped.items():
        if members:
            files[name] = HEADER + dump_documents(sorted(members, key=_kind_rank))
    return files


def _generated(directory: Path) -> set[str]:
    """The YAML files in ``directory`` that this script wrote (they start with HEADER)."""
    return {
        path.name
        for path in directory.glob("*.yaml")
        if path.read_text().startswith(HEADER.splitlines()[0])
    }


def write(directory: Path) -> list[str]:
    """Write the manifests into ``directory``, removing generated files no longer rendered."""
    directory.mkdir(parents=True, exist_ok=True)
    files = manifest_files()
    for stale in sorted(_generated(directory) - set(files)):
        (directory / stale).unlink()
    for name, text in files.items():
        (directory / name).write_text(text)
    return sorted(files)


def drift(directory: Path) -> list[str]:
    """Differences between ``directory`` and a fresh render, as unified diffs; empty when none."""
    problems: list[str] = []
    files = manifest_files()
    for stale in sorted(_generated(directory) - set(files)):
        problems.append(f"{directory / stale}: generated file the chart no longer renders")
    for name, expected in files.items():
        path = directory / name
        actual = path.read_text() if path.exists() else ""
        if actual != expected:
            diff = difflib.unified_diff(
                actual.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                fromfile=f"{path} (committed)",
                tofile=f"{path} (rendered from the chart)",
            )
            problems.append("".join(diff) or f"{path}: missing")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="DIR", type=Path, help="write the manifests to DIR")
    action.add_argument("--check", metavar="DIR", type=Path, help="fail when DIR has drifted")
    args = parser.parse_args(argv)
    if args.write is not None:
        for name in write(args.write):
            print(f"wrote {args.write / name}")
        return 0
    problems = drift(args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("manifests/ drifted from the chart: run `make manifests`", file=sys.stderr)
        return 1
    print(f"{args.check} matches the chart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
