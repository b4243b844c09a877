"""``Cluster``: a single-node Kubernetes cluster from upstream binaries, in a private namespace.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, the kubelet,
kube-proxy and CoreDNS run as processes inside one private network + mount namespace
(:mod:`.netns`), so their fixed addresses and host paths touch nothing of the machine. Pods
are real containers (runc) on a CNI bridge. The admin kubeconfig points at a forwarder on
127.0.0.1 of the machine, so ``kubectl``, ``helm`` and Python clients work from outside::

    with Cluster() as cluster:
        cluster.kubectl("get", "nodes")

:meth:`Cluster.stop` leaves no process, mount, link or cgroup behind (:func:`leftovers` says
what would be, and a test checks it is nothing).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from k8slease.testing.controlplane.build import ensure_binaries
from k8slease.testing.controlplane.certs import client_certificate, make_pki
from k8slease.testing.controlplane.gotool import tail
from k8slease.testing.controlplane.kubeconfig import kubeconfig_document, write_document
from k8slease.testing.controlplane.plane import SERVICE_ACCOUNT_ISSUER
from k8slease.testing.controlplane.processes import Child
from k8slease.testing.launch import Launched
from k8slease.testing.tools import run_tool

from . import config as c
from . import dns
from . import versions as v
from .build import NodeBinaries, Progress, ensure_node_binaries, stderr_progress
from .host import ensure_packages, unavailable
from .images import ensure_pause_image
from .netns import (
    Forwarder,
    Namespace,
    NamespaceError,
    cgroup_dirs,
    make_cgroup_root,
    reap,
    remove_cgroups,
)

INNER_URL = f"https://127.0.0.1:{c.API_PORT}"
#: Kernel settings the kubelet sets at start (pkg/kubelet/cm setupKernelTunables), and the
#: values it wants: shown to it by bind mounts, never written to the machine's kernel.
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}


#: The name every cluster's DNS answers (the API server's Service).
KUBERNETES_NAME = f"kubernetes.default.svc.{c.CLUSTER_DOMAIN}"


class ClusterError(RuntimeError):
    """The cluster did not come up (the message has the failing process's log tail)."""


class ClusterUnavailable(ClusterError):
    """The cluster cannot run on this machine at all (the message is the one-line reason)."""


def leftovers(directory: Path, cgroup_root: str) -> list[str]:
    """What a cluster with this state directory and cgroup root has on the machine: nothing,
    once it is stopped (a process, a mount, the directory, a cgroup otherwise)."""
    found = []
    if str(directory) in Path("/proc/self/mountinfo").read_text():
        found.append(f"a mount under {directory}")
    if directory.exists():
        found.append(f"the directory {directory}")
    found += [f"the cgroup {path}" for path in cgroup_dirs(cgroup_root)]
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if str(directory).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(f"process {pid}")
    return found


class Cluster(Launched):
    """One single-node cluster; see the module docstring."""

    name = "the cluster"
    error = ClusterError

    def __init__(
        self,
        *,
        kubeconfig: str | Path | None = None,
        start_timeout: float = 180.0,
        progress: Progress = stderr_progress,
    ) -> None:
        super().__init__(kubeconfig=kubeconfig, start_timeout=start_timeout, progress=progress)
        self._namespace: Namespace | None = None
        self._forwarder: Forwarder | None = None
        self._binaries: NodeBinaries | None = None
        self.cgroup_root = ""

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def binaries(self) -> NodeBinaries:
        if self._binaries is None:
            raise RuntimeError("the cluster is not started")
        return self._binaries

    def start(self) -> Cluster:
        """Build what is missing, start every daemon, return once the node is Ready.

        Raises :class:`ClusterUnavailable` (one line) where it cannot run, ``BuildError`` when
        a binary cannot be built, :class:`ClusterError` when a daemon fails; nothing is left
        running, mounted or linked then.
        """
        if self._children:
            return self
        reason = unavailable()
        if reason is not None:
            raise ClusterUnavailable(reason)
        ensure_packages()
        plane = ensure_binaries(self._progress)
        self._binaries = ensure_node_binaries(self._progress)
        pause = ensure_pause_image(self._binaries, self._progress)
        self._directory = Path(tempfile.mkdtemp(prefix="k8slease-cluster-"))
        self.cgroup_root = f"/{self._directory.name}"
        try:
            began = time.monotonic()
            self._namespace = Namespace()
            make_cgroup_root(self.cgroup_root)
            self._prepare()
            self._forwarder = Forwarder(self._namespace.pid, ("127.0.0.1", c.API_PORT))
            self._write_admin_kubeconfig()
            self._launch_control_plane(plane.etcd, plane.kube_apiserver)
            self._wait("kube-apiserver /readyz", lambda: self._get("/readyz") == 200)
            self._launch_node(pause)
            self._wait("the node to be Ready", self._node_ready)
            self._wait("the default ServiceAccount", self._default_service_account)
            self.start_seconds = time.monotonic() - began
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare(self) -> None:
        """Files, mounts and links: overlays on /var and /run, the node's bridge."""
        directory, namespace = self.directory, self._require_namespace()
        for sub in (
            "var/upper",
            "var/work",
            "run/upper",
            "run/work",
            "containerd",
            "kubelet",
            "cni",
            "logs",
        ):
            (directory / sub).mkdir(parents=True)
        pki = self._pki = make_pki(directory / "pki", serving_names=c.SERVING_NAMES)
        identities = {
            "kubelet": (f"system:node:{c.NODE_NAME}", "system:nodes"),
            "kube-proxy": ("system:kube-proxy", None),
            "kube-controller-manager": ("system:kube-controller-manager", None),
            "kube-scheduler": ("system:kube-scheduler", None),
        }
        for name, (user, group) in identities.items():
            client = client_certificate(pki, name, user=user, group=group)
            write_document(
                kubeconfig_document(INNER_URL, pki.ca.cert, client=client),
                directory / f"{name}.kubeconfig",
            )
        write_document(
            kubeconfig_document(INNER_URL, pki.ca.cert, client=pki.admin),
            directory / "admin-inner.kubeconfig",
        )
        d = directory
        script = f"""set -e
mount -t overlay overlay -o lowerdir=/var,upperdir={d}/var/upper,workdir={d}/var/work /var
mount -t overlay overlay -o lowerdir=/run,upperdir={d}/run/upper,workdir={d}/run/work /run
mkdir -p /var/lib/containerd /var/lib/kubelet /run/netns
mount --bind {d}/containerd /var/lib/containerd
mount --bind {d}/kubelet /var/lib/kubelet
ip link set lo up
ip link add {c.NODE_LINK} type bridge
ip addr add {c.NODE_IP}/{c.NODE_PREFIX} dev {c.NODE_LINK}
ip link set {c.NODE_LINK} up
ip route add default dev {c.NODE_LINK}
echo 1 > /proc/sys/net/ipv4/ip_forward
"""
        # The kubelet writes these kernel-wide settings when they differ from what it wants;
        # inside the mount namespace it reads its own values instead and the machine's stay.
        (directory / "sysctl").mkdir()
        for key, value in KUBELET_SYSCTLS.items():
            fake = directory / "sysctl" / key.replace("/", ".")
            fake.write_text(f"{value}\n")
            script += f"mount --bind {fake} /proc/sys/{key}\n"
        namespace.run(["sh", "-c", script], what="setting up the namespace's mounts and links")

    def _child(self, name: str, argv: Sequence[str]) -> Child:
        path = os.pathsep.join([str(self.binaries.directory), os.environ.get("PATH", "")])
        child = Child(
            name,
            [*self._require_namespace().enter(), "env", f"PATH={path}", *argv],
            self.directory / "logs" / f"{name}.log",
        )
        child.start()
        self._children.append(child)
        return child

    def _launch_control_plane(self, etcd: Path, apiserver: Path) -> None:
        d, pki = self.directory, self._require_pki()
        self._child(
            "etcd",
            [
                str(etcd),
                "--name=k8slease",
                f"--data-dir={d / 'etcd'}",
                "--listen-client-urls=http://127.0.0.1:2379",
                "--advertise-client-urls=http://127.0.0.1:2379",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=k8slease=http://127.0.0.1:2380",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._child(
            "kube-apiserver",
            [
                str(apiserver),
                "--etcd-servers=http://127.0.0.1:2379",
                "--bind-address=0.0.0.0",
                f"--advertise-address={c.NODE_IP}",
                f"--secure-port={c.API_PORT}",
                f"--cert-dir={d / 'apiserver-certs'}",
                f"--tls-cert-file={pki.server.cert}",
                f"--tls-private-key-file={pki.server.key}",
                f"--client-ca-file={pki.ca.cert}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.service_account.public_key}",
                f"--service-account-signing-key-file={pki.service_account.key}",
                f"--service-cluster-ip-range={c.SERVICE_CIDR}",
                "--endpoint-reconciler-type=lease",
                f"--kubelet-client-certificate={pki.admin.cert}",
                f"--kubelet-client-key={pki.admin.key}",
                "--kubelet-preferred-address-types=InternalIP",
                "--profiling=false",
            ],
        )

    def _config(self, name: str, text: str) -> Path:
        """Write a daemon's configuration file ``name`` into the state directory."""
        path = self.directory / name
        path.write_text(text)
        return path

    def _launch_node(self, pause_archive: Path) -> None:
        d, pki, b = self.directory, self._require_pki(), self.binaries
        self._child(
            "kube-controller-manager",
            [
                str(b["kube-controller-manager"]),
                f"--kubeconfig={d / 'kube-controller-manager.kubeconfig'}",
                f"--service-account-private-key-file={pki.service_account.key}",
                f"--root-ca-file={pki.ca.cert}",
                "--use-service-account-credentials=true",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
            ],
        )
        self._child(
            "kube-scheduler",
            [
                str(b["kube-scheduler"]),
                f"--kubeconfig={d / 'kube-scheduler.kubeconfig'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
            ],
        )
        cni = d / "cni"
        (cni / "10-k8slease.conflist").write_text(c.cni_conflist())
        containerd = self._config(
            "containerd.toml", c.containerd_toml(pause_image=v.PAUSE_IMAGE, cni_conf_dir=cni)
        )
        self._child("containerd", [str(b["containerd"]), f"--config={containerd}"])
        self._wait("containerd", lambda: self._ctr("version").returncode == 0)
        self._ctr("images", "import", str(pause_archive), what="importing the pause image")
        resolv_conf = self._config("resolv.conf", "# the node has no upstream DNS\n")
        kubelet = self._config(
            "kubelet.json",
            c.kubelet_config(
                ca_file=pki.ca.cert, cgroup_root=self.cgroup_root, resolv_conf=resolv_conf
            ),
        )
        self._child(
            "kubelet",
            [
                str(b["kubelet"]),
                f"--config={kubelet}",
                f"--kubeconfig={d / 'kubelet.kubeconfig'}",
                f"--hostname-override={c.NODE_NAME}",
                f"--node-ip={c.NODE_IP}",
                "--v=2",  # its kills, probes and restarts, for a failed e2e test's reader
            ],
        )
        kube_proxy = self._config(
            "kube-proxy.json", c.kube_proxy_config(kubeconfig=d / "kube-proxy.kubeconfig")
        )
        self._child("kube-proxy", [str(b["kube-proxy"]), f"--config={kube_proxy}"])
        corefile = self._config("Corefile", c.corefile(kubeconfig=d / "admin-inner.kubeconfig"))
        self._child("coredns", [str(b["coredns"]), "-conf", str(corefile)])
        self._wait(f"CoreDNS to answer for {KUBERNETES_NAME}", self._dns_answers)

    def resolve(self, name: str) -> list[str]:
        """The addresses the node's CoreDNS answers for ``name`` (its A records), asked from
        inside the node's network namespace, as a pod's resolver asks."""
        query = dns.a_query(name).hex()
        reply = self._require_namespace().run(
            [sys.executable, "-c", dns.SEND, query, c.NODE_IP], what=f"resolving {name}"
        )
        return dns.a_records(bytes.fromhex(reply.strip()))

    def _dns_answers(self) -> bool:
        try:
            return self.resolve(KUBERNETES_NAME) == [c.KUBERNETES_SERVICE_IP]
        except (NamespaceError, ValueError):  # not listening yet, or not synced (SERVFAIL)
            return False

    def _ctr(self, *args: str, what: str = "") -> subprocess.CompletedProcess[str]:
        """containerd's ``ctr`` inside the node; with ``what``, a failure is a ClusterError."""
        ctr = [str(self.binaries["ctr"]), f"--address={c.CONTAINERD_SOCKET}", "--namespace=k8s.io"]
        return run_tool(
            [*self._require_namespace().enter(), *ctr, *args],
            timeout=600,
            failure=ClusterError if what else None,
            what=what,
        )

    def import_image(self, archive: Path) -> None:
        """Import an image archive (OCI or docker-archive) into the node's containerd."""
        self._ctr("images", "import", "--all-platforms", str(archive), what=f"importing {archive}")

    def _wait(self, what: str, ready: Callable[[], bool]) -> None:
        def timed_out() -> str:
            logs = "\n".join(f"--- {child.name}:\n{tail(child.log, 8)}" for child in self._children)
            return f"waited {self.start_timeout:.0f} s for {what}\n{logs}"

        self._wait_until(
            ready,
            deadline=time.monotonic() + self.start_timeout,
            poll=0.25,
            timed_out=timed_out,
            tolerate=(OSError, subprocess.SubprocessError),
        )

    def _get(self, path: str) -> int:
        pki = self._require_pki()
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        context.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        assert self._forwarder is not None
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self._forwarder.port, context=context, timeout=5
        )
        try:
            connection.request("GET", path)
            return connection.getresponse().status
        finally:
            connection.close()

    def _write_admin_kubeconfig(self) -> Path:
        assert self._forwarder is not None
        pki = self._require_pki()
        target = self._admin_kubeconfig_target()
        document = kubeconfig_document(
            f"https://127.0.0.1:{self._forwarder.port}", pki.ca.cert, client=pki.admin
        )
        self._kubeconfig = write_document(document, target)
        return self._kubeconfig

    def _node_ready(self) -> bool:
        result = self.kubectl(
            "get",
            "node",
            c.NODE_NAME,
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
            check=False,
        )
        return result.stdout.strip() == "True"

    def _default_service_account(self) -> bool:
        result = self.kubectl("get", "serviceaccount", "default", "-o", "name", check=False)
        return result.returncode == 0

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 300.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the cluster's ``kubectl`` as the admin (from the machine, through the forwarder)."""
        return self._tool("kubectl", args, check=check, timeout=timeout, input=input)

    def helm(
        self, *args: str, check: bool = True, timeout: float = 600.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the cluster's ``helm`` as the admin."""
        return self._tool("helm", args, check=check, timeout=timeout, input=None)

    def _tool(
        self, name: str, args: Sequence[str], *, check: bool, timeout: float, input: str | None
    ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        if name == "helm":
            home = self.directory / "helm"
            env.update(
                HELM_CACHE_HOME=str(home / "cache"),
                HELM_CONFIG_HOME=str(home / "config"),
                HELM_DATA_HOME=str(home / "data"),
            )
        return run_tool(
            [str(self.binaries[name]), *args],
            timeout=timeout,
            failure=ClusterError if check else None,
            what=f"{name} {' '.join(args)}",
            env=env,
            input=input,
        )

    def stop(self) -> None:
        """Stop everything; remove the namespace, the cgroups and the state directory."""
        for child in reversed(self._children):
            if child.name in ("kubelet", "containerd"):
                child.stop(grace=5)
        namespace, self._namespace = self._namespace, None
        errors: list[str] = []
        if namespace is not None:
            try:
                reap(namespace, self.cgroup_root)
            except NamespaceError as error:
                errors.append(str(error))
        self._stop_children(grace=5)
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if namespace is not None:
            namespace.close()
        if self.cgroup_root:
            try:
                remove_cgroups(self.cgroup_root)
            except NamespaceError as error:
                errors.append(str(error))
        self._remove_files()
        if errors:
            raise ClusterError("the cluster did not stop cleanly: " + "; ".join(errors))

    def _require_namespace(self) -> Namespace:
        if self._namespace is None:
            raise RuntimeError("the cluster is not started")
        return self._namespace

    def describe(self) -> str:
        """One line for the command line: where the kubeconfig and the logs are."""
        return json.dumps(
            {"kubeconfig": str(self.kubeconfig), "logs": str(self.directory / "logs")}
        )
