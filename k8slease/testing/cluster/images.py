"""Container images for the node, made on this machine (no registry is reachable here).

- The sandbox (pause) image: the statically linked pause binary in a one-layer OCI archive,
  written here byte by byte (deterministic: the same binary gives the same digest).
- The project's image: its own Dockerfile, built by ``buildah bud`` (no daemon) on a local base
  (``debootstrap`` of Debian + python3, with this machine's CA bundle and pip configuration so
  that pip reaches the package index the way the machine does), saved as a docker archive that
  :meth:`~.node.Cluster.import_image` loads into containerd.

Both are cached under ``~/.cache/k8slease/cluster/images``: the pause archive and the base
per pinned version, the project's image per content digest of the files the Dockerfile copies.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from k8slease.testing.controlplane.gotool import BuildError

from . import versions as v
from .build import PAUSE, NodeBinaries, Progress
from .paths import cluster_cache_root, file_lock


def images_root() -> Path:
    return cluster_cache_root() / "images"


def _blob(layout: tarfile.TarFile, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    layout.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _file(layout: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    layout.addfile(info, io.BytesIO(data))


def pause_archive_bytes(pause_binary: bytes) -> bytes:
    """An OCI image-layout tar: one layer with ``/pause``, entrypoint ``/pause``."""
    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w", format=tarfile.PAX_FORMAT) as layer:
        info = tarfile.TarInfo("pause")
        info.size, info.mode = len(pause_binary), 0o755
        layer.addfile(info, io.BytesIO(pause_binary))
    diff_id = "sha256:" + hashlib.sha256(layer_tar.getvalue()).hexdigest()
    compressed = gzip.compress(layer_tar.getvalue(), mtime=0)
    config = json.dumps(
        {
            "architecture": "amd64" if os.uname().machine == "x86_64" else os.uname().machine,
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        },
        sort_keys=True,
    ).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as layout:
        layer_desc = _blob(layout, compressed)
        config_desc = _blob(layout, config)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
                "layers": [
                    {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer_desc}
                ],
            },
            sort_keys=True,
        ).encode()
        manifest_desc = _blob(layout, manifest)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    **manifest_desc,
                    "annotations": {
                        "io.containerd.image.name": v.PAUSE_IMAGE,
                        "org.opencontainers.image.ref.name": v.PAUSE_IMAGE.rpartition(":")[2],
                    },
                }
            ],
        }
        _file(layout, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _file(layout, "index.json", json.dumps(index, sort_keys=True).encode())
    return out.getvalue()


def ensure_pause_image(binaries: NodeBinaries, progress: Progress) -> Path:
    """The pause image archive, written once per pause binary."""
    data = binaries[PAUSE].read_bytes()
    target = images_root() / f"pause-{hashlib.sha256(data).hexdigest()[:16]}.tar"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_bytes(pause_archive_bytes(data))
        tmp.replace(target)
    return target


#: The project's image name (containerd's full name: ``docker.io/library/k8slease:e2e``).
APP_IMAGE = "k8slease:e2e"
#: What the Dockerfile copies: the image is rebuilt when one of these changes.
_CONTEXT_INPUTS = (
    "Dockerfile",
    "pyproject.toml",
    "README.md",
    "constraints.txt",
    "charts/k8slease/crds",
    "k8slease",
)
#: Host files the base carries so that pip inside the build reaches the index as the host does.
_HOST_FILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf")
DEFAULT_CONTEXT = Path(__file__).resolve().parents[3]


def _buildah(*args: str, log: Path, timeout: float = 1800) -> str:
    root = images_root() / "buildah"
    argv = [
        "buildah",
        f"--root={root / 'storage'}",
        f"--runroot={root / 'run'}",
        "--storage-driver=overlay",
        *args,
    ]
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(argv)}\n")
        sink.flush()
        result = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=sink, text=True, check=False, timeout=timeout
        )
        sink.write(result.stdout)
    if result.returncode != 0:
        raise BuildError(f"buildah {args[0]} failed; log: {log}\n{_tail(log)}")
    return result.stdout.strip()


def _tail(log: Path) -> str:
    from k8slease.testing.controlplane.gotool import tail

    return tail(log, 25)


def ensure_base_image(progress: Progress, log: Path) -> str:
    """The local base (debootstrap + python3) in buildah's storage; returns its name."""
    marker = images_root() / f"{v.base_key()}.done"
    if marker.exists():
        return v.BASE_IMAGE
    started = time.monotonic()
    progress(f"debootstrap {v.BASE_SUITE} + {' '.join(v.BASE_PACKAGES)} (once per machine)")
    with tempfile.TemporaryDirectory(prefix="k8slease-base-", dir=images_root()) as work:
        rootfs = Path(work) / "rootfs"
        argv = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(v.BASE_PACKAGES)}",
            v.BASE_SUITE,
            str(rootfs),
            "http://deb.debian.org/debian",
        ]
        with log.open("a") as sink:
            sink.write(f"$ {' '.join(argv)}\n")
            sink.flush()
            result = subprocess.run(
                argv, stdout=sink, stderr=subprocess.STDOUT, check=False, timeout=1800
            )
        if result.returncode != 0:
            raise BuildError(f"debootstrap failed; log: {log}\n{_tail(log)}")
        for name in _HOST_FILES:
            if Path(name).is_file():
                shutil.copyfile(name, rootfs / name.lstrip("/"))
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / cache, ignore_errors=True)
        with tarfile.open(Path(work) / "rootfs.tar", "w") as archive:
            archive.add(rootfs, arcname=".")
        shutil.rmtree(rootfs)
        (Path(work) / "Containerfile").write_text("FROM scratch\nADD rootfs.tar /\n")
        _buildah(
            "bud",
            "--quiet",
            "--layers=false",
            "-t",
            v.BASE_IMAGE,
            "-f",
            str(Path(work) / "Containerfile"),
            work,
            log=log,
        )
    marker.write_text(v.BASE_IMAGE + "\n")
    progress(f"[{time.monotonic() - started:6.0f}s] base image {v.BASE_IMAGE} built")
    return v.BASE_IMAGE


def context_digest(context: Path) -> str:
    """A digest of every file the Dockerfile copies (names and contents)."""
    digest = hashlib.sha256()
    for name in _CONTEXT_INPUTS:
        top = context / name
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in paths:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(context)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def ensure_app_image(context: Path = DEFAULT_CONTEXT, progress: Progress | None = None) -> Path:
    """The project's image, built from its Dockerfile with buildah; the docker archive's path."""
    if not (context / "Dockerfile").is_file():
        raise BuildError(f"no Dockerfile in {context}: the image is built from a source tree")
    report = progress or (lambda line: print(f"k8slease cluster: {line}", flush=True))
    target = images_root() / f"k8slease-{context_digest(context)}.tar"
    if target.exists():
        return target
    images_root().mkdir(parents=True, exist_ok=True)
    log = images_root() / "build.log"
    with file_lock("images", lambda: report("another process is building images; waiting")):
        if target.exists():
            return target
        base = ensure_base_image(report, log)
        started = time.monotonic()
        report(f"buildah bud {context / 'Dockerfile'} on {base}; log: {log}")
        _buildah(
            "bud",
            "--network=host",
            "--layers=false",
            f"--build-arg=PYTHON_IMAGE={base}",
            "-t",
            APP_IMAGE,
            "-f",
            str(context / "Dockerfile"),
            str(context),
            log=log,
        )
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        _buildah("push", APP_IMAGE, f"docker-archive:{tmp}:{APP_IMAGE}", log=log)
        tmp.replace(target)
        for stale in images_root().glob("k8slease-*.tar"):
            if stale != target:
                stale.unlink(missing_ok=True)
        report(f"[{time.monotonic() - started:6.0f}s] image {APP_IMAGE} built: {target}")
    return target
