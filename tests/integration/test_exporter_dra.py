# SPDX-License-Identifier: Apache-2.0
"""`gpuplane exporter -k --kubernetes-enable-dra` on the mock a100-mig node: the pod-resources
emulator reports DRA claim results of gpu.nvidia.com (a full GPU, a MIG device, a compute instance's
MIG device) and fakekube serves the ResourceSlices gpuplane's own DRA driver publishes for that node
(tests/dra-slices-dump, checked against the official v1 schema), among slices of another node and
another driver. Each claimed device's series gets the dra_* labels, a MIG device's GPU instance
also dra_mig_profile and dra_mig_device_uuid; only the node's gpu.nvidia.com slices are listed;
slices removed take the labels away and slices put back bring them again; promtool parses the
pages; without an API server the exporter says so and the series stay, unlabelled."""
import json
import subprocess

import pytest

from conftest import BUILD, NODES
from test_exporter import wait_until
from test_exporter_podmeta import check_page, exporters, kubelet, parse_labels, sample_lines  # noqa: F401

T = 20.0
NODE = "gpu-node-1"  # Exporter's NODE_NAME
DUMP = BUILD / "tests" / "dra-slices-dump"


def driver_slices(node, profile="a100-mig"):
    """The ResourceSlices gpuplane's DRA driver publishes for the node on the mock profile, each
    one valid against the official resource.k8s.io/v1 schema, as the API server would check it."""
    import openapi_schema
    if not DUMP.exists():
        pytest.skip(f"{DUMP} is not built")
    p = subprocess.run([str(DUMP), str(NODES / f"{profile}.yaml"), node, "/nonexistent"],
                       capture_output=True, text=True, check=True, timeout=60)
    slices = json.loads(p.stdout)
    v = openapi_schema.validator(openapi_schema.load_components(), "ResourceSlice")
    for s in slices:
        assert not list(v.iter_errors(s)), list(v.iter_errors(s))
    return slices


def mig(gp, gpu, profile):
    """(MIG UUID, GPU instance id) of the GPU's first MIG device with that profile."""
    info = gp.json("info", "--mock", "a100-mig", "--json")
    m = next(m for m in info["gpus"][gpu]["migDevices"] if m["profile"] == profile)
    return m["uuid"], str(m["giId"])


def device_name(slices, uuid):
    for s in slices:
        for d in s["spec"]["devices"]:
            if d["attributes"]["uuid"]["string"] == uuid:
                return d["name"]
    raise KeyError(uuid)


def claim(name, device, driver="gpu.nvidia.com", pool=NODE):
    return {"name": name, "namespace": "ml", "driver": driver, "pool": pool, "device": device}


def series_of(e, metric="DCGM_FI_DEV_FB_USED"):
    """{(gpu, GPU_I_ID or None): [labels dict, ...]} of a fresh scrape."""
    out = {}
    text = e.scrape()[1]
    for line in sample_lines(text, metric):
        d = dict(parse_labels(line))
        out.setdefault((d["gpu"], d.get("GPU_I_ID")), []).append(d)
    return out


def start(exporters, kubelet, *args, env=None):  # noqa: F811
    return exporters("--mock", "a100-mig", "-c", "200", "-k", "--kubernetes-enable-dra",
                     "--pod-resources-kubelet-socket", kubelet.socket, *args, env=env)


def test_claims_labelled_through_the_slices(gp, fakekube, kubelet, exporters):  # noqa: F811
    slices = driver_slices(NODE)
    for s in slices + driver_slices("gpu-node-2"):
        fakekube.put(s)
    other = json.loads(json.dumps(slices[0]))
    other["metadata"]["name"] = f"{NODE}-other"
    other["spec"]["driver"] = "other.example.com"
    fakekube.put(other)
    gpu2 = gp.json("info", "--mock", "a100-mig", "--json")["gpus"][2]["uuid"]
    mig_uuid, mig_gi = mig(gp, 0, "1g.5gb")
    ci_uuid, ci_gi = mig(gp, 1, "2c.3g.20gb")
    kubelet.set_pod("ml", "trainer", {"main": {"claims": [claim("gpus", device_name(slices, gpu2))]}})
    kubelet.set_pod("ml", "small", {"main": {"claims": [claim("slice", device_name(slices, mig_uuid))]}})
    kubelet.set_pod("ml", "split", {"main": {"claims": [claim("ci", device_name(slices, ci_uuid))]}})
    # a claim of another driver, and one the slices do not have: no labels
    kubelet.set_pod("ml", "net", {"main": {"claims": [claim("nic", "gpu-3", driver="nic.example.com")]}})
    kubelet.set_pod("ml", "ghost", {"main": {"claims": [claim("ghost", "gpu-9")]}})
    e = start(exporters, kubelet, env={"KUBECONFIG": str(fakekube.kubeconfig)})

    got = wait_until(lambda: (s := series_of(e)) and all(
        any("dra_claim_name" in d for d in s.get(k, [])) for k in
        (("2", None), ("0", mig_gi), ("1", ci_gi))) and s, T, "the three claims' labels")
    d = got[("2", None)][0]
    assert (d["pod"], d["namespace"], d["container"]) == ("trainer", "ml", "main")
    assert d["dra_claim_name"] == "gpus" and d["dra_claim_namespace"] == "ml"
    assert d["dra_driver_name"] == "gpu.nvidia.com" and d["dra_pool_name"] == NODE
    assert d["dra_device_name"] == "gpu-2" and "dra_mig_profile" not in d
    d = got[("0", mig_gi)][0]
    assert d["pod"] == "small" and d["GPU_I_PROFILE"] == "1g.5gb"
    assert d["dra_mig_profile"] == "1g.5gb" and d["dra_mig_device_uuid"] == mig_uuid
    d = got[("1", ci_gi)][0]
    assert d["pod"] == "split" and d["dra_mig_profile"] == "2c.3g.20gb"
    assert d["dra_mig_device_uuid"] == ci_uuid
    assert all(len(v) == 1 for v in got.values())  # one series per device, nobody else labelled
    assert sum("pod" in v[0] for v in got.values()) == 3
    check_page(e.scrape()[1])
    # only this node's slices of gpu.nvidia.com are listed and watched
    lists = fakekube.requests("GET", r"^/apis/resource.k8s.io/v1/resourceslices$")
    assert lists and all(r["query"]["fieldSelector"] == [f"spec.driver=gpu.nvidia.com,spec.nodeName={NODE}"]
                         for r in lists), lists
    assert '"watching ResourceSlices for DRA devices"' in e.log()
    assert '"ResourceSlices listed on the API server: DRA devices available"' in e.log()

    # the slices go: so do the labels, not the series
    for s in slices:
        fakekube.remove("resourceslices", s["metadata"]["name"])
    got = wait_until(lambda: (s := series_of(e)) and not any("pod" in d for v in s.values() for d in v) and s,
                     T, "the labels to go")
    assert len(got) == 8
    # published again: back
    for s in slices:
        fakekube.put(s)
    wait_until(lambda: any("dra_mig_profile" in d for d in series_of(e).get(("0", mig_gi), [])), T,
               "the labels back")
    assert e.proc.poll() is None


def test_labels_sorted_and_promtool_clean(gp, fakekube, kubelet, exporters):  # noqa: F811
    slices = driver_slices(NODE)
    for s in slices:
        fakekube.put(s)
    mig_uuid, mig_gi = mig(gp, 0, "3g.20gb")
    kubelet.set_pod("ml", "p", {"main": {"claims": [claim("c", device_name(slices, mig_uuid))]}})
    e = start(exporters, kubelet, "--kubernetes-enable-pod-uid", env={"KUBECONFIG": str(fakekube.kubeconfig)})
    line = wait_until(lambda: next((l for l in sample_lines(e.scrape()[1], "DCGM_FI_DEV_FB_USED")
                                    if "dra_mig_profile" in l), None), T, "the MIG claim")
    names = [k for k, _ in parse_labels(line)]
    attrs = names[names.index("container"):]
    assert attrs == sorted(attrs) == ["container", "dra_claim_name", "dra_claim_namespace", "dra_device_name",
                                      "dra_driver_name", "dra_mig_device_uuid", "dra_mig_profile",
                                      "dra_pool_name", "namespace", "pod"], attrs
    check_page(e.scrape()[1])


def test_no_api_server(gp, kubelet, exporters):  # noqa: F811
    """Without an API server configuration the claims cannot be resolved: a warning, the series
    stay, without DRA labels (no shortcut from device names)."""
    kubelet.set_pod("ml", "trainer", {"main": {"claims": [claim("gpus", "gpu-2")]}})
    e = start(exporters, kubelet)
    wait_until(lambda: kubelet.calls["List"] >= 2, T, "the kubelet to be asked")
    assert "no API server to read the ResourceSlices from: DRA labels will not be available" in e.log()
    got = series_of(e)
    assert len(got) == 8 and not any("pod" in d for v in got.values() for d in v)
    assert e.proc.poll() is None
