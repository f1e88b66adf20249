# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` Allocate (issue item 6): the exact response of every device-list strategy
(nvidia-compat.md §1.6), the index id strategy, --pass-device-specs with a fake driver root (MIG
capability nodes on a100-mig), unknown ids and unhealthy devices."""
import re

import grpc
import pytest

from dp_harness import A100, GPU, H100, MIG0, MIG1, driver_root, plugin, rpc_error  # noqa: F401

CDI = "k8s.device-plugin.nvidia.com/gpu="
ANNOTATION = re.compile(r"^(.*)nvidia-device-plugin_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
MIXED = ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb"]


def response(r):
    return {"envs": dict(r.envs), "mounts": [(m.container_path, m.host_path, m.read_only) for m in r.mounts],
            "devices": [(d.container_path, d.host_path, d.permissions) for d in r.devices],
            "annotations": dict(r.annotations), "cdi_devices": [c.name for c in r.cdi_devices]}


def one(p, ids, resource=GPU):
    resp = p.allocate(ids, resource=resource)
    assert len(resp.container_responses) == 1
    return response(resp.container_responses[0])


IDS = [H100[1], H100[6]]


@pytest.mark.parametrize("strategy", ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri",
                                      "envvar,cdi-cri", "volume-mounts,cdi-annotations"])
def test_device_list_strategies(plugin, strategy):
    p = plugin(args=[f"--device-list-strategy={strategy}"], root="cdi" in strategy)
    r = one(p, IDS)
    chosen = strategy.split(",")
    envs, mounts = {}, []
    if "envvar" in chosen:
        envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(IDS)}
    if "volume-mounts" in chosen:
        envs = {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
        mounts = [(f"/var/run/nvidia-container-devices/{i}", "/dev/null", False) for i in IDS]
    assert r["envs"] == envs
    assert r["mounts"] == mounts
    assert r["devices"] == []
    if "cdi-annotations" in chosen:
        ((key, value),) = r["annotations"].items()
        assert ANNOTATION.match(key).group(1) == "cdi.k8s.io/"
        assert value == ",".join(CDI + i for i in IDS)
    else:
        assert r["annotations"] == {}
    assert r["cdi_devices"] == ([CDI + i for i in IDS] if "cdi-cri" in chosen else [])


def test_cdi_annotation_prefix_and_fresh_keys(plugin):
    p = plugin(args=["--device-list-strategy=cdi-annotations", "--cdi-annotation-prefix=cdi.example.com/"], root=True)
    a, b = one(p, [H100[0]]), one(p, [H100[0]])
    (ka,), (kb,) = a["annotations"], b["annotations"]
    assert ANNOTATION.match(ka).group(1) == "cdi.example.com/" and ka != kb  # a new UUID per response
    assert a["annotations"][ka] == CDI + H100[0] and a["envs"] == {}


def test_index_strategy(plugin):
    p = plugin(args=["--device-id-strategy=index", "--device-list-strategy=envvar,volume-mounts,cdi-cri"], root=True)
    r = one(p, IDS)
    assert r["envs"] == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
    assert r["mounts"] == [("/var/run/nvidia-container-devices/1", "/dev/null", False),
                           ("/var/run/nvidia-container-devices/6", "/dev/null", False)]
    assert r["cdi_devices"] == [CDI + "1", CDI + "6"]


def test_index_strategy_mig(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed", "--device-id-strategy=index"], wait=MIXED)
    assert one(p, [MIG0["1g.5gb-b"]], "nvidia.com/mig-1g.5gb")["envs"] == {"NVIDIA_VISIBLE_DEVICES": "0:3"}
    assert one(p, [MIG1["3g.20gb"], MIG0["3g.20gb"]], "nvidia.com/mig-3g.20gb")["envs"] == \
        {"NVIDIA_VISIBLE_DEVICES": "1:0,0:0"}


def test_feature_envs(plugin):
    p = plugin(args=["--gds-enabled", "--mofed-enabled", "--gdrcopy-enabled", "--device-list-strategy=envvar,cdi-cri"],
               root=True)
    r = one(p, [H100[0]])
    assert r["envs"] == {"NVIDIA_VISIBLE_DEVICES": H100[0], "NVIDIA_GDS": "enabled", "NVIDIA_MOFED": "enabled",
                         "NVIDIA_GDRCOPY": "enabled"}
    assert r["cdi_devices"][0] == CDI + H100[0]
    assert sorted(r["cdi_devices"][1:]) == ["k8s.device-plugin.nvidia.com/gdrcopy=all",
                                            "k8s.device-plugin.nvidia.com/gds=all",
                                            "k8s.device-plugin.nvidia.com/mofed=all"]


def test_pass_device_specs_full_gpus(plugin):
    root = driver_root("dgx-h100", plugin.workdir() / "root")
    p = plugin(args=["--pass-device-specs", "--driver-root", root])
    r = one(p, [H100[0], H100[3]])
    paths = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
             "/dev/nvidia0", "/dev/nvidia3"]
    assert r["devices"] == [(x, f"{root}{x}", "rw") for x in paths]
    assert r["envs"] == {"NVIDIA_VISIBLE_DEVICES": f"{H100[0]},{H100[3]}"}


def test_pass_device_specs_dev_root(plugin):
    root = driver_root("dgx-h100", plugin.workdir() / "root")
    p = plugin(env={"NVIDIA_DRIVER_ROOT": "/nonexistent", "NVIDIA_DEV_ROOT": str(root), "PASS_DEVICE_SPECS": "true"})
    r = one(p, [H100[7]])
    assert r["devices"][-1] == ("/dev/nvidia7", f"{root}/dev/nvidia7", "rw")
    assert ("/dev/nvidiactl", f"{root}/dev/nvidiactl", "rw") in r["devices"]


def test_pass_device_specs_mig_caps(plugin):
    root = driver_root("a100-mig", plugin.workdir() / "root")
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed", "--pass-device-specs", f"--driver-root={root}"],
               wait=MIXED)
    common = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
    # GPU 0 (minor 0), 2g.10gb at placement 0: GI id 3 -> cap 3 + 9*3 = 30, its CI 0 -> 31.
    r = one(p, [MIG0["2g.10gb"]], "nvidia.com/mig-2g.10gb")
    assert [d[0] for d in r["devices"]] == common + ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap30",
                                                      "/dev/nvidia-caps/nvidia-cap31"]
    assert all(h == f"{root}{c}" and perm == "rw" for c, h, perm in r["devices"])
    # GPU 1 (minor 1), 3g.20gb at placement 0: GI id 1 -> 3 + 135 + 9 = 147, CI 0 -> 148.
    r = one(p, [MIG1["3g.20gb"]], "nvidia.com/mig-3g.20gb")
    assert [d[0] for d in r["devices"]][4:] == ["/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap147",
                                                "/dev/nvidia-caps/nvidia-cap148"]


def test_several_container_requests(plugin):
    p = plugin()
    resp = p.allocate([H100[0]], [H100[1], H100[2]], [H100[3]])
    assert [c.envs["NVIDIA_VISIBLE_DEVICES"] for c in resp.container_responses] == \
        [H100[0], f"{H100[1]},{H100[2]}", H100[3]]


@pytest.mark.parametrize("bad", ["GPU-00000000-0000-0000-0000-000000000000", "0", f"{H100[0]}::0", "", "MIG-x"])
def test_unknown_id_is_invalid_argument(plugin, bad):
    p = plugin()
    err = rpc_error(p.allocate, [H100[0], bad])
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"unknown device: {bad}" in err.details()


def test_id_of_another_resource_is_unknown(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed"], wait=MIXED)
    err = rpc_error(p.allocate, [MIG0["1g.5gb-a"]], resource="nvidia.com/mig-2g.10gb")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and MIG0["1g.5gb-a"] in err.details()
    err = rpc_error(p.allocate, [A100[0]])  # MIG-enabled: not a device of nvidia.com/gpu under mixed
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and A100[0] in err.details()


def test_kubelet_admission_uses_the_response(plugin):
    p = plugin(args=["--device-list-strategy=envvar,cdi-cri"], root=True)
    a = p.kubelet.allocate(GPU, 2, pod="train")
    assert a.response["envs"]["NVIDIA_VISIBLE_DEVICES"] == ",".join(a.device_ids)
    assert a.response["cdi_devices"] == [CDI + i for i in a.device_ids]
    assert p.kubelet.allocatable(GPU) == 8 and sorted(p.kubelet.allocated(GPU)) == sorted(a.device_ids)


def test_degenerate_allocate_requests(plugin):
    p = plugin()
    assert not p.allocate().container_responses            # no container: no response
    assert one(p, [])["envs"] == {"NVIDIA_VISIBLE_DEVICES": ""}
    assert one(p, [H100[0], H100[0]])["envs"] == {"NVIDIA_VISIBLE_DEVICES": H100[0]}
    assert p.alive()
