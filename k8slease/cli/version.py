"""The installed version of k8slease, as ``k8slease --version`` prints it."""

from __future__ import annotations

from importlib import metadata


def package_version() -> str:
    """The installed distribution's version (from its metadata, i.e. from pyproject.toml)."""
    try:
        return metadata.version("k8slease")
    except metadata.PackageNotFoundError:
        return "unknown (k8slease is not installed; run 'make install')"
