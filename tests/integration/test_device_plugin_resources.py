# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` resources and ids (issue items 3 and 4): nvidia.com/gpu, MIG strategies on
the a100-mig profile, time-slicing replicas, renameByDefault, failRequestsGreaterThanOne, rename,
per-GPU replicas; ListAndWatch snapshots with the profile's NUMA nodes and their update latency."""
import grpc
import pytest

from dp_harness import (A100, GPU, H100, H100_NUMA, MIG0, MIG1, T, T4, clean_env, plugin,  # noqa: F401
                        rpc_error, snapshot)

MIXED = {
    "nvidia.com/gpu": [A100[2], A100[3]],
    "nvidia.com/mig-1g.5gb": [MIG0["1g.5gb-a"], MIG0["1g.5gb-b"]],
    "nvidia.com/mig-2g.10gb": [MIG0["2g.10gb"]],
    "nvidia.com/mig-3g.20gb": [MIG0["3g.20gb"], MIG1["3g.20gb"]],
}

# Two A100s, each split into two 3g.20gb MIG devices: a node the single strategy accepts.
SINGLE_PROFILE = """
defaults:
  name: "NVIDIA A100-SXM4-40GB"
  architecture: ampere
  computeCapability: "8.0"
  memory: 40960
gpus:
  - busId: "0000:07:00.0"
    numa: 0
    mig: {capable: true, enabled: true, instances: [{profile: 3g.20gb}, {profile: 3g.20gb}]}
  - busId: "0000:0f:00.0"
    numa: 1
    mig: {capable: true, enabled: true, instances: [{profile: 3g.20gb}, {profile: 3g.20gb}]}
"""


def slicing(replicas=4, rename_by_default=False, fail_gt1=False, extra=""):
    return (f"version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: {str(rename_by_default).lower()}\n"
            f"    failRequestsGreaterThanOne: {str(fail_gt1).lower()}\n    resources:\n"
            f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n{extra}")


def test_full_gpus_with_numa_from_the_profile(plugin):
    p = plugin()
    devs = p.kubelet.devices(GPU)
    assert [d.id for d in devs] == H100
    assert [d.numa for d in devs] == [(n,) for n in H100_NUMA]
    assert all(d.health == "Healthy" for d in devs)
    assert p.kubelet.resources() == [GPU]


def test_pcie_t4(plugin):
    p = plugin(profile="pcie-t4")
    assert snapshot(p.kubelet) == {u: ("Healthy", (n,)) for u, n in zip(T4, [0, 0, 1, 1])}


def test_mig_mixed_on_a100(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed"], wait=list(MIXED))
    k = p.kubelet
    assert k.resources() == sorted(MIXED)
    for res, ids in MIXED.items():
        assert sorted(d.id for d in k.devices(res)) == sorted(ids), res
    # MIG devices carry their parent's NUMA node; 1c/2c.3g.20gb (CI smaller than GI) are not advertised.
    assert all(d.numa == (0,) for r in MIXED if "mig" in r for d in k.devices(r))
    assert all(d.numa == (1,) for d in k.devices(GPU))
    every = {d.id for r in k.resources() for d in k.devices(r)}
    assert MIG1["1c.3g.20gb"] not in every and A100[0] not in every and A100[1] not in every
    # One socket per resource, named after it.
    assert k.endpoint("nvidia.com/mig-1g.5gb").endswith("/nvidia-mig-1g.5gb.sock")
    a = k.allocate("nvidia.com/mig-2g.10gb", 1)
    assert a.response["envs"]["NVIDIA_VISIBLE_DEVICES"] == MIG0["2g.10gb"]


def test_mig_mixed_from_the_example_config(plugin):
    """examples/device-plugin/mig-mixed.yaml: time-sliced mig-1g.10gb does not exist on an A100 40GB
    (1g.5gb there), mig-2g.20gb neither; the plain MIG resources are advertised."""
    from dp_harness import ROOT
    p = plugin(profile="a100-mig", config=(ROOT / "examples/device-plugin/mig-mixed.yaml").read_text(), root=True,
               wait=list(MIXED))
    assert p.kubelet.capacity("nvidia.com/mig-3g.20gb") == 2


def test_mig_single_refuses_a_mixed_node(gp, tmp_path):
    p = gp.run("device-plugin", "--mock", "a100-mig", "--mig-strategy=single", "--kubelet-socket",
               tmp_path / "kubelet.sock", env=clean_env(), timeout=T)
    assert p.returncode == 1
    assert "GPU 2 has MIG disabled while others have it enabled" in p.stderr


def test_mig_single(plugin, tmp_path):
    profile = tmp_path / "single.yaml"
    profile.write_text(SINGLE_PROFILE)
    p = plugin(profile=str(profile), args=["--mig-strategy", "single"])
    devs = p.kubelet.devices(GPU)
    assert len(devs) == 4 and all(d.id.startswith("MIG-") for d in devs)
    assert sorted(d.numa for d in devs) == [(0,), (0,), (1,), (1,)]
    a = p.kubelet.allocate(GPU, 1)
    assert a.response["envs"]["NVIDIA_VISIBLE_DEVICES"].startswith("MIG-")


def test_mig_none_shows_full_gpus(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=none"])
    assert [d.id for d in p.kubelet.devices(GPU)] == A100


def test_time_slicing_replicas(plugin):
    p = plugin(config=slicing(4))
    k = p.kubelet
    devs = k.devices(GPU)
    assert len(devs) == 32 and k.allocatable(GPU) == 32
    assert [d.id for d in devs] == [f"{u}::{r}" for u in H100 for r in range(4)]
    assert [d.numa for d in devs] == [(n,) for n in H100_NUMA for _ in range(4)]
    # Two replicas of one GPU in one container: one UUID in the response (NVIDIA's de-duplication).
    r = p.allocate([f"{H100[2]}::0", f"{H100[2]}::3"]).container_responses[0]
    assert r.envs["NVIDIA_VISIBLE_DEVICES"] == H100[2]
    a = k.allocate(GPU, 3)
    assert all("::" in i for i in a.device_ids)


def test_rename_by_default_and_fail_requests_greater_than_one(plugin):
    from dp_harness import ROOT
    p = plugin(config=(ROOT / "examples/device-plugin/time-slicing.yaml").read_text(), wait=("nvidia.com/gpu.shared",))
    k = p.kubelet
    assert k.resources() == ["nvidia.com/gpu.shared"] and k.capacity("nvidia.com/gpu.shared") == 32
    assert k.endpoint("nvidia.com/gpu.shared").endswith("/nvidia-gpu.shared.sock")
    one = k.allocate("nvidia.com/gpu.shared", 1)
    assert one.response["envs"]["NVIDIA_VISIBLE_DEVICES"] == one.device_ids[0].split("::")[0]
    err = rpc_error(p.allocate, [f"{H100[0]}::0", f"{H100[1]}::0"], resource="nvidia.com/gpu.shared")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "maximum request size for shared resources is 1; found 2" in err.details()
    with pytest.raises(Exception) as e:
        k.allocate("nvidia.com/gpu.shared", 2)
    assert "maximum request size for shared resources is 1" in str(e.value)


def test_more_than_one_replica_allowed_by_default(plugin):
    p = plugin(config=slicing(2))
    r = p.allocate([f"{H100[0]}::0", f"{H100[1]}::1"]).container_responses[0]
    assert r.envs["NVIDIA_VISIBLE_DEVICES"] == f"{H100[0]},{H100[1]}"


def test_per_resource_rename_wins_over_rename_by_default(plugin):
    p = plugin(config=slicing(2, rename_by_default=True, extra="      rename: nvidia.com/gpu-slice\n"),
               wait=("nvidia.com/gpu-slice",))
    k = p.kubelet
    assert k.resources() == ["nvidia.com/gpu-slice"] and k.capacity("nvidia.com/gpu-slice") == 16
    assert k.endpoint("nvidia.com/gpu-slice").endswith("/nvidia-gpu-slice.sock")


def test_per_gpu_replicas(plugin):
    extra = f"      devices:\n      - 0\n      - {{device: 1, replicas: 4}}\n      - {{device: {H100[7]}, replicas: 3}}\n" \
            "      rename: gpu-slice\n"
    p = plugin(config=slicing(2, extra=extra), wait=(GPU, "nvidia.com/gpu-slice"))
    k = p.kubelet
    sliced = [d.id for d in k.devices("nvidia.com/gpu-slice")]
    assert sliced == ([f"{H100[0]}::{r}" for r in range(2)] + [f"{H100[1]}::{r}" for r in range(4)]
                      + [f"{H100[7]}::{r}" for r in range(3)])
    # GPUs not listed stay whole under the plain resource.
    assert [d.id for d in k.devices(GPU)] == H100[2:7]


def test_resources_by_model_name(plugin):
    p = plugin(config='version: v1\nresources:\n  gpus:\n  - pattern: "*H100*"\n    name: h100\n',
               wait=("nvidia.com/h100",))
    assert p.kubelet.resources() == ["nvidia.com/h100"]
    assert [d.id for d in p.kubelet.devices("nvidia.com/h100")] == H100


def test_index_ids_in_allocate_only(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed", "--device-id-strategy=index"], wait=list(MIXED))
    k = p.kubelet
    assert sorted(d.id for d in k.devices("nvidia.com/mig-3g.20gb")) == sorted(MIXED["nvidia.com/mig-3g.20gb"])
    r = p.allocate([MIG1["3g.20gb"]], resource="nvidia.com/mig-3g.20gb").container_responses[0]
    assert r.envs["NVIDIA_VISIBLE_DEVICES"] == "1:0"
    r = p.allocate([A100[3]]).container_responses[0]
    assert r.envs["NVIDIA_VISIBLE_DEVICES"] == "3"


# ---- ListAndWatch ---------------------------------------------------------------------------------


def test_every_snapshot_is_complete_and_updates_are_fast(plugin):
    p = plugin(config="version: v1\nhealth:\n  probeInterval: 200ms\n  recoveryWindow: 0s\n")
    k = p.kubelet
    mark = k.mark()
    t0 = p.xid(6, 79)
    ev = k.wait_event("update", GPU, since=mark, predicate=lambda e: e.data["allocatable"] == 7, timeout=T)
    latency = ev.t - t0
    assert latency < 1.0, f"fault -> ListAndWatch update took {latency:.3f} s"
    assert ev.data["capacity"] == 8 and [d["id"] for d in ev.data["devices"]] == H100
    assert ev.data["unhealthy"] == [H100[6]]
    assert [d["numa"] for d in ev.data["devices"]] == [[n] for n in H100_NUMA]
    # A second ListAndWatch stream gets the current full snapshot at once.
    from dp_harness import pb
    stream = p.stub().ListAndWatch(pb.Empty(), timeout=T)
    first = next(stream)
    assert [d.ID for d in first.devices] == H100
    assert {d.ID: d.health for d in first.devices}[H100[6]] == "Unhealthy"
    stream.cancel()
    # Every later snapshot of the stream the kubelet holds is complete too.
    t1 = p.inject(2, "lost")
    ev = k.wait_event("update", GPU, since=mark, predicate=lambda e: e.data["allocatable"] == 6, timeout=T)
    assert ev.t - t1 < 1.0 + 0.2  # a lost GPU is found by the next probe (200 ms)
    assert len(ev.data["devices"]) == 8 and sorted(ev.data["unhealthy"]) == sorted([H100[2], H100[6]])
