# SPDX-License-Identifier: Apache-2.0
"""Running `gpuplane operator` against fakekube in the integration tests (and the demo/bench).

A cluster is set up the way the operator's tests need it: the ClusterPolicy CRD (the chart's,
deploy/helm/gpuplane/crds/, or a minimal one when that file is missing), the operator namespace,
nodes with NFD's labels (GPU nodes carry feature.node.kubernetes.io/pci-10de.present=true), and a
ClusterPolicy like NVIDIA's Helm chart's. The operator runs as a process with short intervals
(flags: --requeue-after, --backoff-*, the lease timings, a high client rate), its metrics and
probes on ports the kernel picks (read back from its log), and is ended by PID.
"""
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.request

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = ROOT / "deploy" / "helm" / "gpuplane" / "crds" / "nvidia.com_clusterpolicies.yaml"
NAMESPACE = "gpu-operator"
IMAGE = "ghcr.io/gpuplane/gpuplane:0.1.0"

# The states and their DaemonSets, in apply order (the contract).
STATES = [
    ("pre-requisites", None),
    ("state-operator-metrics", None),
    ("state-driver", "nvidia-driver-daemonset"),
    ("state-container-toolkit", "nvidia-container-toolkit-daemonset"),
    ("state-operator-validation", "nvidia-operator-validator"),
    ("state-device-plugin", "nvidia-device-plugin-daemonset"),
    ("state-dra-driver", "nvidia-dra-driver-gpu-kubelet-plugin"),
    ("state-dcgm-exporter", "nvidia-dcgm-exporter"),
    ("gpu-feature-discovery", "gpu-feature-discovery"),
]
DAEMONSETS = [ds for _, ds in STATES if ds and ds != "nvidia-dra-driver-gpu-kubelet-plugin"]

GPU_LABELS = {
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}
CPU_LABELS = {
    "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
}
DEPLOY_LABELS = ["nvidia.com/gpu.deploy." + x for x in (
    "driver", "container-toolkit", "operator-validator", "device-plugin", "dcgm-exporter",
    "gpu-feature-discovery")]
OWNED_ANNOTATION = "gpuplane.dev/operator-labels"

# Fast enough for tests; each is a documented flag of `gpuplane operator`.
FAST = ["--requeue-after=1s", "--backoff-base=50ms", "--backoff-max=500ms", "--kube-api-qps=500",
        "--kube-api-burst=1000"]

MINIMAL_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterpolicies.nvidia.com"},
    "spec": {
        "group": "nvidia.com", "scope": "Cluster",
        "names": {"kind": "ClusterPolicy", "listKind": "ClusterPolicyList", "plural": "clusterpolicies",
                  "singular": "clusterpolicy"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def cluster_policy(name="cluster-policy", **spec_overrides):
    """A ClusterPolicy as NVIDIA's chart makes it (driver and toolkit images named; the gpuplane
    components from GPUPLANE_IMAGE)."""
    spec = {
        "operator": {"defaultRuntime": "containerd", "runtimeClass": "nvidia"},
        "daemonsets": {"priorityClassName": "system-node-critical",
                       "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                        "effect": "NoSchedule"}]},
        "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver",
                   "version": "595.91.07"},
        "toolkit": {"enabled": True, "repository": "nvcr.io/nvidia/k8s",
                    "image": "container-toolkit", "version": "v1.20.0"},
        "devicePlugin": {"enabled": True},
        "dcgm": {"enabled": False},
        "dcgmExporter": {"enabled": True},
        "gfd": {"enabled": True},
        "nodeStatusExporter": {"enabled": False},
        "validator": {},
    }
    for k, v in spec_overrides.items():
        spec[k] = v
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": name},
            "spec": spec}


def yaml_objects(path):
    """The documents of a YAML file."""
    return [d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d]


def install(fk, gpu_nodes=("gpu-1", "gpu-2"), cpu_nodes=("cpu-1",), crd=None):
    """The CRD, the operator namespace and the nodes."""
    if crd is None:
        crd = CRD if CRD.exists() else MINIMAL_CRD
    fk.apply_crd(crd)
    fk.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for n in gpu_nodes:
        fk.add_node(n, labels=dict(GPU_LABELS), allocatable={"nvidia.com/gpu": "8"})
    for n in cpu_nodes:
        fk.add_node(n, labels=dict(CPU_LABELS))


def creations(fk):
    """(resource, namespace, name) of every object created, in the order of creation (the store's
    history of ADDED events)."""
    with fk.store.cond:
        return [(key[1], key[2], key[3]) for _, etype, key, _, _ in fk.store.history
                if etype == "ADDED"]


def node_labels(fk, name, prefix="nvidia.com/"):
    node = fk.get("nodes", name)
    return {k: v for k, v in node["metadata"].get("labels", {}).items() if k.startswith(prefix)}


def status(fk, name="cluster-policy"):
    cp = fk.get("clusterpolicies", name)
    return (cp or {}).get("status") or {}


def condition(st, ctype):
    for c in st.get("conditions", []):
        if c["type"] == ctype:
            return c
    return None


def wait_state(fk, state, name="cluster-policy", timeout=30, reason=None):
    def ok():
        st = status(fk, name)
        if st.get("state") != state:
            return None
        if reason and (condition(st, "Ready" if state == "ready" else "Error") or {}).get(
                "reason") != reason:
            return None
        return st
    return fk.wait_for(ok, timeout=timeout, what=f"ClusterPolicy {name} {state} {reason or ''}")


def daemonsets_ready(fk):
    """Every operand DaemonSet exists and its pods are all available on the GPU nodes."""
    for name in DAEMONSETS:
        ds = fk.get("daemonsets", name, NAMESPACE)
        st = (ds or {}).get("status") or {}
        if not ds or st.get("observedGeneration", 0) < ds["metadata"]["generation"] or \
                st.get("numberAvailable", 0) != st.get("desiredNumberScheduled", -1) or \
                st.get("desiredNumberScheduled", 0) == 0:
            return False
    return True


class Operator:
    """One `gpuplane operator` process against fk."""

    def __init__(self, gp, fk, work, *args, env=None, name="operator", fast=True):
        self.fk = fk
        self.log_path = pathlib.Path(work) / f"{name}.log"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
        full_env.update({"OPERATOR_NAMESPACE": NAMESPACE, "GPUPLANE_IMAGE": IMAGE})
        full_env.update(env or {})
        self.args = [str(gp.binary), "operator", f"--kubeconfig={fk.kubeconfig}",
                     "--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0",
                     *(FAST if fast else []), *map(str, args)]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self._log,
                                     env=full_env)
        self.metrics_port = self.health_port = None

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        return self.log_path.read_text()

    def _ports(self, timeout=10):
        deadline = time.monotonic() + timeout
        while self.metrics_port is None or self.health_port is None:
            text = self.log()
            m = re.search(r'"serving /metrics".* port=(\d+)', text)
            h = re.search(r'"serving /healthz and /readyz".* port=(\d+)', text)
            if m and h:
                self.metrics_port, self.health_port = int(m.group(1)), int(h.group(1))
                break
            if self.proc.poll() is not None:
                raise AssertionError(f"the operator exited {self.proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the operator did not serve its ports:\n{text}")
            time.sleep(0.05)

    def get(self, path, port=None):
        """(status, body) of a GET on the health port (or metrics port for /metrics)."""
        self._ports()
        port = port or (self.metrics_port if path == "/metrics" else self.health_port)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self):
        code, body = self.get("/metrics")
        assert code == 200, body
        return body

    def metric(self, name, labels=None):
        """The value of one series (labels: the exact label text inside {}), or None."""
        want = f"{name}{{{labels}}}" if labels else name
        for line in self.metrics().splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            if key == want:
                return float(value)
        return None

    def wait_exit(self, timeout=30):
        return self.proc.wait(timeout=timeout)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
