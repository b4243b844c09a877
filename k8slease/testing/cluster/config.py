"""The configuration files of the node's daemons, as text, from a few addresses and paths.

Everything runs inside the cluster's private network namespace, so the addresses below are
fixed: no other process on the machine sees them. The node has one address on a bridge of its
own, without ports (the kubelet's ``--node-ip``, CoreDNS, the API server's advertise address);
pods get addresses from the CNI bridge plugin on ``cni0``; Service IPs are DNAT rules
kube-proxy writes.
"""

from __future__ import annotations

import json
from pathlib import Path

NODE_NAME = "k8slease-node"
NODE_LINK = "k8sl-node"
NODE_IP = "10.213.0.1"
NODE_PREFIX = 24
POD_CIDR = "10.214.0.0/24"
SERVICE_CIDR = "10.215.0.0/24"
#: The ``kubernetes`` Service's ClusterIP: the first address of the Service range.
KUBERNETES_SERVICE_IP = "10.215.0.1"
API_PORT = 6443
CLUSTER_DOMAIN = "cluster.local"
CNI_BIN_DIR = "/usr/lib/cni"
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
#: Names the API server's serving certificate covers (in-cluster clients use the last ones).
SERVING_NAMES = (
    "IP:127.0.0.1",
    f"IP:{NODE_IP}",
    f"IP:{KUBERNETES_SERVICE_IP}",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    f"DNS:kubernetes.default.svc.{CLUSTER_DOMAIN}",
)


def containerd_toml(*, pause_image: str, cni_conf_dir: Path) -> str:
    """containerd v2's configuration (version 3).

    ``restrict_oom_score_adj``: root here may lack CAP_SYS_RESOURCE, and runc fails every
    sandbox when asked to lower a score ("can't get final child's PID from pipe").
    """
    return f"""version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "{CONTAINERD_SOCKET}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  disable_apparmor = true

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["{CNI_BIN_DIR}"]
  conf_dir = "{cni_conf_dir}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{pause_image}"
"""


def cni_conflist() -> str:
    """The pod network: a bridge with the pod range, the gateway on the node side."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "k8slease",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def kubelet_config(*, ca_file: Path, cgroup_root: str, resolv_conf: Path) -> str:
    """The KubeletConfiguration: cgroup v1 allowed, cgroupfs under a cluster-owned root,
    webhook authorization, the node's own DNS, eviction thresholds a test machine can meet."""
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "failCgroupV1": False,
            "failSwapOn": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": cgroup_root,
            "cgroupsPerQOS": True,
            "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
            "clusterDNS": [NODE_IP],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv_conf),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(ca_file)},
            },
            "authorization": {"mode": "Webhook"},
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "10s",
            "maxPods": 50,
            "localStorageCapacityIsolation": False,
        },
        indent=2,
    )


def kube_proxy_config(*, kubeconfig: Path) -> str:
    """kube-proxy in iptables mode; masquerade all Service traffic (pods on one bridge reach
    each other's Service without br_netfilter); conntrack sysctls left alone."""
    return json.dumps(
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "clusterCIDR": POD_CIDR,
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "iptables": {"masqueradeAll": True, "syncPeriod": "10s", "minSyncPeriod": "0s"},
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "metricsBindAddress": "127.0.0.1:10249",
            "healthzBindAddress": "127.0.0.1:10256",
        },
        indent=2,
    )


#: The CoreDNS plugins :func:`corefile` uses, in CoreDNS's own directive order (the order of
#: ``plugin.cfg``, which is the order a query passes them): the node's CoreDNS is built with
#: these alone (``build.py``), not with the 50-odd of a release binary (cloud DNS providers'
#: SDKs among them, most of its compile time).
COREDNS_PLUGINS = ("bind", "errors", "cache", "kubernetes")


def corefile(*, kubeconfig: Path) -> str:
    """CoreDNS on the node address: cluster names only, no upstream (nothing leaves)."""
    return f""".:53 {{
    bind {NODE_IP}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
