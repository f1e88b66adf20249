# SPDX-License-Identifier: Apache-2.0
"""`gpuplane discover` through the binary: NVIDIA GPU Feature Discovery's labels on the mock nodes,
the NFD features file and the NodeFeature object (against fakekube, which validates NodeFeature bodies
against node-feature-discovery's CRD schema), the loop, SIGHUP, SIGTERM, and a GPU fault that must
not take the labels away. The label rules value by value are tests/unit/discover's; here every label
must also match the patterns NVIDIA's own end-to-end tests check (shared/conformance/gfd).
"""
import json
import os
import pathlib
import re
import signal
import stat
import subprocess
import time

import pytest

from conftest import ROOT

CONFORMANCE = pathlib.Path(os.environ.get("GFD_CONFORMANCE_DIR",
                                          ROOT.parent / "shared" / "conformance" / "gfd"))
NF_PATH = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-operator/nodefeatures"
T = 15.0


def wait_until(fn, timeout=T, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def labels_of(text):
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def print_labels(gp, profile, *args):
    p = gp.run("discover", "--mock", profile, "--print-labels", *args)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines == sorted(lines)
    return labels_of(p.stdout)


def patterns(mode):
    """The conformance patterns; their [a|b] bracket sets mean the alternatives a, b (README). A
    label matches a pattern from its start, as a grep of the node's labels does."""
    out = []
    for line in (CONFORMANCE / f"mig-{mode}.regex.txt").read_text().splitlines():
        if line.strip():
            out.append(re.compile(re.sub(r"\[([a-z|_-]+\|[a-z|_-]+|compute)\]",
                                         lambda m: "(" + m.group(1) + ")", line)))
    return out


# Two A100s with MIG on, the same profile everywhere: a valid strategy-single node (the bundled
# a100-mig mixes profiles and full GPUs, which single labels -MIG-INVALID).
A100_SINGLE = """driver: {version: "550.54.15", cuda: 12040}
defaults:
  name: "NVIDIA A100-SXM4-40GB"
  architecture: ampere
  computeCapability: "8.0"
  memory: 40960
  mig:
    capable: true
    enabled: true
    instances: [{profile: 3g.20gb}, {profile: 3g.20gb}]
gpus:
  - {busId: "0000:07:00.0"}
  - {busId: "0000:0f:00.0"}
"""


@pytest.fixture
def a100_single(tmp_path):
    p = tmp_path / "a100-single.yaml"
    p.write_text(A100_SINGLE)
    return p


@pytest.mark.parametrize("profile,mode", [("dgx-h100", "none"), ("pcie-t4", "none"),
                                          ("lost-gpu", "none"), ("a100-mig", "none"),
                                          ("a100-single", "single"), ("a100-mig", "mixed")])
def test_labels_match_nvidias_patterns(gp, a100_single, profile, mode):
    labels = print_labels(gp, a100_single if profile == "a100-single" else profile,
                          "--mig-strategy", mode)
    lines = [f"{k}={v}" for k, v in labels.items()]
    missing = [p.pattern for p in patterns(mode) if not any(p.match(line) for line in lines)]
    assert not missing, f"no label matches: {missing}\nlabels: {lines}"


def test_mig_single_on_mixed_gpus_is_invalid(gp, a100_single):
    labels = print_labels(gp, "a100-mig", "--mig-strategy", "single")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"],
            labels["nvidia.com/gpu.memory"], labels["nvidia.com/gpu.sharing-strategy"]) == ("0", "0", "0", "")
    valid = print_labels(gp, a100_single, "--mig-strategy", "single")
    assert valid["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    assert valid["nvidia.com/gpu.count"] == "4"


@pytest.mark.parametrize("text,where", [("version: v1\nsharing: [\n", ":3:1: "),
                                        ("version: v1\nflags:\n  migStrategy: bogus\n", ":3:16: ")])
def test_invalid_config_exits_1_with_position(gp, tmp_path, text, where):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    p = gp.run("discover", "--mock", "pcie-t4", "--print-labels", "--config-file", cfg)
    assert p.returncode == 1 and f"{cfg}{where}" in p.stderr, p.stderr
    assert p.stdout == ""


def test_usage_errors_exit_2(gp):
    for args in (["--bogus"], ["--sleep-interval", "5"], ["--mig-strategy", "all"]):
        p = gp.run("discover", "--mock", "pcie-t4", *args)
        assert p.returncode == 2 and "--help" in p.stderr, (args, p.stderr)


def test_labels_follow_the_inventory(gp):
    info = gp.json("info", "--mock", "dgx-h100", "--json")
    g = info["gpus"][0]
    labels = print_labels(gp, "dgx-h100", "--no-timestamp")
    assert "nvidia.com/gfd.timestamp" not in labels
    assert labels["nvidia.com/gpu.count"] == str(len(info["gpus"]))
    assert labels["nvidia.com/gpu.product"] == g["name"].replace(" ", "-")
    assert labels["nvidia.com/gpu.memory"] == str(g["memoryBytes"] >> 20)
    assert labels["nvidia.com/gpu.family"] == "hopper"
    major, minor = g["computeCapability"].split(".")
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == (major, minor)
    assert labels["nvidia.com/cuda.driver-version.full"] == info["driverVersion"]
    assert labels["nvidia.com/gpu.replicas"] == "1" and labels["nvidia.com/gpu.sharing-strategy"] == "none"


def test_sharing_config_shapes_the_labels(gp, tmp_path):
    cfg = tmp_path / "ts.yaml"
    cfg.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 4\n")
    labels = print_labels(gp, "pcie-t4", "--config-file", cfg)
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.product"].endswith("-SHARED")
    cfg.write_text("version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  mps:\n    resources:\n"
                   "    - name: nvidia.com/mig-1g.5gb\n      replicas: 2\n")
    labels = print_labels(gp, "a100-mig", "--config-file", cfg)
    check_sharing(labels, "nvidia.com/mig-1g.5gb", (2, "mps", False))
    check_sharing(labels, "nvidia.com/mig-3g.20gb", (1, "none", False))
    check_sharing(labels, "nvidia.com/gpu", (1, "none", False))


def test_oneshot_writes_the_features_file(gp, tmp_path):
    out = tmp_path / "features.d" / "gfd"
    p = gp.run("discover", "--mock", "dgx-h100", "--oneshot", "--use-node-feature-api=false",
               "--no-timestamp", "-o", out)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert labels_of(out.read_text()) == print_labels(gp, "dgx-h100", "--no-timestamp")
    assert [f.name for f in out.parent.iterdir()] == ["gfd"]  # no temporary file left


class Daemon:
    def __init__(self, gp, work, *args, env=None):
        self.log_path = work / f"discover-{time.monotonic_ns()}.log"
        self.events = work / "events.jsonl"
        self.events.touch()
        full = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
        full.update({"MOCK_NVML_EVENTS": str(self.events)}, **(env or {}))
        self.proc = subprocess.Popen([str(gp.binary), "discover", *map(str, args)],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"),
                                     env=full)

    def log(self):
        return self.log_path.read_text()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(T)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("discover did not stop")
        return self.proc.returncode


@pytest.fixture
def daemons():
    started = []
    yield lambda *a, **kw: started.append(Daemon(*a, **kw)) or started[-1]
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


def test_loop_keeps_the_file_on_sigterm(gp, tmp_path, daemons):
    out = tmp_path / "gfd"
    d = daemons(gp, tmp_path, "--mock", "pcie-t4", "--use-node-feature-api=false", "-o", out,
                "--sleep-interval", "200ms", "-v=2")
    first = wait_until(lambda: out.exists() and out.read_text(), what="the features file")
    stamp = labels_of(first)["nvidia.com/gfd.timestamp"]
    passes = lambda: d.log().count("labels written") + d.log().count("labels unchanged")  # noqa: E731
    wait_until(lambda: passes() >= 3, what="three passes")
    assert d.stop() == 0
    assert out.exists(), "the features file must survive SIGTERM"
    assert labels_of(out.read_text())["nvidia.com/gpu.count"] == labels_of(first)["nvidia.com/gpu.count"]
    assert re.fullmatch(r"[0-9]{10}", stamp)


def test_gpus_lost_keep_the_last_labels(gp, tmp_path, daemons):
    out = tmp_path / "gfd"
    d = daemons(gp, tmp_path, "--mock", "pcie-t4", "--use-node-feature-api=false", "-o", out,
                "--sleep-interval", "100ms", "--no-timestamp")
    before = wait_until(lambda: out.exists() and out.read_text(), what="the features file")
    info = gp.json("info", "--mock", "pcie-t4", "--json")
    with open(d.events, "a") as f:
        for g in info["gpus"]:
            f.write(json.dumps({"gpu": g["index"], "type": "lost"}) + "\n")
    wait_until(lambda: "keeping the last labels" in d.log(), what="a pass without GPUs")
    assert out.read_text() == before
    # one GPU back: labelled again, counting the GPU that answers
    with open(d.events, "a") as f:
        f.write(json.dumps({"gpu": 0, "type": "recover"}) + "\n")
    wait_until(lambda: labels_of(out.read_text()).get("nvidia.com/gpu.count") == "1",
               what="the GPU that answers to be labelled")
    assert d.stop() == 0


def test_sighup_reloads_the_config(gp, tmp_path, daemons):
    out, cfg = tmp_path / "gfd", tmp_path / "config.yaml"
    cfg.write_text("version: v1\n")
    d = daemons(gp, tmp_path, "--mock", "pcie-t4", "--use-node-feature-api=false", "-o", out,
                "--sleep-interval", "infinite", "--config-file", cfg, "--no-timestamp")
    wait_until(lambda: out.exists() and labels_of(out.read_text()).get("nvidia.com/gpu.replicas") == "1",
               what="the first labels")
    cfg.write_text("version: v1\nsharing:\n  mps:\n    resources:\n"
                   "    - name: nvidia.com/gpu\n      replicas: 2\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: labels_of(out.read_text()).get("nvidia.com/gpu.sharing-strategy") == "mps",
               what="the reloaded labels")
    # a broken config on SIGHUP keeps the running one
    cfg.write_text("version: v1\nsharing: [\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "keeping the running one" in d.log(), what="the refusal")
    assert labels_of(out.read_text())["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert d.stop() == 0


# ---- the NodeFeature API ----

def run_nf(gp, fakekube, *args):
    return gp.run("discover", "--mock", "dgx-h100", "--oneshot", "--node-name", "n1",
                  "--namespace", "gpu-operator", "--kubeconfig", fakekube.kubeconfig, *args)


def test_nodefeature_created_then_left_alone(gp, fakekube):
    p = run_nf(gp, fakekube, "--no-timestamp")
    assert p.returncode == 0, p.stderr
    nf = fakekube.get("nodefeatures", "nvidia-features-for-n1", namespace="gpu-operator")
    assert nf["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": "n1"}
    assert nf["spec"]["labels"] == print_labels(gp, "dgx-h100", "--no-timestamp")
    assert nf["spec"]["features"] == {"flags": {}, "attributes": {}, "instances": {}}
    p = run_nf(gp, fakekube, "--no-timestamp")
    assert p.returncode == 0, p.stderr
    assert not fakekube.requests("PUT", NF_PATH), "an unchanged label set must not be written"
    # a changed set is written once
    p = run_nf(gp, fakekube, "--no-timestamp", "--mig-strategy", "mixed")
    assert p.returncode == 0, p.stderr
    assert len(fakekube.requests("PUT", NF_PATH)) == 1
    nf = fakekube.get("nodefeatures", "nvidia-features-for-n1", namespace="gpu-operator")
    assert nf["spec"]["labels"]["nvidia.com/mig.strategy"] == "mixed"


def test_nodefeature_owned_by_the_pod_and_its_daemonset(gp, fakekube):
    ds_uid = "3f0c7c1e-4a55-4ab1-9c1b-0b8b2f1c0d11"
    pod = fakekube.put({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "gfd-x1", "namespace": "gpu-operator", "ownerReferences": [
                            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gpu-feature-discovery",
                             "uid": ds_uid, "controller": True, "blockOwnerDeletion": True}]},
                        "spec": {"containers": [{"name": "c", "image": "x"}]}})
    p = run_nf(gp, fakekube, "--pod-name", "gfd-x1")
    assert p.returncode == 0, p.stderr
    nf = fakekube.get("nodefeatures", "nvidia-features-for-n1", namespace="gpu-operator")
    owners = nf["metadata"]["ownerReferences"]
    assert owners[0] == {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gpu-feature-discovery",
                         "uid": ds_uid, "controller": True, "blockOwnerDeletion": True}
    assert owners[1] == {"apiVersion": "v1", "kind": "Pod", "name": "gfd-x1",
                         "uid": pod["metadata"]["uid"]}


def test_nodefeature_forbidden_is_explained(gp, fakekube):
    fakekube.inject("POST", NF_PATH + "$", status=403,
                    message='nodefeatures.nfd.k8s-sigs.io is forbidden: User "system:serviceaccount:'
                            'gpu-operator:gfd" cannot create resource "nodefeatures"')
    p = run_nf(gp, fakekube)
    assert p.returncode == 1
    assert "forbidden" in p.stderr
    assert "needs get, create and update on nodefeatures.nfd.k8s-sigs.io" in p.stderr


def test_nodefeature_needs_a_node_name(gp, fakekube):
    p = gp.run("discover", "--mock", "dgx-h100", "--oneshot", "--kubeconfig", fakekube.kubeconfig)
    assert p.returncode == 1
    assert "--node-name" in p.stderr


# ---- the device plugin's example configs, shared with discover ----

def expected_share(cfg, resource):
    """(replicas, strategy, renamed) of resource by the config's sharing section (mps first, as both
    daemons read it), or (1, "none", False)."""
    sharing = cfg.get("sharing") or {}
    for key, strategy in (("mps", "mps"), ("timeSlicing", "time-slicing")):
        section = sharing.get(key)
        if not section:
            continue
        for r in section.get("resources", []):
            name = r["name"] if "/" in r["name"] else "nvidia.com/" + r["name"]
            if name != resource:
                continue
            per_device = [d["replicas"] for d in r.get("devices", []) if isinstance(d, dict)]
            replicas = max([r.get("replicas", 0)] + per_device)
            renamed = "rename" in r or bool(section.get("renameByDefault"))
            return replicas, strategy if replicas > 1 else "none", renamed
        return 1, "none", False
    return 1, "none", False


def check_sharing(labels, prefix, share):
    replicas, strategy, renamed = share
    assert labels[f"{prefix}.replicas"] == str(replicas)
    assert labels[f"{prefix}.sharing-strategy"] == strategy
    assert labels[f"{prefix}.product"].endswith("-SHARED") == (replicas > 1 and not renamed)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples" / "device-plugin").glob("*.yaml")))
def test_device_plugin_example_configs(gp, example):
    import yaml
    path = ROOT / "examples" / "device-plugin" / example
    cfg = yaml.safe_load(path.read_text())
    mig = (cfg.get("flags") or {}).get("migStrategy", "none")
    profile = "a100-mig" if mig == "mixed" else "dgx-h100"
    labels = print_labels(gp, profile, "--config-file", path, "--no-timestamp")
    check_sharing(labels, "nvidia.com/gpu", expected_share(cfg, "nvidia.com/gpu"))
    if mig == "mixed":
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        profiles = {k[len("nvidia.com/mig-"):-len(".count")] for k in labels
                    if k.startswith("nvidia.com/mig-") and k.endswith(".count")}
        assert profiles, labels
        for p in profiles:
            check_sharing(labels, f"nvidia.com/mig-{p}", expected_share(cfg, f"nvidia.com/mig-{p}"))


def test_example_manifests_are_valid(gp, tmp_path):
    import yaml
    import openapi_schema
    docs = list(yaml.safe_load_all((ROOT / "examples" / "discover" / "gpu-feature-discovery.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "DaemonSet"]
    for d in docs:
        errors = list(openapi_schema.api_validator(d["apiVersion"], d["kind"]).iter_errors(d))
        assert not errors, (d["kind"], [e.message for e in errors])
    # the config map's config is one discover takes
    cfg = tmp_path / "config.yaml"
    cfg.write_text(docs[3]["data"]["config.yaml"])
    labels = print_labels(gp, "dgx-h100", "--config-file", cfg)
    assert labels["nvidia.com/mig.strategy"] == "single"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    rules = docs[1]["rules"]
    assert {"get", "create", "update"} <= set(rules[0]["verbs"]) and rules[0]["resources"] == ["nodefeatures"]
