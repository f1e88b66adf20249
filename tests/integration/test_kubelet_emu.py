# SPDX-License-Identifier: Apache-2.0
"""The kubelet emulator (tools/kubelet-emulator) against a small device plugin written with grpcio."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "kubelet-emulator"
sys.path.insert(0, str(TOOL))

import kubelet_emu as ke  # noqa: E402
from fake_plugin import FakePlugin  # noqa: E402

PY = "/usr/bin/python3"
RES = "example.com/dev"


@pytest.fixture
def sockdir():
    d = tempfile.mkdtemp(prefix="ke-")  # short: unix socket paths are limited to 107 bytes
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(sockdir):
    k = ke.KubeletEmulator(sockdir, dial_timeout=2)
    yield k
    k.stop()


@pytest.fixture
def plugins(sockdir):
    started = []

    def make(resource=RES, devices=None, **kw):
        p = FakePlugin(sockdir, resource, devices, **kw)
        started.append(p)
        return p
    yield make
    for p in started:
        p.stop()


@pytest.fixture
def children():
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def register(directory, version="v1beta1", endpoint="fake.sock", resource=RES):
    with grpc.insecure_channel(f"unix:{directory}/kubelet.sock") as ch:
        ke.pb_grpc.RegistrationStub(ch).Register(
            ke.pb.RegisterRequest(version=version, endpoint=endpoint, resource_name=resource), timeout=10)


# ---- registration ------------------------------------------------------------------------------------


def test_register_tracks_capacity_and_allocatable(kubelet, plugins):
    p = plugins(devices={"dev-0": "Healthy", "dev-1": "Healthy"}, numa={"dev-0": 0})
    p.start()
    kubelet.wait_registered(RES, timeout=10)
    assert kubelet.capacity(RES) == 2 and kubelet.allocatable(RES) == 2
    devs = {d.id: d for d in kubelet.devices(RES)}
    assert devs["dev-0"].numa == (0,) and devs["dev-1"].numa == ()
    assert all(d.health == "Healthy" for d in devs.values())
    assert kubelet.options(RES) == {"pre_start_required": False, "get_preferred_allocation_available": True}
    assert kubelet.endpoint(RES) == str(kubelet.dir / "fake.sock")
    # GetDevicePluginOptions was answered while Register was still open, then ListAndWatch started.
    methods = [m for m, _ in p.calls]
    assert methods[:2] == ["GetDevicePluginOptions", "ListAndWatch"]
    kinds = [e.kind for e in kubelet.events(resource=RES)]
    assert kinds.index("options") < kinds.index("register") < kinds.index("stream-open") < kinds.index("update")


def test_health_changes_reach_allocatable(kubelet, plugins):
    p = plugins(devices={"dev-0": "Healthy", "dev-1": "Healthy"})
    p.start()
    kubelet.wait_registered(RES)
    mark, t0 = kubelet.mark(), time.monotonic()
    p.set_health("dev-1", "Unhealthy")
    ev = kubelet.wait_event("update", RES, since=mark, predicate=lambda e: e.data["allocatable"] == 1)
    assert ev.t >= t0 and ev.data["unhealthy"] == ["dev-1"]
    assert kubelet.capacity(RES) == 2 and kubelet.unhealthy(RES) == ["dev-1"]
    assert {d.id: d.health for d in kubelet.devices(RES)} == {"dev-0": "Healthy", "dev-1": "Unhealthy"}
    p.set_health("dev-1", "healthy")  # anything but the exact string is unhealthy
    p.set_health("dev-0", "Unhealthy")
    kubelet.wait_for(lambda: kubelet.allocatable(RES) == 0, what="0 healthy")
    p.set_devices({"dev-0": "Healthy"})  # a snapshot without dev-1: it is gone
    kubelet.wait_for(lambda: kubelet.capacity(RES) == 1 and kubelet.allocatable(RES) == 1, what="1 device")


@pytest.mark.parametrize("name", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.me",
                                  "example.com/a_b", "a.b/C"])
def test_extended_resource_names_accepted(name):
    assert ke.is_extended_resource_name(name)


@pytest.mark.parametrize("name", ["gpu", "", "kubernetes.io/gpu", "foo.kubernetes.io/gpu", "requests.x.com/gpu",
                                  "example.com/", "/gpu", "Example.com/gpu", "example.com/-gpu", "a/b/c",
                                  "example.com/" + "g" * 64, "ex_ample.com/gpu", "example.com/gpu."])
def test_extended_resource_names_rejected(name):
    assert not ke.is_extended_resource_name(name)


@pytest.mark.parametrize("version,resource,message", [
    ("v1alpha", RES, 'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]'),
    ("", RES, 'requested API version "" is not supported by kubelet. Supported version is ["v1beta1"]'),
    ("v1beta1", "gpu", 'the ResourceName "gpu" is invalid'),
    ("v1beta1", "kubernetes.io/gpu", 'the ResourceName "kubernetes.io/gpu" is invalid'),
])
def test_register_rejections(kubelet, plugins, version, resource, message):
    plugins(resource=resource, version=version).start(register=False)
    with pytest.raises(grpc.RpcError) as err:
        register(kubelet.dir, version=version, resource=resource)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert err.value.details() == message
    assert kubelet.events("reject")[-1].data["message"] == message
    assert kubelet.resources() == []


def test_register_unreachable_endpoint(kubelet):
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        register(kubelet.dir, endpoint="nobody.sock")
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert err.value.details().startswith("failed to dial device plugin:")
    assert time.monotonic() - t0 >= 2  # the dial timeout (10 s in the kubelet, 2 s here)


@pytest.mark.parametrize("endpoint", ["", "../fake.sock", "sub/fake.sock", "kubelet.sock"])
def test_register_endpoint_must_be_a_file_name(kubelet, endpoint):
    with pytest.raises(grpc.RpcError) as err:
        register(kubelet.dir, endpoint=endpoint)
    assert err.value.code() == grpc.StatusCode.UNKNOWN
    assert "must be a socket file name" in err.value.details()


def test_reregistration_replaces_the_old_plugin(kubelet, plugins):
    old = plugins(devices={"a": "Healthy"}, endpoint="old.sock", auto_reregister=False)
    old.start()
    kubelet.wait_registered(RES)
    new = plugins(devices={"b": "Healthy", "c": "Healthy"}, endpoint="new.sock", preferred=False)
    new.start()
    kubelet.wait_registered(RES, registrations=2)
    assert kubelet.endpoint(RES).endswith("new.sock")
    assert [d.id for d in kubelet.devices(RES)] == ["b", "c"]
    assert kubelet.options(RES)["get_preferred_allocation_available"] is False
    mark = kubelet.mark()
    old.stop()  # the end of a replaced plugin's stream does not drop the new one
    kubelet.wait_event("stream-end", RES, since=mark)
    assert kubelet.registered(RES) and kubelet.allocatable(RES) == 2


# ---- stream end and restarts ---------------------------------------------------------------------------


def spawn_plugin(directory, children, *args):
    p = subprocess.Popen([PY, str(TOOL / "fake_plugin.py"), "--dir", str(directory), *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children.append(p)
    return p


def test_plugin_death_keeps_capacity_and_zeroes_allocatable(sockdir, children):
    with ke.KubeletEmulator(sockdir, grace_period=1.0) as kubelet:
        proc = spawn_plugin(sockdir, children, "--devices", "a,b,c")
        kubelet.wait_registered(RES, timeout=20)
        assert kubelet.allocatable(RES) == 3
        mark = kubelet.mark()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        ev = kubelet.wait_event("stream-end", RES, since=mark)
        assert ev.data["current"] and ev.data["code"] != "OK"
        assert kubelet.capacity(RES) == 3 and kubelet.allocatable(RES) == 0
        assert all(d.health == "Unhealthy" and d.plugin_health == "Healthy" for d in kubelet.devices(RES))
        with pytest.raises(ke.AdmissionError, match="no healthy devices present"):
            kubelet.allocate(RES, 1)
        kubelet.wait_event("grace-expired", RES, since=mark, timeout=10)
        assert kubelet.capacity(RES) == 0 and kubelet.resources() == []
        spawn_plugin(sockdir, children, "--devices", "a,b")  # re-registration revives the resource
        kubelet.wait_registered(RES, timeout=20, registrations=2)
        assert kubelet.capacity(RES) == 2 and kubelet.allocatable(RES) == 2


def test_reregistration_within_grace_revives(kubelet, plugins):
    p = plugins(devices={"a": "Healthy"})
    p.start()
    kubelet.wait_registered(RES)
    p.stop()
    kubelet.wait_for(lambda: not kubelet.registered(RES), what="stream end")
    assert kubelet.capacity(RES) == 1 and kubelet.allocatable(RES) == 0
    q = plugins(devices={"a": "Healthy", "b": "Healthy"})
    q.start()
    kubelet.wait_registered(RES, registrations=2)
    assert kubelet.allocatable(RES) == 2


def test_restart_deletes_sockets_and_plugin_reregisters(kubelet, plugins):
    p = plugins(devices={"a": "Healthy", "b": "Healthy"})
    p.start()
    kubelet.wait_registered(RES)
    alloc = kubelet.allocate(RES, 1, pod="survivor")
    (kubelet.dir / "not-a-socket").write_text("kept")
    (kubelet.dir / "subdir").mkdir()
    kubelet.restart()
    start = kubelet.events("start")[-1]
    assert "fake.sock" in start.data["deleted_sockets"]
    # The new kubelet knows the resource from its checkpoint (capacity 0) and the old allocation.
    assert kubelet.allocated(RES) == alloc.device_ids
    kubelet.wait_for(lambda: any(what == "socket-deleted" for _, what in p.log), what="plugin noticed")
    kubelet.wait_registered(RES, timeout=10)
    assert kubelet.capacity(RES) == 2 and kubelet.allocatable(RES) == 2
    assert (kubelet.dir / "not-a-socket").read_text() == "kept" and (kubelet.dir / "subdir").is_dir()
    assert kubelet.checkpoint_path.exists()
    # The reused allocation still blocks its device.
    other = kubelet.allocate(RES, 1)
    assert other.device_ids != alloc.device_ids
    with pytest.raises(ke.AdmissionError, match="Requested: 1, Available: 0"):
        kubelet.allocate(RES, 1)


def test_refuses_a_served_kubelet_socket(kubelet):
    with pytest.raises(RuntimeError, match="being served"):
        ke.KubeletEmulator(kubelet.dir)


# ---- admission -------------------------------------------------------------------------------------


def test_allocate_uses_the_preferred_allocation(kubelet, plugins):
    p = plugins(devices={f"dev-{i}": "Healthy" for i in range(4)})
    p.start()
    kubelet.wait_registered(RES)
    p.set_health("dev-3", "Unhealthy")
    kubelet.wait_for(lambda: kubelet.allocatable(RES) == 3)
    a = kubelet.allocate(RES, 2, pod="p1", container="c1")
    (pref,) = p.calls_of("GetPreferredAllocation")
    (req,) = pref.container_requests
    assert sorted(req.available_deviceIDs) == ["dev-0", "dev-1", "dev-2"]
    assert list(req.must_include_deviceIDs) == [] and req.allocation_size == 2
    assert a.device_ids == ["dev-2", "dev-1"]  # the fake plugin prefers the last ids
    assert a.preferred_issues == []
    (alloc_req,) = p.calls_of("Allocate")
    assert len(alloc_req.container_requests) == 1
    assert list(alloc_req.container_requests[0].devices_ids) == ["dev-2", "dev-1"]
    assert a.response == kubelet.last_allocate_response(RES)
    assert a.response["envs"] == {"FAKE_VISIBLE_DEVICES": "dev-2,dev-1"}
    assert a.response["cdi_devices"] == ["example.com/dev=dev-2", "example.com/dev=dev-1"]
    assert a.response["devices"][0] == {"container_path": "/dev/fake-dev-2", "host_path": "/dev/fake-dev-2",
                                        "permissions": "rw"}
    assert a.response["mounts"] == [{"container_path": "/fake", "host_path": "/var/lib/fake", "read_only": True}]
    assert a.response["annotations"] == {"cdi.k8s.io/fake": "example.com/dev=dev-2,example.com/dev=dev-1"}
    assert not p.calls_of("PreStartContainer")
    # The second pod gets what is left; GetPreferredAllocation is called even without a choice.
    b = kubelet.allocate(RES, 1)
    assert b.device_ids == ["dev-0"] and len(p.calls_of("GetPreferredAllocation")) == 2
    with pytest.raises(ke.AdmissionError) as err:
        kubelet.allocate(RES, 1)
    assert err.value.message == f"requested number of devices unavailable for {RES}. Requested: 1, Available: 0"
    kubelet.free("p1")
    assert kubelet.allocated(RES) == ["dev-0"]
    cp = json.loads(kubelet.checkpoint_path.read_text())["Data"]
    assert [e["PodUID"] for e in cp["PodDeviceEntries"]] == [b.pod]
    assert cp["RegisteredDevices"][RES] == ["dev-0", "dev-1", "dev-2", "dev-3"]


def test_allocate_without_preferred_allocation(kubelet, plugins):
    p = plugins(devices={"b": "Healthy", "a": "Healthy", "c": "Healthy"}, preferred=False, pre_start=True)
    p.start()
    kubelet.wait_registered(RES)
    a = kubelet.allocate(RES, 2)
    assert a.preferred_request is None and not p.calls_of("GetPreferredAllocation")
    assert a.device_ids == ["a", "b"]
    (pre,) = p.calls_of("PreStartContainer")
    assert list(pre.devices_ids) == ["a", "b"] and a.prestart


def test_bad_preferred_answers_are_topped_up(kubelet, plugins):
    p = plugins(devices={"a": "Healthy", "b": "Healthy", "c": "Healthy"},
                preferred_answer=lambda avail, must, size: ["zzz", "c", "c"])
    p.start()
    kubelet.wait_registered(RES)
    a = kubelet.allocate(RES, 2)
    assert a.device_ids == ["c", "a"]
    assert a.preferred_issues == ["unknown id zzz", "duplicate id c", "short answer: 1 of 2; topped up"]


def test_admission_errors(kubelet, plugins):
    with pytest.raises(ke.AdmissionError, match=f"cannot allocate unregistered device {RES}"):
        kubelet.allocate(RES, 1)
    p = plugins(devices={"a": "Unhealthy"})
    p.start()
    kubelet.wait_registered(RES)
    with pytest.raises(ke.AdmissionError, match=f"no healthy devices present; cannot allocate unhealthy devices {RES}"):
        kubelet.allocate(RES, 1)
    p.set_health("a", "Healthy")
    kubelet.wait_for(lambda: kubelet.allocatable(RES) == 1)
    with pytest.raises(ke.AdmissionError, match="Requested: 2, Available: 1"):
        kubelet.allocate(RES, 2)
    assert kubelet.allocated(RES) == [] and kubelet.events("admit-failed")


def test_allocate_error_from_the_plugin(kubelet, plugins):
    p = plugins(devices={"a": "Healthy"})
    p.start()
    kubelet.wait_registered(RES)
    p.devices.pop("a")  # the plugin no longer knows "a" but the kubelet does: Allocate fails
    with pytest.raises(ke.AdmissionError) as err:
        kubelet.allocate(RES, 1)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid request: unknown device a" in err.value.message
    assert kubelet.allocated(RES) == []


def test_multi_container_pod(kubelet, plugins):
    p = plugins(devices={f"d{i}": "Healthy" for i in range(4)}, preferred=False)
    p.start()
    kubelet.wait_registered(RES)
    allocs = kubelet.allocate_pod([("app1", {RES: 2}), ("app2", {RES: 1}), ("sidecar", {RES: 0})],
                                  init_containers=[("init", {RES: 1})], pod="multi")
    assert [(a.container, a.init) for a in allocs] == [("init", True), ("app1", False), ("app2", False)]
    # One Allocate per container, each with exactly one ContainerAllocateRequest.
    reqs = p.calls_of("Allocate")
    assert len(reqs) == 3 and all(len(r.container_requests) == 1 for r in reqs)
    init, app1, app2 = allocs
    assert init.device_ids[0] in app1.device_ids  # the init container's device is reused
    assert set(app1.device_ids).isdisjoint(app2.device_ids)
    assert len(set(kubelet.allocated(RES))) == 3


# ---- CLI -----------------------------------------------------------------------------------------


def test_cli_run_scenario(sockdir):
    plugin = f"{PY} {TOOL / 'fake_plugin.py'} --dir {sockdir} --devices a:0,b:1"
    p = subprocess.run([str(TOOL / "kubelet-emu"), "run", "--json", "--dir", str(sockdir), "--grace", "1",
                        f"spawn:{plugin}", f"wait-registered:{RES}:20", "show", f"devices:{RES}",
                        f"allocate:{RES}=1:pod-x", "kill", f"wait:{RES}:allocatable=0:20",
                        f"wait:{RES}:capacity=0:20"],
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    kinds = [x["kind"] for x in lines]
    for k in ("event:register", "registered", "show", "devices", "allocate", "kill", "event:grace-expired"):
        assert k in kinds
    show = next(x for x in lines if x["kind"] == "show")
    assert show["resources"][0]["capacity"] == 2
    alloc = next(x for x in lines if x["kind"] == "allocate")
    assert alloc["device_ids"] == ["b"] and alloc["response"]["envs"] == {"FAKE_VISIBLE_DEVICES": "b"}
    assert not (sockdir / "kubelet.sock").exists()


def test_cli_tables(sockdir):
    plugin = f"{PY} {TOOL / 'fake_plugin.py'} --dir {sockdir} --devices a:0,b:1"
    p = subprocess.run([str(TOOL / "kubelet-emu"), "run", "--dir", str(sockdir), f"spawn:{plugin}",
                        f"wait-registered:{RES}:20", "show", f"allocate:{RES}=2"],
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    assert "RESOURCE         PLUGIN     STATE       CAPACITY  ALLOCATABLE  ALLOCATED  UNHEALTHY" in p.stdout
    assert "  envs         FAKE_VISIBLE_DEVICES=b,a" in p.stdout


def test_cli_failed_step(sockdir):
    p = subprocess.run([str(TOOL / "kubelet-emu"), "run", "--dir", str(sockdir), f"wait-registered:{RES}:0.2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "timed out after 0.2 s" in p.stderr
