# SPDX-License-Identifier: Apache-2.0
"""`gpuplane dra-driver` through the binary, against the fake API server (fakekube.py, which checks
every request body against the official resource.k8s.io/v1 schema) and the DRA kubelet emulator
(tools/kubelet-emulator/dra_emu.py): registration, ResourceSlices, NodePrepareResources and
NodeUnprepareResources over v1 and v1beta1, the CDI specs and the checkpoint they leave, per-claim and
whole-call errors, kubelet and driver restarts, device health, the gRPC health service, and crash
safety at every fault point.

Claims are allocated the way the scheduler would: `gpuplane allocate` against the slices the driver
published, then stored in the API with reservedFor, as kube-scheduler leaves them."""
import json
import os
import pathlib
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid

import grpc
import pytest
import yaml

from conftest import BUILD, NODES, ROOT

sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
import dra_emu  # noqa: E402

DRIVER = "gpu.nvidia.com"
NODE = "node-1"
KIND = "k8s.gpu.nvidia.com/claim"
CLASSES = ROOT / "examples" / "dra" / "deviceclasses.yaml"
T = 15.0


def wait_until(fn, timeout=T, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def driver_roots(tmp_path_factory):
    """Fake driver roots (mock-nvml/make-driver-root.sh), one per profile, built once."""
    roots = {}

    def get(profile):
        if profile not in roots:
            d = tmp_path_factory.mktemp(f"root-{profile}")
            subprocess.run([str(ROOT / "mock-nvml" / "make-driver-root.sh"), str(NODES / f"{profile}.yaml"),
                            str(d)], check=True, capture_output=True)
            roots[profile] = d
        return roots[profile]
    return get


class Driver:
    """One node: the kubelet emulator on private directories and the driver processes started on it.
    root None: no --nvidia-driver-root (the simulated node's own root)."""

    def __init__(self, gp, fakekube, work, root, profile):
        self.gp, self.fk, self.work, self.root, self.profile = gp, fakekube, work, root, profile
        self.reg_dir = work / "plugins_registry"
        self.plugins = work / "plugins"
        self.cdi = work / "cdi"
        self.plugin_dir = self.plugins / DRIVER
        self.dra_sock = self.plugin_dir / "dra.sock"
        self.reg_sock = self.reg_dir / f"{DRIVER}-reg.sock"
        self.checkpoint = self.plugin_dir / "checkpoint.json"
        self.events = work / "events.jsonl"
        self.events.write_text("")
        self.kubelet = dra_emu.DraKubelet(self.reg_dir)
        self.proc = None
        self.runs = 0

    # ---- the process ----

    def start(self, env=None, args=(), wait=True):
        full = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
        full.update({"MOCK_NVML_EVENTS": str(self.events)})
        full.update(env or {})
        self.runs += 1
        self.log_path = self.work / f"driver-{self.runs}.log"
        since = len(self.kubelet.registrations())
        cmd = [str(self.gp.binary), "dra-driver", f"--mock={self.profile}", f"--node-name={NODE}",
               f"--kubeconfig={self.fk.kubeconfig}", f"--kubelet-registrar-directory-path={self.reg_dir}",
               f"--kubelet-plugins-directory-path={self.plugins}", f"--cdi-root={self.cdi}",
               *([f"--nvidia-driver-root={self.root}"] if self.root else []), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"),
                                     env=full)
        if wait == "serving":
            wait_until(lambda: "DRA driver running" in self.log() or self.proc.poll() is not None,
                       what="the driver to serve")
        elif wait:
            self.kubelet.wait_registered(DRIVER, timeout=T, since=since)
        return self.proc

    def log(self):
        return self.log_path.read_text()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(T)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("the driver did not stop on SIGTERM")
        return self.proc.returncode if self.proc else None

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.kubelet.stop()

    # ---- the API ----

    def slices(self):
        return [s for s in self.fk.objects("resourceslices") if s["spec"]["nodeName"] == NODE]

    def wait_slices(self):
        return wait_until(self.slices, what="ResourceSlices")

    def claim(self, name, count=1, selector=None, reserved=True, allocate=True, configs=None,
              device_class=DRIVER):
        """A claim allocated by `gpuplane allocate` against the published slices and stored with
        reservedFor (allocate=False: stored pending). Returns the stored object."""
        spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class,
                                                                      "count": count}}]}}
        if selector:
            spec["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": selector}}]
        if configs:
            spec["devices"]["config"] = configs
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": name, "namespace": "default"}, "spec": spec}
        if allocate:
            obj = self.allocate(obj)
            if reserved:
                obj["status"]["reservedFor"] = [{"resource": "pods", "name": f"pod-{name}",
                                                 "uid": str(uuid.uuid4())}]
        return self.fk.put(obj)

    def allocate(self, claim):
        inputs = self.work / "alloc.json"
        others = [c for c in self.fk.objects("resourceclaims") if c.get("status", {}).get("allocation")]
        inputs.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                      "items": self.slices() + others + [claim]}))
        p = self.gp.run("allocate", "--node", NODE, "-o", "json", "-f", inputs, "-f", CLASSES)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)["items"][0]

    # ---- the kubelet side ----

    def prepare(self, *claims, version=None):
        return self.kubelet.prepare(DRIVER, [ref(c) for c in claims], version=version)

    def unprepare(self, *claims, version=None):
        return self.kubelet.unprepare(DRIVER, [ref(c) for c in claims], version=version)

    def spec_path(self, uid):
        return self.cdi / f"k8s.gpu.nvidia.com-claim_{uid}.yaml"

    def entries(self):
        if not self.checkpoint.exists():
            return {}
        return checkpoint_claims(json.loads(self.checkpoint.read_text()))

    def stub(self, version="v1"):
        channel = grpc.insecure_channel("unix:" + str(self.dra_sock), options=dra_emu.CHANNEL_OPTIONS)
        return channel, dra_emu.dra_pb[version][1].DRAPluginStub(channel)


def direct(node, op, claim, version="v1"):
    """One claim prepared or unprepared straight on dra.sock, without waiting for a registration:
    the answer for the claim ({"error", "cdi_ids"}), or None when the call failed as a whole."""
    pb = dra_emu.dra_pb[version][0]
    ns, name, uid = ref(claim)
    channel, stub = node.stub(version)
    wire = [pb.Claim(namespace=ns, name=name, uid=uid)]
    try:
        if op == "prepare":
            a = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(claims=wire), timeout=T).claims[uid]
            return {"error": a.error, "cdi_ids": [i for d in a.devices for i in d.cdi_device_ids]}
        a = stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(claims=wire), timeout=T).claims[uid]
        return {"error": a.error}
    except grpc.RpcError:
        return None
    finally:
        channel.close()


def checkpoint_claims(doc):
    """The claims of a checkpoint file: {uid: entry} (docs/dra-driver.md, Checkpoint)."""
    assert doc["version"] == 1
    return doc["preparedClaims"]


def ref(c):
    if isinstance(c, dict):
        return (c["metadata"]["namespace"], c["metadata"]["name"], c["metadata"]["uid"])
    return c


def devices_of(claim):
    return [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]


def short_dir():
    """A private directory with a short path: socket paths must fit in sun_path (108 bytes)."""
    return pathlib.Path(tempfile.mkdtemp(prefix="gpdra-", dir="/tmp"))


@pytest.fixture
def node(gp, fakekube, driver_roots):
    """A node with the dgx-h100 profile; node.start() runs the driver."""
    work = short_dir()
    d = Driver(gp, fakekube, work, driver_roots("dgx-h100"), "dgx-h100")
    try:
        yield d
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def running(node):
    node.start()
    node.wait_slices()
    return node


# ---- registration and slices ----


def test_registration_handshake_offers_v1_first(running):
    reg = running.kubelet.registered(DRIVER)
    assert reg.info == {"type": "DRAPlugin", "name": DRIVER, "endpoint": str(running.dra_sock),
                        "supported_versions": ["v1.DRAPlugin", "v1beta1.DRAPlugin"]}
    assert reg.service == "v1.DRAPlugin" and reg.notified
    assert "registered with the kubelet" in wait_until(
        lambda: "registered with the kubelet" in running.log() and running.log(), what="log")


def test_an_older_kubelet_picks_v1beta1(gp, fakekube, driver_roots):
    work = short_dir()
    d = Driver(gp, fakekube, work, driver_roots("dgx-h100"), "dgx-h100")
    d.kubelet.stop()
    d.kubelet = dra_emu.DraKubelet(d.reg_dir, services=dra_emu.OLD_KUBELET_SERVICES)
    try:
        d.start()
        assert d.kubelet.registered(DRIVER).service == "v1beta1.DRAPlugin"
        d.wait_slices()
        c = d.claim("old")
        r = d.prepare(c)
        assert r.ok, r.errors
        assert r.version == "v1beta1"
        assert r.cdi_ids(c["metadata"]["uid"]) == [f"{KIND}={c['metadata']['uid']}-{devices_of(c)[0]}"]
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


def test_slices_published_for_the_node(running):
    slices = running.slices()
    assert len(slices) == 1
    s = slices[0]["spec"]
    assert s["driver"] == DRIVER and s["nodeName"] == NODE
    assert s["pool"]["name"] == NODE and s["pool"]["resourceSliceCount"] == 1
    names = [d["name"] for d in s["devices"]]
    assert names == [f"gpu-{i}" for i in range(8)]
    for d in s["devices"]:
        assert d["attributes"]["type"] == {"string": "gpu"}
        assert d["attributes"]["uuid"]["string"].startswith("GPU-")
        assert "memory" in d["capacity"]
        assert not d.get("taints")


def test_sockets_and_files_are_private(running):
    for sock in (running.reg_sock, running.dra_sock):
        st = os.stat(sock)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    c = running.claim("perm")
    assert running.prepare(c).ok
    assert stat.S_IMODE(os.stat(running.checkpoint).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(running.plugin_dir).st_mode) & 0o027 == 0  # 0750 under umask


def test_sigterm_removes_the_sockets_and_keeps_the_rest(running):
    c = running.claim("keep")
    assert running.prepare(c).ok
    assert running.stop() == 0
    assert not running.reg_sock.exists() and not running.dra_sock.exists()
    assert running.spec_path(c["metadata"]["uid"]).exists()
    assert running.slices()


# ---- prepare and unprepare ----


def cdi_validator():
    from test_cdi import validator
    return validator()


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_prepare_returns_cdi_ids_and_writes_the_spec(running, version):
    c = running.claim("a", count=2)
    uid = c["metadata"]["uid"]
    r = running.prepare(c, version=version)
    assert r.ok, r.errors
    assert r.version == version
    devs = r.devices(uid)
    assert [d["device_name"] for d in devs] == devices_of(c)
    for d in devs:
        assert d["request_names"] == ["gpu"]
        assert d["pool_name"] == NODE
        assert d["cdi_device_ids"] == [f"{KIND}={uid}-{d['device_name']}"]
        assert "share_id" not in d
    spec = yaml.safe_load(running.spec_path(uid).read_text())
    cdi_validator().validate(spec)
    assert spec["kind"] == KIND
    assert sorted(d["name"] for d in spec["devices"]) == sorted(f"{uid}-{n}" for n in devices_of(c))
    nodes = [n["path"] for d in spec["devices"] for n in d["containerEdits"]["deviceNodes"]]
    assert sorted(nodes) == sorted(f"/dev/nvidia{n.split('-')[1]}" for n in devices_of(c))
    entry = running.entries()[uid]
    assert entry["state"] == "PrepareCompleted"
    assert entry["name"] == "a" and entry["namespace"] == "default"


def test_prepare_is_idempotent(running):
    c = running.claim("b")
    uid = c["metadata"]["uid"]
    first = running.prepare(c)
    assert first.ok
    before = os.stat(running.spec_path(uid))
    again = running.prepare(c)
    assert again.ok and again.devices(uid) == first.devices(uid)
    after = os.stat(running.spec_path(uid))
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert list(running.entries()) == [uid]


def test_same_claim_twice_at_once_is_serialised(running):
    import concurrent.futures
    c = running.claim("twice")
    uid = c["metadata"]["uid"]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda _: running.prepare(c), range(4)))
    assert all(r.ok for r in results), [r.errors for r in results]
    assert len({json.dumps(r.devices(uid)) for r in results}) == 1


def test_a_slow_claim_does_not_hold_up_the_others(running):
    import concurrent.futures
    slow, quick = running.claim("slow"), running.claim("quick")
    running.fk.inject("GET", r".*/resourceclaims/slow", hang=True)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        pending = ex.submit(running.prepare, slow)
        # the GET of the slow claim is held by the API server ...
        wait_until(lambda: running.fk.requests("GET", r".*/resourceclaims/slow$"), what="the slow GET")
        # ... while another claim is prepared
        assert running.prepare(quick).ok
        assert not pending.done()
        running.fk.release()
        r = pending.result(T)
    # the held GET was cut: the slow claim failed on its own and can be prepared now
    assert r.claims[slow["metadata"]["uid"]].answered
    assert running.prepare(slow).ok


def test_unprepare_removes_spec_and_entry(running):
    c = running.claim("c")
    uid = c["metadata"]["uid"]
    assert running.prepare(c).ok
    assert running.spec_path(uid).exists()
    r = running.unprepare(c)
    assert r.ok, r.errors
    assert not running.spec_path(uid).exists()
    assert uid not in running.entries()
    # again, and a claim the driver never saw: both fine
    assert running.unprepare(c).ok
    assert running.unprepare(("default", "never", str(uuid.uuid4()))).ok


def test_several_claims_in_one_call(running):
    a, b = running.claim("m1"), running.claim("m2")
    r = running.prepare(a, b)
    assert r.ok, r.errors
    assert set(r.claims) == {a["metadata"]["uid"], b["metadata"]["uid"]}
    assert set(running.entries()) == set(r.claims)
    r = running.unprepare(a, b, version="v1beta1")
    assert r.ok and running.entries() == {}


def test_many_claims_at_once_all_reach_the_checkpoint(running):
    # concurrent claims share one checkpoint writer: snapshots taken while a write is in flight
    # are merged into the next write, and none is lost or overwritten by an older one
    import concurrent.futures
    claims = [running.claim(f"p{i}") for i in range(8)]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda pair: running.prepare(*pair), zip(claims[0::2], claims[1::2])))
    assert all(r.ok for r in results), [r.errors for r in results]
    uids = {c["metadata"]["uid"] for c in claims}
    assert set(running.entries()) == uids
    assert all(e["state"] == "PrepareCompleted" for e in running.entries().values())
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert all(r.ok for r in ex.map(running.unprepare, claims))
    assert running.entries() == {} and list(running.cdi.iterdir()) == []


def test_per_claim_errors(running):
    good = running.claim("good")
    pending = running.claim("pending", allocate=False)
    unreserved = running.claim("unreserved", reserved=False)
    missing = ("default", "missing", str(uuid.uuid4()))
    wrong_uid = ("default", "good", str(uuid.uuid4()))
    bad_uid = ("default", "good", "NOT-A-UID")
    r = running.prepare(good, pending, unreserved, missing, wrong_uid, bad_uid)
    claims = r.claims
    assert all(cr.answered for cr in claims.values()), "every requested UID is answered"
    assert claims[good["metadata"]["uid"]].error == ""
    assert claims[good["metadata"]["uid"]].devices
    assert "not allocated" in claims[pending["metadata"]["uid"]].error
    assert "reserved" in claims[unreserved["metadata"]["uid"]].error
    assert "not found" in claims[missing[2]].error
    assert "UID" in claims[wrong_uid[2]].error
    assert "invalid claim UID" in claims[bad_uid[2]].error
    # only the good one is prepared, and no spec is left for the others
    assert list(running.entries()) == [good["metadata"]["uid"]]
    assert [p.name for p in running.cdi.iterdir()] == [running.spec_path(good["metadata"]["uid"]).name]


def test_unknown_opaque_config_is_a_claim_error(running):
    cfg = [{"opaque": {"driver": DRIVER, "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                                                          "kind": "FooConfig"}}}]
    c = running.claim("cfg", configs=cfg)
    r = running.prepare(c)
    err = r.claims[c["metadata"]["uid"]].error
    assert "FooConfig" in err, err
    assert running.entries() == {}


def test_time_slicing_config_is_recorded(running):
    cfg = [{"opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}}}]
    c = running.claim("ts", configs=cfg)
    r = running.prepare(c)
    assert r.ok, r.errors
    assert 'interval="Long"' in running.log()


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_malformed_requests_fail_the_call_and_the_driver_stays(running, version):
    pb = dra_emu.dra_pb[version][0]
    channel, stub = running.stub(version)
    uid = str(uuid.uuid4())
    bad = [
        pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="default", name="x", uid="")]),
        pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="", name="x", uid=uid)]),
        pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="default", name="x", uid=uid)] * 2),
    ]
    try:
        for req in bad:
            with pytest.raises(grpc.RpcError) as e:
                stub.NodePrepareResources(req, timeout=T)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(
                claims=[pb.Claim(namespace="default", name="x", uid="")]), timeout=T)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # an empty request is well formed: an empty answer
        assert len(stub.NodePrepareResources(pb.NodePrepareResourcesRequest(), timeout=T).claims) == 0
    finally:
        channel.close()
    assert running.proc.poll() is None
    c = running.claim("after")
    assert running.prepare(c, version=version).ok


# ---- restarts ----


def test_kubelet_restart_registers_again(running):
    first = running.kubelet.registered(DRIVER)
    since = len(running.kubelet.registrations())
    # the kubelet going away and coming back with a fresh plugins_registry directory
    shutil.rmtree(running.reg_dir)
    running.kubelet.wait_deregistered(DRIVER)
    running.reg_dir.mkdir()
    reg = running.kubelet.wait_registered(DRIVER, since=since)
    assert reg.seq > first.seq and reg.service == "v1.DRAPlugin"
    c = running.claim("after-kubelet")
    assert running.prepare(c).ok


def test_dra_socket_removed_is_served_again(running):
    os.unlink(running.dra_sock)
    wait_until(lambda: running.dra_sock.exists(), what="dra.sock again")
    c = running.claim("after-unlink")
    assert running.prepare(c).ok


def test_kubelet_restart_with_the_socket_in_place(running):
    # a kubelet that restarts without touching the directory dials the socket it finds again
    since = len(running.kubelet.registrations())
    running.kubelet.restart()
    reg = running.kubelet.wait_registered(DRIVER, since=since)
    assert reg.info["endpoint"] == str(running.dra_sock)


def test_sigterm_during_a_prepare(running):
    import concurrent.futures
    c = running.claim("interrupted")
    running.fk.inject("GET", r".*/resourceclaims/interrupted", hang=True)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        pending = ex.submit(running.prepare, c)
        wait_until(lambda: running.fk.requests("GET", r".*/resourceclaims/interrupted$"), what="the GET")
        assert running.stop() == 0
        assert not pending.result(T).ok
    running.fk.release()
    assert running.entries() == {} and not running.spec_path(c["metadata"]["uid"]).exists()


def test_registration_refusal_logged_and_socket_recreated(node):
    class Refusing(dra_emu.DraKubelet):
        def _validate(self, info, reg):
            return "refused for the test"
    node.kubelet.stop()
    node.kubelet = Refusing(node.reg_dir, retry=False)
    node.start(wait=False)
    wait_until(lambda: "the kubelet refused the registration" in node.log(), what="refusal log")
    # re-created: a new socket file, which the watcher attempts again though its retry is off
    node.kubelet.wait_for(lambda: len(node.kubelet.registrations(socket=str(node.reg_sock))) >= 2,
                          timeout=T, what="a second attempt")
    assert node.proc.poll() is None


def test_driver_restart_republishes_the_same_slices(running):
    c = running.claim("survivor")
    uid = c["metadata"]["uid"]
    first = running.prepare(c)
    assert first.ok
    before = running.slices()
    assert running.stop() == 0
    running.start()
    wait_until(lambda: "the API holds our ResourceSlices" in running.log(), what="publication")
    after = running.slices()
    assert [s["spec"] for s in after] == [s["spec"] for s in before]
    assert [s["metadata"]["resourceVersion"] for s in after] == \
           [s["metadata"]["resourceVersion"] for s in before]
    # the prepared claim is answered from the checkpoint, the same way
    again = running.prepare(c)
    assert again.ok and again.devices(uid) == first.devices(uid)


def test_slices_wiped_by_a_starting_kubelet_come_back(running):
    # A starting kubelet deletes every ResourceSlice of its node; the driver sees it (watch) and
    # publishes again, without a restart.
    before = running.slices()
    for s in before:
        running.fk.remove("resourceslices", s["metadata"]["name"])
    again = wait_until(running.slices, what="the slices to come back")
    assert [s["spec"]["devices"] for s in again] == [s["spec"]["devices"] for s in before]
    # and someone else's edit is put right
    edited = json.loads(json.dumps(again[0]))
    edited["spec"]["devices"] = edited["spec"]["devices"][:1]
    running.fk.put(edited)
    wait_until(lambda: len(running.slices()[0]["spec"]["devices"]) == 8, what="the edit undone")


def test_stale_slices_of_the_node_are_deleted(running):
    stale = json.loads(json.dumps(running.slices()[0]))
    stale["metadata"] = {"name": f"{NODE}-{DRIVER}-stale"}
    running.fk.put(stale)
    running.stop()
    running.start()
    wait_until(lambda: len(running.slices()) == 1, what="the stale slice to go")


def test_mig_devices_are_published_and_prepared(gp, fakekube, driver_roots):
    work = short_dir()
    d = Driver(gp, fakekube, work, driver_roots("a100-mig"), "a100-mig")
    try:
        d.start()
        names = [x["name"] for s in d.wait_slices() for x in s["spec"]["devices"]]
        migs = [n for n in names if "-mig-" in n]
        assert migs, names
        c = d.claim("mig", device_class="mig.nvidia.com")
        uid = c["metadata"]["uid"]
        (dev,) = devices_of(c)
        assert "-mig-" in dev
        r = d.prepare(c)
        assert r.ok, r.errors
        assert r.cdi_ids(uid) == [f"{KIND}={uid}-{dev}"]
        spec = yaml.safe_load(d.spec_path(uid).read_text())
        cdi_validator().validate(spec)
        paths = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
        assert any(p.startswith("/dev/nvidia-caps/") for p in paths), paths
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


# ---- health ----


def taints(node, device):
    for s in node.slices():
        for d in s["spec"]["devices"]:
            if d["name"] == device:
                return d.get("taints") or []
    return None


def test_fatal_xid_taints_the_device_and_it_recovers(node):
    node.start(args=["--health-recovery-window=1"])
    node.wait_slices()
    gen = node.slices()[0]["spec"]["pool"]["generation"]
    with node.events.open("a") as f:
        f.write(json.dumps({"gpu": 3, "type": "xid", "xid": 79}) + "\n")
    t = wait_until(lambda: taints(node, "gpu-3"), what="a taint on gpu-3")
    assert [(x["key"], x["effect"]) for x in t] == [("gpu.nvidia.com/unhealthy", "NoSchedule")]
    assert node.slices()[0]["spec"]["pool"]["generation"] > gen
    assert taints(node, "gpu-2") == []
    # the GPU still answers NVML: after the quiet window it is untainted again
    wait_until(lambda: taints(node, "gpu-3") == [], timeout=20, what="the taint to go")


def test_gpu_lost_at_run_time_is_tainted_until_it_answers_again(node):
    node.start(args=["--health-recovery-window=1"])
    node.wait_slices()
    with node.events.open("a") as f:
        f.write(json.dumps({"gpu": 5, "type": "lost"}) + "\n")
    wait_until(lambda: taints(node, "gpu-5"), timeout=20, what="a taint on gpu-5")
    assert taints(node, "gpu-4") == []
    with node.events.open("a") as f:
        f.write(json.dumps({"gpu": 5, "type": "recover"}) + "\n")
    wait_until(lambda: taints(node, "gpu-5") == [], timeout=20, what="the taint to go")


def test_ignored_xid_leaves_the_device_alone(node):
    node.start()
    node.wait_slices()
    with node.events.open("a") as f:
        f.write(json.dumps({"gpu": 1, "type": "xid", "xid": 13}) + "\n")
    wait_until(lambda: "XID event leaves the device healthy" in node.log(), what="the ignored XID")
    assert taints(node, "gpu-1") == []


def test_healthcheck_serves_grpc_health(node):
    node.start(args=["--healthcheck-port=0"])
    line = wait_until(lambda: [l for l in node.log().splitlines() if "health checks" in l], what="port")
    port = int(line[0].rsplit("port=", 1)[1])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b, response_deserializer=lambda b: b)
        assert check(b"", timeout=T) == b"\x08\x01"  # status: SERVING
        with pytest.raises(grpc.RpcError) as e:
            check(b"\x0a\x03foo", timeout=T)  # service "foo"
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        channel.close()


# ---- usage ----


def test_usage_errors_exit_2(gp):
    assert gp.run("dra-driver").returncode == 2  # no node name
    assert gp.run("dra-driver", "--node-name=n", "--bogus").returncode == 2
    assert gp.run("dra-driver", "--node-name=n", "--healthcheck-port=x").returncode == 2
    p = gp.run("dra-driver", "--node-name=n", env={"GPUPLANE_DRA_FAULT": "nowhere"})
    assert p.returncode == 2 and "fault point" in p.stderr
    h = gp.run("dra-driver", "--help")
    assert h.returncode == 0
    for flag in ("--node-name", "--driver-name", "--kubelet-registrar-directory-path",
                 "--kubelet-plugins-directory-path", "--cdi-root", "--kubeconfig", "--healthcheck-port",
                 "--mock", "--nvml-lib"):
        assert flag in h.stdout
    assert "Examples:" in h.stdout


def test_list_fault_points(gp):
    p = gp.run("dra-driver", "--list-fault-points")
    assert p.returncode == 0
    assert p.stdout.split() == FAULT_POINTS


# ---- crash safety ----

FAULT_POINTS = ["prepare-before-started", "prepare-after-started", "prepare-after-cdi",
                "prepare-after-completed", "unprepare-before-cdi-remove", "unprepare-after-cdi-remove",
                "unprepare-after-checkpoint"]


def converged(node, prepared, claims):
    """Every claim in `prepared` has exactly its spec and a completed entry; the others neither."""
    entries = node.entries()
    specs = {p.name for p in node.cdi.iterdir()} if node.cdi.exists() else set()
    for c in claims:
        uid = c["metadata"]["uid"]
        if uid in prepared:
            assert entries[uid]["state"] == "PrepareCompleted"
            assert node.spec_path(uid).name in specs
        else:
            assert uid not in entries
            assert node.spec_path(uid).name not in specs
    assert len(specs) == len(prepared), specs


def crash_then_retry(node, point, op, claim):
    """Runs op ("prepare"/"unprepare") on a driver armed with point, which must die there; then
    restarts it unarmed and retries. Returns the retried call's result."""
    node.start(env={"GPUPLANE_DRA_FAULT": point})
    r = getattr(node, op)(claim)
    assert not r.ok
    assert node.proc.wait(T) == -signal.SIGKILL
    node.start()
    if op == "prepare":
        # before any retry: a claim that was never answered is rolled back at start-up (its pod may
        # be gone, and then nobody calls for it again); a completed one stays
        done = point == "prepare-after-completed"
        converged(node, {claim["metadata"]["uid"]} if done else set(), [claim])
    r = getattr(node, op)(claim)
    assert r.ok, r.errors
    return r


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_crash_at_each_fault_point_converges(node, point):
    node.start()
    node.wait_slices()
    c = node.claim("crash")
    uid = c["metadata"]["uid"]
    want = [f"{KIND}={uid}-{d}" for d in devices_of(c)]
    node.stop()
    if point.startswith("prepare"):
        r = crash_then_retry(node, point, "prepare", c)
        assert r.cdi_ids(uid) == want
        converged(node, {uid}, [c])
    else:
        node.start()
        assert node.prepare(c).ok
        node.stop()
        crash_then_retry(node, point, "unprepare", c)
        converged(node, set(), [c])
    if point in ("prepare-after-started", "prepare-after-cdi"):
        assert "left half prepared by a crash: rolling it back" in node.log()


def test_randomized_crashes_converge(node):
    """Random sequences of prepare/unprepare on a few claims with a random fault armed on most runs;
    after each run (and a clean retry when it crashed) the node's files say exactly which claims are
    prepared, and a prepared claim always gets the same CDI IDs. The calls go straight to dra.sock
    (no registration wait), so the 200 runs take seconds. GPUPLANE_DRA_CRASH_RUNS / _SEED change
    the number of runs (default 200) and the seed."""
    runs = int(os.environ.get("GPUPLANE_DRA_CRASH_RUNS", "200"))
    rng = random.Random(int(os.environ.get("GPUPLANE_DRA_CRASH_SEED", "7")))
    node.start()
    node.wait_slices()
    claims = [node.claim(f"r{i}", count=rng.choice([1, 2])) for i in range(3)]
    node.stop()
    # No kubelet from here on: its dials to the sockets of killed drivers would only add waiting.
    node.kubelet.stop()
    prepared = set()
    crashes = 0
    for _ in range(runs):
        c = rng.choice(claims)
        uid = c["metadata"]["uid"]
        op = rng.choice(["prepare", "unprepare"])
        point = rng.choice([p for p in FAULT_POINTS if p.startswith(op)] + [None])
        if op == "prepare" and uid in prepared:
            point = None  # answered from the checkpoint: no fault point is on that path
        node.start(env={"GPUPLANE_DRA_FAULT": point} if point else None, wait="serving")
        a = direct(node, op, c, rng.choice(["v1", "v1beta1"]))
        if point:
            assert a is None
            assert node.proc.wait(T) == -signal.SIGKILL, node.log()
            crashes += 1
            node.start(wait="serving")
            a = direct(node, op, c)
        assert a is not None and a["error"] == "", (a, node.log())
        if op == "prepare":
            prepared.add(uid)
            assert a["cdi_ids"] == [f"{KIND}={uid}-{d}" for d in devices_of(c)]
        else:
            prepared.discard(uid)
        assert node.stop() == 0
        converged(node, prepared, claims)
    assert crashes >= runs // 4


# ---- examples ----


def test_run_local_example(gp):
    p = subprocess.run([str(ROOT / "examples" / "dra" / "dra-driver" / "run-local.sh"), str(BUILD)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "NodePrepareResources: ok=True" in p.stdout
    assert "kind: \"k8s.gpu.nvidia.com/claim\"" in p.stdout
    assert "spec still there: False" in p.stdout
    # --mock alone: the simulated node's own driver root, named by the spec, gone after SIGTERM.
    script = (ROOT / "examples" / "dra" / "dra-driver" / "run-local.sh").read_text()
    assert "--nvidia-driver-root" not in script and "make-driver-root" not in script
    assert '/gpuplane-mock-' in p.stdout
    assert "removed on SIGTERM: True" in p.stdout


def test_daemonset_example_names_real_flags(gp):
    docs = list(yaml.safe_load_all((ROOT / "examples" / "dra" / "dra-driver" / "daemonset.yaml").read_text()))
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    helptext = gp.run("dra-driver", "--help").stdout
    for arg in c["args"]:
        assert arg.split("=")[0] in helptext
    for e in c["env"]:
        assert e["name"] in helptext
    assert c["livenessProbe"]["grpc"]["port"] == int(
        next(a for a in c["args"] if a.startswith("--healthcheck-port=")).split("=")[1])
