# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` GetPreferredAllocation (issue item 7): NUMA-aligned choices on dgx-h100 and
pcie-t4, must_include, replicas (distributed / packed), MIG devices, odd requests."""
import pytest

from dp_harness import GPU, H100, H100_NUMA, MIG0, MIG1, T4, plugin  # noqa: F401

NUMA = dict(zip(H100, H100_NUMA))
T4_NUMA = dict(zip(T4, [0, 0, 1, 1]))
SWITCH_PAIRS = [{H100[0], H100[1]}, {H100[2], H100[3]}, {H100[4], H100[5]}, {H100[6], H100[7]}]


def replicas(n, policy=None):
    flags = f"flags:\n  plugin:\n    sharedDevicesAllocationPolicy: {policy}\n" if policy else ""
    return f"version: v1\n{flags}sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: {n}\n"


def test_four_of_eight_on_one_numa_node(plugin):
    p = plugin()
    got = p.preferred(H100, 4)
    assert len(set(got)) == 4 and len({NUMA[i] for i in got}) == 1, got
    # The same through the kubelet's admission: no issues, the plugin's answer is used as is.
    a = p.kubelet.allocate(GPU, 4, pod="a")
    assert a.preferred_issues == [] and a.device_ids == a.preferred_answer
    assert len({NUMA[i] for i in a.device_ids}) == 1
    # The second pod of 4 gets the other NUMA node.
    b = p.kubelet.allocate(GPU, 4, pod="b")
    assert {NUMA[i] for i in b.device_ids} == {1 - NUMA[a.device_ids[0]]}


@pytest.mark.parametrize("order", [H100, list(reversed(H100)), H100[::2] + H100[1::2]])
def test_four_of_eight_any_candidate_order(plugin, order):
    p = plugin()
    got = p.preferred(order, 4)
    assert len({NUMA[i] for i in got}) == 1


def test_two_of_eight_share_a_pcie_switch(plugin):
    p = plugin()
    assert set(p.preferred(H100, 2)) in SWITCH_PAIRS


def test_unhealthy_gpu_moves_four_to_the_other_node(plugin):
    p = plugin()
    p.xid(1, 79)
    p.kubelet.wait_for(lambda: p.kubelet.allocatable(GPU) == 7)
    a = p.kubelet.allocate(GPU, 4)
    assert sorted(a.device_ids) == sorted(H100[4:]) and a.preferred_issues == []


def test_must_include_honoured(plugin):
    p = plugin()
    got = p.preferred(H100, 4, must=[H100[5]])
    assert H100[5] in got and len(set(got)) == 4 and {NUMA[i] for i in got} == {1}
    got = p.preferred(H100, 2, must=[H100[2]])
    assert set(got) == {H100[2], H100[3]}  # its PCIe switch peer
    # must_include spanning both nodes: both kept, size respected.
    got = p.preferred(H100, 4, must=[H100[0], H100[7]])
    assert {H100[0], H100[7]} <= set(got) and len(set(got)) == 4


def test_pcie_t4_two_of_four_same_numa_pair(plugin):
    p = plugin(profile="pcie-t4")
    got = p.preferred(T4, 2)
    assert len(got) == 2 and T4_NUMA[got[0]] == T4_NUMA[got[1]]
    got = p.preferred(T4, 2, must=[T4[3]])
    assert set(got) == {T4[2], T4[3]}
    got = p.preferred([T4[0], T4[2], T4[3]], 2)
    assert set(got) == {T4[2], T4[3]}


def test_odd_requests_never_fail(plugin):
    p = plugin()
    # More than there is: must-include then candidates, the kubelet tops up.
    got = p.preferred(H100[:3], 5)
    assert set(got) == set(H100[:3])
    # Unknown ids in the request are not an error.
    got = p.preferred(["GPU-unknown", H100[0], H100[1]], 2)
    assert len(got) == 2 and set(got) <= {"GPU-unknown", H100[0], H100[1]}


def test_replicas_distributed_spread_over_gpus(plugin):
    p = plugin(config=replicas(4))
    ids = [f"{u}::{r}" for u in H100 for r in range(4)]
    got = p.preferred(ids, 4)
    assert len(set(got)) == 4 and len({i.split("::")[0] for i in got}) == 4
    # must_include is kept and counted.
    got = p.preferred(ids, 2, must=[f"{H100[6]}::1"])
    assert got[0] == f"{H100[6]}::1" and len(set(got)) == 2


@pytest.mark.parametrize("policy,want", [("distributed", 1), ("packed", 0)])
def test_replicas_allocation_policy(plugin, policy, want):
    p = plugin(config=replicas(4, policy))
    # GPU 0 has two of its four replicas in use, GPU 1 none.
    available = [f"{H100[0]}::2", f"{H100[0]}::3"] + [f"{H100[1]}::{r}" for r in range(4)]
    got = p.preferred(available, 1)
    assert len(got) == 1 and got[0].split("::")[0] == H100[want], got


def test_replicas_through_the_kubelet(plugin):
    p = plugin(config=replicas(2))
    a = p.kubelet.allocate(GPU, 3)
    assert a.preferred_issues == [] and len({i.split("::")[0] for i in a.device_ids}) == 3
    assert a.response["envs"]["NVIDIA_VISIBLE_DEVICES"] == ",".join(i.split("::")[0] for i in a.device_ids)


def test_mig_devices(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed"], wait=("nvidia.com/mig-3g.20gb",))
    ids = [MIG0["3g.20gb"], MIG1["3g.20gb"]]
    got = p.preferred(ids, 1, resource="nvidia.com/mig-3g.20gb")
    assert len(got) == 1 and got[0] in ids
    got = p.preferred(ids, 1, must=[MIG1["3g.20gb"]], resource="nvidia.com/mig-3g.20gb")
    assert got == [MIG1["3g.20gb"]]
    a = p.kubelet.allocate("nvidia.com/mig-3g.20gb", 2)
    assert sorted(a.device_ids) == sorted(ids) and a.preferred_issues == []


def test_degenerate_requests(plugin):
    from dp_harness import pb, T
    p = plugin()
    assert p.preferred(H100, 0) == [] and p.preferred(H100, -3) == [] and p.preferred([], 2) == []
    assert sorted(p.preferred(H100, 8)) == sorted(H100)
    got = p.preferred([H100[0]] * 5 + [H100[1]], 2)   # duplicates in the candidates
    assert sorted(got) == sorted(H100[:2])
    got = p.preferred(H100, 3, must=[H100[7], H100[7]])
    assert got.count(H100[7]) == 1 and len(set(got)) == 3
    # One answer per container request, none for none.
    stub = p.stub()
    req = pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=H100, allocation_size=n) for n in (1, 2, 4)])
    assert [len(c.deviceIDs) for c in stub.GetPreferredAllocation(req, timeout=T).container_responses] == [1, 2, 4]
    assert not stub.GetPreferredAllocation(pb.PreferredAllocationRequest(), timeout=T).container_responses
    assert p.alive()
