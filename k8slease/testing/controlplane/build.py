"""Building ``kube-apiserver`` and ``etcd`` from their upstream Go modules, once per machine.

:func:`ensure_binaries` returns the cached binaries, building them first when they are missing:
each in its own throw-away wrapper module (see :mod:`.gomod`), with ``go mod tidy`` then
``go build``. A cold build (empty module and build caches) takes many minutes on two cores;
progress lines go to ``progress`` (stderr by default) with the elapsed time.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from . import versions as v
from .cache import ETCD, KUBE_APISERVER, Binaries, build_lock, cache_root, cached
from .gomod import module_gomod, parse_gomod, staging_replacements, wrapper_gomod
from .gotool import BuildError, find_go, run_go

Progress = Callable[[str], None]
T = TypeVar("T")


def stderr_progress(line: str) -> None:
    """The default progress sink: one flushed line on stderr."""
    print(f"k8slease controlplane: {line}", file=sys.stderr, flush=True)


def ensure_binaries(progress: Progress = stderr_progress) -> Binaries:
    """The pinned ``kube-apiserver`` and ``etcd``, built into the user cache if missing.

    Raises :class:`~.gotool.BuildError` (Go missing, proxy unreachable, compile failure with
    the log's last lines) when they are not cached and cannot be built.
    """
    key = v.cache_key()
    found = cached(key)
    if found is not None:
        return found
    find_go()  # fail fast and clearly before taking the lock
    with build_lock(key, lambda: progress("another process is building; waiting for it")):
        found = cached(key)
        if found is not None:
            return found
        return _build(key, progress)


def _build(key: str, progress: Progress) -> Binaries:
    def steps(work: Path, staging: Path, log: Path, started: float) -> None:
        _build_kube_apiserver(work / "kube", staging, log, progress, started)
        _build_etcd(work / "etcd", staging, log, progress, started)

    return build_staged(
        cache_root(),
        key,
        what=f"kube-apiserver {v.KUBERNETES_VERSION} and etcd {v.ETCD_VERSION}",
        work_prefix="k8slease-cpbuild-",
        steps=steps,
        versions={"kubernetes": v.KUBERNETES_VERSION, "etcd": v.ETCD_VERSION},
        found=lambda: cached(key),
        progress=progress,
    )


def build_staged(
    root: Path,
    key: str,
    *,
    what: str,
    work_prefix: str,
    steps: Callable[[Path, Path, Path, float], None],
    versions: Mapping[str, object],
    found: Callable[[], T | None],
    progress: Progress,
) -> T:
    """Build into ``root/key`` (the caller holds the build lock of ``key``): ``steps(work,
    staging, log, started)`` writes the binaries into a staging directory, renamed into place
    only once complete (with ``versions.json``), so a killed build leaves no half cache entry;
    returns ``found()``, the completed entry (``BuildError`` if it is still incomplete)."""
    log = root / f"{key}-build.log"
    log.write_text("")
    started = time.monotonic()
    progress(
        f"building {what} into {root / key} (once per machine; minutes on a cold Go cache). "
        f"Log: {log}"
    )
    for stale in root.glob(f".{key}.*"):  # left by a build that was killed (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    try:
        with tempfile.TemporaryDirectory(prefix=work_prefix) as work:
            steps(Path(work), staging, log, started)
        (staging / "versions.json").write_text(json.dumps(versions, indent=2) + "\n")
        staging.chmod(0o755)
        staging.rename(root / key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    progress(f"[{time.monotonic() - started:6.0f}s] built; cached in {root / key}")
    binaries = found()
    if binaries is None:
        raise BuildError(f"the build finished but {root / key} is incomplete; log: {log}")
    return binaries


def _build_kube_apiserver(
    work: Path, out: Path, log: Path, progress: Progress, started: float
) -> None:
    what = f"kube-apiserver {v.KUBERNETES_VERSION}"
    progress(f"[{time.monotonic() - started:6.0f}s] {what}: reading k8s.io/kubernetes's go.mod")
    gomod = parse_gomod(module_gomod(v.KUBERNETES_MODULE, v.KUBERNETES_VERSION))
    text = wrapper_gomod(
        go_version=gomod["Go"],
        require=(v.KUBERNETES_MODULE, v.KUBERNETES_VERSION),
        tool=v.KUBE_APISERVER_PACKAGE,
        replacements=staging_replacements(gomod, v.staging_version()),
    )
    work.mkdir(parents=True)
    (work / "go.mod").write_text(text)
    run = _runner(work, log, what, progress, started)
    run(["mod", "tidy"])
    run(["build", "-v", *RELEASE_FLAGS, "-ldflags", version_ldflags(),
         "-o", str(out / KUBE_APISERVER), v.KUBE_APISERVER_PACKAGE])  # fmt: skip


def _build_etcd(work: Path, out: Path, log: Path, progress: Progress, started: float) -> None:
    what = f"etcd {v.ETCD_VERSION}"
    gomod = parse_gomod(module_gomod(v.ETCD_MODULE, v.ETCD_VERSION))
    work.mkdir(parents=True)
    (work / "go.mod").write_text(
        wrapper_gomod(
            go_version=gomod["Go"],
            require=(v.ETCD_MODULE, v.ETCD_VERSION),
            tool=v.ETCD_PACKAGE,
        )
    )
    run = _runner(work, log, what, progress, started)
    run(["mod", "tidy"])
    run(["build", "-v", *RELEASE_FLAGS, "-ldflags", STRIP, "-o", str(out / ETCD), v.ETCD_PACKAGE])


def _runner(
    work: Path, log: Path, what: str, progress: Progress, started: float
) -> Callable[[list[str]], None]:
    def run(args: list[str]) -> None:
        run_go(args, cwd=work, log=log, what=what, progress=progress, started=started)

    return run


#: What Kubernetes' release build (``hack/lib/golang.sh`` when not debugging) passes to every
#: ``go build``: no build paths in the binary, and (:data:`STRIP`) no symbol table and no DWARF,
#: which spares the linker most of its work on these large binaries (a cold build is CPU-bound
#: on two cores). Panics still print file:line stacks (the pc-line table stays).
RELEASE_FLAGS = ("-trimpath",)
STRIP = "-s -w"


def version_ldflags() -> str:
    """Stamp the release into the binary, as Kubernetes' own build does (``/version``), and
    strip it (:data:`STRIP`)."""
    major, minor = v.KUBERNETES_VERSION[1:].split(".")[:2]
    stamps = {
        "gitVersion": v.KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
    }
    flags = [
        f"-X {package}.{name}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for name, value in stamps.items()
    ]
    return " ".join([STRIP, *flags])
