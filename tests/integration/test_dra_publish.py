# SPDX-License-Identifier: Apache-2.0
"""The ResourceSlice publisher (src/draplugin/dra-publish.c) against the fake API server.

tests/dra-publish-probe runs dra_publish steps for a mock node profile (see its header). Checked:
the slices land as dra_slices_build makes them (the server validates every body against the
OpenAPI schema); a restart with nothing changed writes nothing and keeps the generation; a health
change taints the device and bumps the generation; slices of this node and driver that are not
wanted are deleted and others left alone; a slice edited behind the driver's back is restored
with a higher generation, also through a 409 Conflict; failures are retried with back-off.
"""
import json
import os
import pathlib
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODES = ROOT / "examples" / "nodes"
BUILD = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build"))
PROBE = BUILD / "tests" / "dra-publish-probe"
DUMP = BUILD / "tests" / "dra-slices-dump"
NODE = "dgx-h100-0"
SLICE = f"{NODE}-gpu.nvidia.com-0"


@pytest.fixture(scope="module")
def probe_tool():
    if not PROBE.exists():
        pytest.skip(f"{PROBE} is not built (a build with the mock NVML library)")
    return PROBE


def publish(fk, *steps, linger_ms=0, profile="dgx-h100", timeout=60):
    """Runs the probe; returns (step lines, final generation, stderr)."""
    p = subprocess.run([str(PROBE), str(fk.kubeconfig), str(NODES / f"{profile}.yaml"), NODE, "/nonexistent",
                        str(linger_ms), *steps], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    return lines[:-1], lines[-1]["generation"], p.stderr


def slices(fk):
    return [s for s in fk.objects("resourceslices") if s["spec"]["nodeName"] == NODE]


def writes(fk):
    return [r for r in fk.requests() if r["method"] in ("POST", "PUT", "PATCH", "DELETE")]


def spec_without_times(s):
    spec = json.loads(json.dumps(s["spec"]))
    for d in spec.get("devices", []):
        for t in d.get("taints", []):
            t.pop("timeAdded", None)
    return spec


def wanted(*unhealthy, generation=1):
    p = subprocess.run([str(DUMP), str(NODES / "dgx-h100.yaml"), NODE, "/nonexistent", *map(str, unhealthy)],
                       capture_output=True, text=True, check=True, timeout=60)
    out = json.loads(p.stdout)
    for s in out:
        s["spec"]["pool"]["generation"] = generation
    return out


def test_first_publish_and_restart(fakekube, probe_tool):
    steps, gen, _ = publish(fakekube, "-")
    assert steps == [{"step": 0, "result": 0, "generation": 1}] and gen == 1
    got = slices(fakekube)
    assert [s["metadata"]["name"] for s in got] == [SLICE]
    assert spec_without_times(got[0]) == wanted()[0]["spec"]
    assert [r["method"] for r in writes(fakekube)] == ["POST"]
    lists = fakekube.requests(method="GET", path="/apis/resource.k8s.io/v1/resourceslices$")
    assert lists and lists[0]["query"]["fieldSelector"] == [f"spec.nodeName={NODE},spec.driver=gpu.nvidia.com"]

    # a restart with the same devices: adopted as they are, nothing written
    rv = got[0]["metadata"]["resourceVersion"]
    steps, gen, _ = publish(fakekube, "-")
    assert steps[0]["result"] == 0 and gen == 1
    assert [r["method"] for r in writes(fakekube)] == ["POST"]
    assert slices(fakekube)[0]["metadata"]["resourceVersion"] == rv


def test_health_change_bumps_the_generation(fakekube, probe_tool):
    steps, gen, _ = publish(fakekube, "-", "1", "1", "-")
    assert [(s["result"], s["generation"]) for s in steps] == [(0, 1), (0, 2), (0, 2), (0, 3)]
    assert gen == 3
    # create, taint (update), nothing, untaint (update)
    assert [r["method"] for r in writes(fakekube)] == ["POST", "PUT", "PUT"]
    assert spec_without_times(slices(fakekube)[0]) == wanted(generation=3)[0]["spec"]


def test_taint_is_published(fakekube, probe_tool):
    steps, gen, _ = publish(fakekube, "2,5")
    assert steps[0]["result"] == 0
    devices = slices(fakekube)[0]["spec"]["devices"]
    tainted = {d["name"]: d["taints"] for d in devices if d.get("taints")}
    assert set(tainted) == {"gpu-2", "gpu-5"}
    for taints in tainted.values():
        assert [(t["key"], t["effect"]) for t in taints] == [("gpu.nvidia.com/unhealthy", "NoSchedule")]
    # the real API server stamps timeAdded on taints written without one
    stored = fakekube.get("resourceslices", SLICE)
    for d in stored["spec"]["devices"]:
        for t in d.get("taints", []):
            t["timeAdded"] = f"2026-01-0{d['name'][-1]}T00:00:00Z"
    fakekube.put(stored)
    # restarted while still unhealthy: nothing to write
    before = len(writes(fakekube))
    steps, gen2, _ = publish(fakekube, "2,5")
    assert steps[0]["result"] == 0 and gen2 == gen
    assert len(writes(fakekube)) == before
    # gpu-5 recovers: gpu-2's taint keeps the time it was added
    steps, gen3, _ = publish(fakekube, "2")
    assert steps[0]["result"] == 0 and gen3 == gen + 1
    devices = {d["name"]: d for d in fakekube.get("resourceslices", SLICE)["spec"]["devices"]}
    assert devices["gpu-2"]["taints"][0]["timeAdded"] == "2026-01-02T00:00:00Z"
    assert "taints" not in devices["gpu-5"]


def test_unwanted_slices_are_deleted_others_kept(fakekube, probe_tool):
    stale = wanted()[0]
    stale["metadata"]["name"] = f"{NODE}-gpu.nvidia.com-7"
    stale["spec"]["pool"]["generation"] = 4
    fakekube.put(stale)
    other = wanted()[0]
    other["metadata"]["name"] = "other-node-gpu.nvidia.com-0"
    other["spec"]["nodeName"] = other["spec"]["pool"]["name"] = "other-node"
    fakekube.put(other)
    foreign = wanted()[0]
    foreign["metadata"]["name"] = f"{NODE}-example.com-0"
    foreign["spec"]["driver"] = "example.com"
    fakekube.put(foreign)

    steps, gen, _ = publish(fakekube, "-")
    assert steps[0]["result"] == 0
    assert gen == 5, "above the highest generation seen"
    names = sorted(s["metadata"]["name"] for s in fakekube.objects("resourceslices"))
    assert names == sorted([SLICE, "other-node-gpu.nvidia.com-0", f"{NODE}-example.com-0"])
    ours = fakekube.get("resourceslices", SLICE)
    assert ours["spec"]["pool"] == {"name": NODE, "generation": 5, "resourceSliceCount": 1}


def test_edited_slice_is_restored_through_a_conflict(fakekube, probe_tool):
    publish(fakekube, "-")
    s = fakekube.get("resourceslices", SLICE)
    s["spec"]["devices"][0]["attributes"]["productName"] = {"string": "tampered"}
    fakekube.put(s)
    fakekube.inject(method="PUT", path=f".*/resourceslices/{SLICE}", status=409, count=1)
    steps, gen, _ = publish(fakekube, "-")
    assert steps[0]["result"] == 0 and gen == 2
    assert spec_without_times(fakekube.get("resourceslices", SLICE)) == wanted(generation=2)[0]["spec"]
    puts = [r["status"] for r in fakekube.requests(method="PUT")]
    assert puts == [409, 200]


def test_failures_are_retried_with_backoff(fakekube, probe_tool):
    fakekube.inject(method="GET", path="/apis/resource.k8s.io/v1/resourceslices", status=500, count=2)
    start = time.monotonic()
    steps, gen, err = publish(fakekube, "-", linger_ms=6000)
    assert steps[0]["result"] < 0, "the first run failed and says so"
    assert "will retry" in err
    assert gen == 1
    assert [s["metadata"]["name"] for s in slices(fakekube)] == [SLICE]
    lists = [r for r in fakekube.requests(method="GET", path="/resourceslices$")]
    assert [r["status"] for r in lists] == [500, 500, 200]
    assert time.monotonic() - start >= 3.0, "1 s, then 2 s of back-off"
