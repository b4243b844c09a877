"""The throw-away wrapper modules the control-plane binaries are built in.

``k8s.io/kubernetes`` requires its staging modules (``k8s.io/api``, ``k8s.io/apiserver``, ...)
at ``v0.0.0`` and replaces them with ``./staging/...`` directories that only exist in its own
repository. A module that builds ``cmd/kube-apiserver`` must map each of them to its published
version; the mapping is generated here from ``k8s.io/kubernetes``'s own go.mod, so a new
Kubernetes release that adds or drops a staging module needs no hand edit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from k8slease.testing.tools import run_tool

from .gotool import BuildError, find_go

WRAPPER_MODULE = "k8slease.invalid/controlplane-build"


def module_gomod(module: str, version: str) -> Path:
    """Download ``module@version``'s go.mod through the module proxy; returns its local path."""
    return _download(module, version, "GoMod", timeout=600)


def module_dir(module: str, version: str) -> Path:
    """Download ``module@version`` through the module proxy; returns its extracted directory."""
    return _download(module, version, "Dir", timeout=1200)


def _download(module: str, version: str, field: str, *, timeout: float) -> Path:
    """``go mod download -json module@version``; the path it gives as ``field``."""
    result = run_tool(
        [find_go(), "mod", "download", "-json", f"{module}@{version}"], timeout=timeout
    )
    try:
        info: dict[str, Any] = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    if result.returncode != 0 or field not in info:
        detail = info.get("Error") or result.stderr.strip() or result.stdout.strip()
        raise BuildError(
            f"cannot download {module}@{version} through the Go module proxy: {detail}"
        )
    return Path(info[field])


def parse_gomod(path: Path) -> dict[str, Any]:
    """A go.mod file as ``go mod edit -json`` describes it (Go's own parser)."""
    result = run_tool(
        [find_go(), "mod", "edit", "-json", str(path)],
        timeout=60,
        failure=BuildError,
        what=f"parsing {path}",
    )
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def staging_replacements(gomod: dict[str, Any], version: str) -> list[tuple[str, str]]:
    """``(module, version)`` for every module the go.mod replaces with a ``./staging/`` path.

    ``gomod`` is ``go mod edit -json`` output; the result is sorted by module path.
    """
    pairs = {
        replace["Old"]["Path"]: version
        for replace in gomod.get("Replace") or []
        if str(replace.get("New", {}).get("Path", "")).startswith("./staging/")
    }
    if not pairs:
        raise BuildError("the k8s.io/kubernetes go.mod has no ./staging/ replacements to map")
    return sorted(pairs.items())


def wrapper_gomod(
    *,
    go_version: str,
    require: tuple[str, str],
    tool: str,
    replacements: Sequence[tuple[str, str]] = (),
    more_tools: Sequence[str] = (),
) -> str:
    """The text of a wrapper module's go.mod that builds the ``tool`` package (and
    ``more_tools``: one module resolves them all, so they share one set of versions)."""
    lines = [f"module {WRAPPER_MODULE}", "", f"go {go_version}", ""]
    lines.append(f"require {require[0]} {require[1]}")
    lines.append("")
    lines += [f"tool {name}" for name in (tool, *more_tools)]
    if replacements:
        lines += ["", "replace ("]
        lines += [f"\t{module} => {module} {version}" for module, version in replacements]
        lines.append(")")
    return "\n".join(lines) + "\n"
