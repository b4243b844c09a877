"""Named files of one directory, as attributes of the object that knows the directory."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, overload


class _HasDirectory(Protocol):
    @property
    def directory(self) -> Path: ...


class InDirectory:
    """A class attribute naming one file of its instance's ``directory``.

    ``ca_cert = InDirectory("ca.crt")`` reads as ``instance.directory / "ca.crt"``: the
    file-layout classes (the control plane's PKI, a node's configuration) state each file once,
    by name, instead of a property per file.
    """

    def __init__(self, filename: str) -> None:
        self.filename = filename

    @overload
    def __get__(self, instance: None, owner: type) -> InDirectory: ...

    @overload
    def __get__(self, instance: _HasDirectory, owner: type) -> Path: ...

    def __get__(self, instance: _HasDirectory | None, owner: type) -> InDirectory | Path:
        if instance is None:
            return self
        return instance.directory / self.filename
