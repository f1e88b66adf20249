# SPDX-License-Identifier: Apache-2.0
"""The pod-resources emulator (tools/kubelet-emulator/podresources_emu.py) against a grpcio client:
the model comes back as the kubelet would answer it, Get of an unknown pod is NOT_FOUND, and the
socket goes away with stop() and comes back with start()."""
import sys
import tempfile
import pathlib

import grpc
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
import podresources_emu as pre  # noqa: E402


@pytest.fixture
def emu():
    d = pathlib.Path(tempfile.mkdtemp(prefix="pr-"))
    e = pre.PodResourcesEmulator(d / "kubelet.sock").start()
    yield e
    e.stop()
    d.rmdir()


def client(emu):
    ch = grpc.insecure_channel(f"unix:{emu.socket}", options=[("grpc.use_local_subchannel_pool", 1)])
    return ch, pre.pb_grpc.PodResourcesListerStub(ch)


def test_list_and_get(emu):
    emu.set_pod("ml", "job-0", {"trainer": {"devices": {"nvidia.com/gpu": ["GPU-a::0", "GPU-b::1"]}},
                                "sidecar": {"claims": [{"name": "c", "namespace": "ml", "driver": "gpu.nvidia.com",
                                                        "pool": "n1", "device": "gpu-3"}]}})
    ch, s = client(emu)
    try:
        r = s.List(pre.pb.ListPodResourcesRequest(), timeout=5)
        assert [p.name for p in r.pod_resources] == ["job-0"]
        c = {x.name: x for x in r.pod_resources[0].containers}
        assert list(c["trainer"].devices[0].device_ids) == ["GPU-a::0", "GPU-b::1"]
        assert c["sidecar"].dynamic_resources[0].claim_resources[0].device_name == "gpu-3"
        g = s.Get(pre.pb.GetPodResourcesRequest(pod_name="job-0", pod_namespace="ml"), timeout=5)
        assert g.pod_resources.name == "job-0"
        with pytest.raises(grpc.RpcError) as e:
            s.Get(pre.pb.GetPodResourcesRequest(pod_name="x", pod_namespace="ml"), timeout=5)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        emu.remove_pod("ml", "job-0")
        assert not s.List(pre.pb.ListPodResourcesRequest(), timeout=5).pod_resources
        assert emu.calls["List"] == 2
    finally:
        ch.close()


def test_down_and_back(emu):
    emu.stop()
    assert not emu.socket.exists()
    emu.start()
    ch, s = client(emu)
    try:
        assert s.List(pre.pb.ListPodResourcesRequest(), timeout=5) is not None
    finally:
        ch.close()
