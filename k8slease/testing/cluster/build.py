"""Building the node's binaries from upstream Go modules (and one C file), once per machine.

:func:`ensure_node_binaries` returns the cached binaries, building them first when missing:

- the Kubernetes node commands in ONE wrapper module with several ``tool`` lines (the control
  plane's recipe, :mod:`k8slease.testing.controlplane.gomod`), under the control plane's build
  lock, so that a concurrent control-plane build finishes first and this one reuses its
  compiled packages instead of compiling them a second time at the same moment;
- containerd v2, CoreDNS and helm, each in its own wrapper module (static, ``CGO_ENABLED=0``);
- the pause binary, ``build/pause/linux/pause.c`` of the Kubernetes module, ``cc -static``.

The result is ``~/.cache/k8slease/cluster/<versions>/`` (complete or absent: built in a
temporary sibling renamed into place, under its own lock).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from k8slease.testing.controlplane import versions as cpv
from k8slease.testing.controlplane.build import (
    RELEASE_FLAGS,
    STRIP,
    build_staged,
    version_ldflags,
)
from k8slease.testing.controlplane.cache import build_lock as controlplane_lock
from k8slease.testing.controlplane.gomod import (
    module_dir,
    module_gomod,
    parse_gomod,
    staging_replacements,
    wrapper_gomod,
)
from k8slease.testing.controlplane.gotool import BuildError, find_go, run_go, tail

from . import versions as v
from .paths import cluster_cache_root, file_lock

Progress = Callable[[str], None]

COREDNS = "coredns"
HELM = "helm"
PAUSE = "pause"
ALL = (*v.KUBE_COMMANDS, *v.CONTAINERD_COMMANDS, COREDNS, HELM, PAUSE)


def stderr_progress(line: str) -> None:
    """The default progress sink: one flushed line on stderr."""
    print(f"k8slease cluster: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class NodeBinaries:
    """The directory of one cached build of every node binary."""

    directory: Path

    def __getitem__(self, name: str) -> Path:
        if name not in ALL:
            raise KeyError(f"no node binary named {name!r} (known: {', '.join(ALL)})")
        return self.directory / name

    def complete(self) -> bool:
        """Whether every executable is present."""
        return all(os.access(self.directory / name, os.X_OK) for name in ALL)


def cached_node_binaries() -> NodeBinaries | None:
    """The cached binaries of the pinned versions, or None."""
    binaries = NodeBinaries(cluster_cache_root() / v.cache_key())
    return binaries if binaries.complete() else None


def ensure_node_binaries(progress: Progress = stderr_progress) -> NodeBinaries:
    """Every node binary, built into the user cache if missing (``BuildError`` if it cannot)."""
    found = cached_node_binaries()
    if found is not None:
        return found
    find_go()
    key = v.cache_key()
    with file_lock(key, lambda: progress("another process is building; waiting for it")):
        found = cached_node_binaries()
        if found is not None:
            return found
        return _build(key, progress)


def _build(key: str, progress: Progress) -> NodeBinaries:
    def steps(work: Path, staging: Path, log: Path, started: float) -> None:
        builder = _Builder(work, staging, log, progress, started)
        builder.small_modules(builder.node_modules)
        builder.pause()
        with controlplane_lock(
            cpv.cache_key(),
            lambda: progress("waiting for the control-plane build to finish (shared cache)"),
        ):
            builder.kubernetes()
        builder.small_modules(builder.client_modules)

    return build_staged(
        cluster_cache_root(),
        key,
        what=f"the node binaries ({', '.join(ALL)})",
        work_prefix="k8slease-nodebuild-",
        steps=steps,
        versions=v.pins(),
        found=cached_node_binaries,
        progress=progress,
    )


class _Builder:
    def __init__(
        self, work: Path, out: Path, log: Path, progress: Progress, started: float
    ) -> None:
        self.work, self.out, self.log = work, out, log
        self.progress, self.started = progress, started

    def _go(self, directory: Path, what: str, args: Sequence[str], **env: str) -> None:
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            run_go(
                list(args),
                cwd=directory,
                log=self.log,
                what=what,
                progress=self.progress,
                started=self.started,
            )
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def _module(self, name: str, module: str, version: str, tools: Sequence[str]) -> Path:
        gomod = parse_gomod(module_gomod(module, version))
        directory = self.work / name
        directory.mkdir(parents=True)
        (directory / "go.mod").write_text(
            wrapper_gomod(
                go_version=gomod["Go"],
                require=(module, version),
                tool=tools[0],
                more_tools=tools[1:],
            )
        )
        return directory

    #: (name, module, version, packages, output file or None for a directory)
    node_modules = (
        (
            "containerd",
            v.CONTAINERD_MODULE,
            v.CONTAINERD_VERSION,
            tuple(f"{v.CONTAINERD_MODULE}/cmd/{name}" for name in v.CONTAINERD_COMMANDS),
            None,
        ),
        (COREDNS, v.COREDNS_MODULE, v.COREDNS_VERSION, (v.COREDNS_MODULE,), COREDNS),
    )
    client_modules = ((HELM, v.HELM_MODULE, v.HELM_VERSION, (f"{v.HELM_MODULE}/cmd/helm",), HELM),)

    def small_modules(
        self, modules: Sequence[tuple[str, str, str, tuple[str, ...], str | None]]
    ) -> None:
        """Static Go binaries (``CGO_ENABLED=0``), each from its own wrapper module."""
        for name, module, version, tools, outputs in modules:
            what = f"{name} {version}"
            directory = self._module(name, module, version, tools)
            self._go(directory, what, ["mod", "tidy"])
            target = str(self.out / outputs) if outputs else str(self.out) + "/"
            args = ["build", "-v", *RELEASE_FLAGS, "-ldflags", STRIP, "-o", target]
            if name == "containerd":
                args += ["-tags", v.CONTAINERD_TAGS]
            self._go(directory, what, [*args, *tools], CGO_ENABLED="0")

    def kubernetes(self) -> None:
        """kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl: one module."""
        what = f"kubernetes node {cpv.KUBERNETES_VERSION}"
        gomod = parse_gomod(module_gomod(cpv.KUBERNETES_MODULE, cpv.KUBERNETES_VERSION))
        packages = [f"{cpv.KUBERNETES_MODULE}/cmd/{name}" for name in v.KUBE_COMMANDS]
        directory = self.work / "kubernetes"
        directory.mkdir(parents=True)
        (directory / "go.mod").write_text(
            wrapper_gomod(
                go_version=gomod["Go"],
                require=(cpv.KUBERNETES_MODULE, cpv.KUBERNETES_VERSION),
                tool=packages[0],
                more_tools=packages[1:],
                replacements=staging_replacements(gomod, cpv.staging_version()),
            )
        )
        self._go(directory, what, ["mod", "tidy"])
        build = ["build", "-v", *RELEASE_FLAGS, "-ldflags", version_ldflags()]
        self._go(directory, what, [*build, "-o", f"{self.out}/", *packages])

    def pause(self) -> None:
        """The sandbox's pause process from the Kubernetes module's C source, linked statically."""
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise BuildError("no C compiler (cc): the pause binary is compiled from pause.c")
        source = module_dir(cpv.KUBERNETES_MODULE, cpv.KUBERNETES_VERSION) / (
            "build/pause/linux/pause.c"
        )
        self.progress(f"[{time.monotonic() - self.started:6.0f}s] pause: cc -static {source}")
        result = subprocess.run(
            [
                cc,
                "-Os",
                "-static",
                "-Wall",
                f"-DVERSION={v.PAUSE_IMAGE.rpartition(':')[2]}",
                "-o",
                str(self.out / PAUSE),
                str(source),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        with self.log.open("a") as sink:
            sink.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise BuildError(f"compiling pause.c failed; log: {self.log}\n{tail(self.log)}")
