# SPDX-License-Identifier: Apache-2.0
"""`gpuplane exporter -k --kubernetes-virtual-gpus` splitting DCGM_FI_DEV_GPU_UTIL and
DCGM_FI_DEV_FB_USED of a shared GPU per pod: pods sharing a GPU from the pod-resources emulator
(NVIDIA's `<uuid>::<n>` replicas), their objects and UIDs from fakekube, their processes started
through the mock NVML (memory and SM utilisation) with their cgroups in a fake proc root
(GPUPLANE_PROC_ROOT; the systemd and the cgroupfs drivers' paths, cgroup v2 and v1). The device's
series stays, each pod gets the sum over its processes (0 for a pod with none), processes of no pod
count for the device only, other fields stay one series per pod; processes that end or change show
at the next collection; a MIG GPU instance's pods get their memory; promtool parses every page."""
import pathlib

import pytest

from test_exporter import wait_until
from test_exporter_podmeta import check_page, exporters, kubelet, parse_labels, pod_object, sample_lines  # noqa: F401

T = 20.0


class ProcRoot:
    """A directory laid out as /proc for the exporter's cgroup lookups: proc/<pid>/cgroup."""

    def __init__(self, path):
        self.path = pathlib.Path(path)

    def add(self, pid, text):
        d = self.path / "proc" / str(pid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup").write_text(text)


def systemd_v2(uid):
    """/proc/<pid>/cgroup of a container under the systemd cgroup driver, cgroup v2."""
    return (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice/"
            f"cri-containerd-{'ab' * 32}.scope\n")


def cgroupfs_v1(uid):
    """... under the cgroupfs driver, cgroup v1 (the unified hierarchy names no pod)."""
    path = f"/kubepods/besteffort/pod{uid}/{'cd' * 32}"
    return f"12:memory:{path}\n11:cpu,cpuacct:{path}\n1:name=systemd:{path}\n0::/\n"


def by_pod(e, metric, gpu):
    """{pod or None: (labels, value)} of the GPU's (or GPU instance "g/i"'s) series of metric."""
    out = {}
    for line in sample_lines(e.scrape()[1], metric):
        d = dict(parse_labels(line))
        where = d["gpu"] + ("/" + d["GPU_I_ID"] if "GPU_I_ID" in d else "")
        if where == gpu:
            assert d.get("pod") not in out, line  # one series per pod
            out[d.get("pod")] = (d, float(line.rsplit(" ", 1)[1]))
    return out


@pytest.fixture
def proc_root(tmp_path):
    return ProcRoot(tmp_path / "procroot")


def start(exporters, kubelet, fakekube, proc_root, profile):  # noqa: F811
    return exporters("--mock", profile, "-c", "200", "-k", "--kubernetes-virtual-gpus",
                     "--pod-resources-kubelet-socket", kubelet.socket,
                     env={"KUBECONFIG": str(fakekube.kubeconfig), "GPUPLANE_PROC_ROOT": str(proc_root.path)})


def test_shared_gpu_split_per_pod(gp, fakekube, kubelet, exporters, proc_root):  # noqa: F811
    uuid1 = gp.json("info", "--mock", "pcie-t4", "--json")["gpus"][1]["uuid"]
    uid = {name: fakekube.put(pod_object("ml", name, {}))["metadata"]["uid"] for name in ("a", "b", "idle")}
    for n, name in enumerate(("a", "b", "idle")):
        kubelet.set_pod("ml", name, {"main": {"devices": {"nvidia.com/gpu": [f"{uuid1}::{n}"]}}})
    proc_root.add(1001, systemd_v2(uid["a"]))
    proc_root.add(1002, systemd_v2(uid["a"]))
    proc_root.add(2001, cgroupfs_v1(uid["b"]))
    proc_root.add(3001, "0::/system.slice/sshd.service\n")  # no pod's
    e = start(exporters, kubelet, fakekube, proc_root, "pcie-t4")
    e.inject(gpu=1, type="process", pid=1001, memory=1024, smUtil=20)
    e.inject(gpu=1, type="process", pid=1002, memory=512, smUtil=15)
    e.inject(gpu=1, type="process", pid=2001, memory=2048, smUtil=40)
    e.inject(gpu=1, type="process", pid=3001, memory=100, smUtil=5)
    e.inject(gpu=2, type="process", pid=1001, memory=64, smUtil=99)  # pod a's process, another GPU

    want_util = {"a": 35, "b": 40, "idle": 0}
    util = wait_until(lambda: (u := by_pod(e, "DCGM_FI_DEV_GPU_UTIL", "1")) and
                      {p: v for p, (_, v) in u.items() if p} == want_util and u, T, "the pods' utilisation")
    fb = by_pod(e, "DCGM_FI_DEV_FB_USED", "1")
    assert {p: v for p, (_, v) in fb.items() if p} == {"a": 1536, "b": 2048, "idle": 0}
    # the device's own series stays, with the device's values (processes of no pod included)
    assert None in util and None in fb
    assert fb[None][1] >= 1024 + 512 + 2048 + 100
    assert "pod_uid" not in util[None][0] and "vgpu" not in util[None][0]
    labels = util["a"][0]
    assert labels["pod_uid"] == uid["a"] and labels["vgpu"] == "0" and labels["namespace"] == "ml"
    assert util["idle"][0]["pod_uid"] == uid["idle"]
    # every other field: one series per pod, as without the split (no pod_uid without its flag)
    temp = by_pod(e, "DCGM_FI_DEV_GPU_TEMP", "1")
    assert sorted(p for p in temp if p) == ["a", "b", "idle"] and None not in temp
    assert "pod_uid" not in temp["a"][0]
    # the other GPUs are untouched
    assert list(by_pod(e, "DCGM_FI_DEV_GPU_UTIL", "2")) == [None]
    check_page(e.scrape()[1])

    # a process ends, another's utilisation changes: the next collection says so
    e.inject(gpu=1, type="process-exit", pid=2001)
    e.inject(gpu=1, type="process", pid=1002, memory=512, smUtil=50)
    wait_until(lambda: {p: v for p, (_, v) in by_pod(e, "DCGM_FI_DEV_GPU_UTIL", "1").items() if p} ==
               {"a": 70, "b": 0, "idle": 0}, T, "the new values")
    assert by_pod(e, "DCGM_FI_DEV_FB_USED", "1")["b"][1] == 0
    assert e.proc.poll() is None


def test_mig_instance_memory_per_pod(gp, fakekube, kubelet, exporters, proc_root):  # noqa: F811
    info = gp.json("info", "--mock", "a100-mig", "--json")
    m = next(m for m in info["gpus"][0]["migDevices"] if m["profile"] == "3g.20gb")
    uid = {name: fakekube.put(pod_object("ml", name, {}))["metadata"]["uid"] for name in ("x", "y")}
    kubelet.set_pod("ml", "x", {"main": {"devices": {"nvidia.com/mig-3g.20gb": [f"{m['uuid']}::0"]}}})
    kubelet.set_pod("ml", "y", {"main": {"devices": {"nvidia.com/mig-3g.20gb": [f"{m['uuid']}::1"]}}})
    proc_root.add(5001, systemd_v2(uid["x"]))
    proc_root.add(5002, cgroupfs_v1(uid["y"]))
    e = start(exporters, kubelet, fakekube, proc_root, "a100-mig")
    e.inject(gpu=m["uuid"], type="process", pid=5001, memory=3000)
    e.inject(gpu=m["uuid"], type="process", pid=5002, memory=700)
    where = f"0/{m['giId']}"
    fb = wait_until(lambda: (f := by_pod(e, "DCGM_FI_DEV_FB_USED", where)) and
                    {p: v for p, (_, v) in f.items() if p} == {"x": 3000, "y": 700} and f, T,
                    "the GPU instance's memory per pod")
    assert fb[None][1] == 3700  # the instance's own used memory
    assert fb["x"][0]["GPU_I_PROFILE"] == "3g.20gb" and fb["x"][0]["pod_uid"] == uid["x"]
    # MIG devices have no utilisation: nothing to split there
    assert by_pod(e, "DCGM_FI_DEV_GPU_UTIL", where) == {}
    check_page(e.scrape()[1])


def test_without_api_server_no_split(gp, kubelet, exporters, proc_root):  # noqa: F811
    """Without the pods' UIDs processes cannot be told apart: the exporter says so, and the shared
    GPU's fields are one series per pod, as before."""
    uuid1 = gp.json("info", "--mock", "pcie-t4", "--json")["gpus"][1]["uuid"]
    for n, name in enumerate(("a", "b")):
        kubelet.set_pod("ml", name, {"main": {"devices": {"nvidia.com/gpu": [f"{uuid1}::{n}"]}}})
    e = exporters("--mock", "pcie-t4", "-c", "200", "-k", "--kubernetes-virtual-gpus",
                  "--pod-resources-kubelet-socket", kubelet.socket,
                  env={"GPUPLANE_PROC_ROOT": str(proc_root.path)})
    e.inject(gpu=1, type="process", pid=1001, memory=1024, smUtil=20)
    util = wait_until(lambda: (u := by_pod(e, "DCGM_FI_DEV_GPU_UTIL", "1")) and "b" in u and u, T, "the pods")
    assert sorted(util) == ["a", "b"] and util["a"][1] == util["b"][1]  # the device's value, per pod
    assert "the per-pod process values of virtual GPUs will not be available" in e.log()
