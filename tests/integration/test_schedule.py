# SPDX-License-Identifier: Apache-2.0
"""gpuplane schedule: the DRA scheduling simulator through the binary. A small cluster of three
nodes (n1, n2 with a device of driver a, n3 with a device of driver b), pods with template claims:
ties go to the first node by name, earlier firstAvailable sub-requests win, allocations are
committed for later pods, an unschedulable pod with per-node reason counts; the output forms,
--stats, --help and usage errors."""
import json
import pathlib
import subprocess
import sys

import yaml

CLUSTER = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: a}
spec:
  selectors: [{cel: {expression: 'device.driver == "a"'}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: b}
spec:
  selectors: [{cel: {expression: 'device.driver == "b"'}}]
---
{apiVersion: v1, kind: Node, metadata: {name: n3}}
---
{apiVersion: v1, kind: Node, metadata: {name: n2}}
---
{apiVersion: v1, kind: Node, metadata: {name: n1}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1}
spec: {driver: a, pool: {name: n1, generation: 1, resourceSliceCount: 1}, nodeName: n1, devices: [{name: g0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s2}
spec: {driver: a, pool: {name: n2, generation: 1, resourceSliceCount: 1}, nodeName: n2, devices: [{name: g0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s3}
spec: {driver: b, pool: {name: n3, generation: 1, resourceSliceCount: 1}, nodeName: n3, devices: [{name: g0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-a, namespace: default}
spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: a}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: prefer-b, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: r
        firstAvailable: [{name: b, deviceClassName: b}, {name: a, deviceClassName: a}]
"""


def pod(name, template):
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]
"""


PODS = pod("p1", "one-a") + pod("p2", "prefer-b") + pod("p3", "one-a") + pod("p4", "one-a")


def run(gp, *args, stdin=CLUSTER + PODS):
    return subprocess.run([str(gp.binary), "schedule", *args, "-f", "-"], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_json_shape_and_placement(gp):
    p = run(gp, "-o", "json")
    assert p.returncode == 1, p.stderr  # p4 is unschedulable
    out = json.loads(p.stdout)
    assert out["summary"] == {"pods": 4, "scheduled": 3, "unschedulable": 1}
    pods = {x["pod"]: x for x in out["pods"]}
    assert [x["pod"] for x in out["pods"]] == ["default/p1", "default/p2", "default/p3",
                                               "default/p4"]
    assert set(out["pods"][0]) == {"pod", "node", "score", "devices", "reasons"}
    assert pods["default/p1"]["node"] == "n1"  # tie between n1 and n2: the first by name
    assert pods["default/p1"]["devices"] == ["p1-gpu/r=a/n1/g0"]
    assert pods["default/p2"]["node"] == "n3"  # its first sub-request scores higher
    assert pods["default/p2"]["score"] == 1
    assert pods["default/p2"]["devices"] == ["p2-gpu/r/b=b/n3/g0"]
    assert pods["default/p3"]["node"] == "n2"  # n1's device went to p1
    p4 = pods["default/p4"]
    assert p4["node"] is None and p4["devices"] == []
    assert sorted(p4["reasons"].values()) == [1, 2]
    assert all("on node" not in k for k in p4["reasons"])


def test_all_schedulable_exit_0(gp):
    p = run(gp, stdin=CLUSTER + pod("p1", "one-a"))
    assert p.returncode == 0, p.stderr
    assert "default/p1" in p.stdout and "scheduled 1 of 1 pods" in p.stdout


def test_table(gp):
    p = run(gp)
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0].split()[:3] == ["POD", "NODE", "SCORE"]
    assert lines[4].split()[:2] == ["default/p4", "<none>"]
    assert "2 node(s): cannot allocate all claims" in lines[4]
    assert "scheduled 3 of 4 pods, 1 unschedulable" in p.stdout


def test_yaml_equals_json(gp):
    assert yaml.safe_load(run(gp, "-o", "yaml").stdout) == json.loads(run(gp, "-o", "json").stdout)


def test_stats(gp):
    p = run(gp, "--stats", "-o", "json")
    assert p.returncode == 1
    assert "pods/s" in p.stderr and "filter" in p.stderr and "commit" in p.stderr
    assert "12 node evaluations, 10 allocator runs" in p.stderr
    json.loads(p.stdout)


def test_unknown_template(gp):
    p = run(gp, stdin=CLUSTER + pod("p1", "nope"))
    assert p.returncode == 2
    assert "ResourceClaimTemplate default/nope not found" in p.stderr


def test_help(gp):
    p = gp.run("schedule", "--help")
    assert p.returncode == 0 and p.stdout.startswith("Usage: gpuplane schedule")
    assert "schedule" in gp.run("help").stdout


def test_usage_errors(gp):
    assert gp.run("schedule").returncode == 2
    assert gp.run("schedule", "-o", "xml", "-f", "x").returncode == 2
    assert gp.run("schedule", "-f", "x", "extra").returncode == 2
    assert gp.run("schedule", "--bogus").returncode == 2
    assert gp.run("schedule", "--budget", "0", "-f", "x").returncode == 2


def test_budget(gp):
    p = run(gp, "--budget", "1000", "-o", "json")
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["summary"]["scheduled"] == 3


def test_bench_gen_input(gp, tmp_path):
    """bench/dra/gen.py's cluster and workload (named claims): 2 nodes of 8 GPUs, 16 single-GPU
    pods fill both nodes, node-00000 first; a 17th would not fit."""
    gen = pathlib.Path(__file__).resolve().parents[2] / "bench" / "dra" / "gen.py"
    subprocess.run([sys.executable, str(gen), "--out", str(tmp_path), "--nodes", "2", "--pods",
                    "16"], check=True, capture_output=True)
    p = gp.run("schedule", "-o", "json", "-f", tmp_path / "cluster.yaml", "-f",
               tmp_path / "workload.yaml")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["summary"] == {"pods": 16, "scheduled": 16, "unschedulable": 0}
    assert [x["node"] for x in out["pods"]] == ["node-00000"] * 8 + ["node-00001"] * 8
    devices = [d.split("=")[1] for x in out["pods"] for d in x["devices"]]
    assert len(set(devices)) == 16


EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "dra"


def test_node_filters_example(gp):
    """examples/dra/schedule-node-filters.yaml: a tainted, labelled DGX and a T4 node; pods with
    node selectors, affinity and tolerations land where the scheduler's node filters allow."""
    p = gp.run("schedule", "-o", "json", *[a for f in ("deviceclasses.yaml",
               "slices-dgx-h100-0.yaml", "slices-pcie-t4-0.yaml", "schedule-node-filters.yaml")
               for a in ("-f", EXAMPLES / f)])
    assert p.returncode == 1, p.stderr
    pods = {x["pod"].split("/")[1]: x for x in json.loads(p.stdout)["pods"]}
    assert {k: v["node"] for k, v in pods.items()} == {
        "plain": "pcie-t4-0", "trainer": "dgx-h100-0", "trainer-no-toleration": None,
        "inference": "pcie-t4-0", "anywhere": "dgx-h100-0", "big-memory": "dgx-h100-0"}
    assert pods["trainer-no-toleration"]["reasons"] == {
        "node(s) had untolerated taint {dedicated: training}": 1,
        "node(s) didn't match Pod's node affinity/selector": 1}
    assert pods["big-memory"]["devices"] == [
        "big-memory-gpu/gpu=gpu.nvidia.com/dgx-h100-0/gpu-2"]


def test_fill_invariants(gp, tmp_path):
    """A mixed workload larger than the cluster (reused outcomes, commits on every node): no
    device is given twice, every device is on the pod's node, 4-GPU pods share an NVLink domain,
    and the cluster ends full for single-GPU pods."""
    gen = pathlib.Path(__file__).resolve().parents[2] / "bench" / "dra" / "gen.py"
    subprocess.run([sys.executable, str(gen), "--out", str(tmp_path), "--nodes", "12",
                    "--workload", "mixed", "--mix", "single=0.6,nvlink4=0.4", "--pods", "60",
                    "--format", "json"], check=True, capture_output=True)
    p = gp.run("schedule", "-o", "json", "-f", tmp_path / "cluster.json", "-f",
               tmp_path / "workload.json")
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    cluster = json.loads((tmp_path / "cluster.json").read_text())
    domain = {(s["spec"]["pool"]["name"], d["name"]): d["attributes"]["gpuplane.dev/nvlinkDomain"]
              for s in cluster["items"] if s["kind"] == "ResourceSlice" for d in s["spec"]["devices"]}
    used = []
    for pod in out["pods"]:
        devs = [d.split("=")[1].split("/") for d in pod["devices"]]
        assert all(pool == pod["node"] for _, pool, _ in devs)
        used += [(pool, dev) for _, pool, dev in devs]
        if len(devs) == 4:
            assert len({domain[(pool, dev)]["string"] for _, pool, dev in devs}) == 1
    assert len(used) == len(set(used))
    assert len(used) == 96 or all(p["node"] for p in out["pods"])
    single_left = [p for p in out["pods"] if p["node"] is None and "single" in p["pod"]]
    assert not single_left or len(used) == 96


def test_allocated_claim_node_selector(gp):
    """A pod using a claim allocated before the run (on n2's device, node selector n2) can only go
    to n2, though n1 sorts first; its template claim is allocated there too (n2 has a second a
    device). Other nodes give the scheduler's reason."""
    extra = """
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s2b}
spec: {driver: a, pool: {name: n2b, generation: 1, resourceSliceCount: 1}, nodeName: n2, devices: [{name: g1}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: a}}]}}
status:
  allocation:
    devices: {results: [{request: r, driver: a, pool: n2, device: g0}]}
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n2]}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: user, namespace: default}
spec:
  resourceClaims: [{name: s, resourceClaimName: shared}, {name: gpu, resourceClaimTemplateName: one-a}]
"""
    p = run(gp, "-o", "json", stdin=CLUSTER + extra)
    assert p.returncode == 0, p.stderr
    (pod,) = json.loads(p.stdout)["pods"]
    assert pod["node"] == "n2"
    assert pod["devices"] == ["user-gpu/r=a/n2b/g1"]
    assert pod["reasons"] == {"resourceclaim not available on the node": 2}
