# SPDX-License-Identifier: Apache-2.0
"""The DRA half of the kubelet emulator (tools/kubelet-emulator/dra_emu.py) against a small DRA
plugin written here with grpcio: registration handshake, version choice, the kubelet's rejection
texts, deregistration, and NodePrepareResources / NodeUnprepareResources with the kubelet's checks."""
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import pytest

TOOL = pathlib.Path(__file__).resolve().parents[2] / "tools" / "kubelet-emulator"
sys.path.insert(0, str(TOOL))

import dra_emu  # noqa: E402
from dra_emu import dra_pb, reg_grpc, reg_pb  # noqa: E402

PY = "/usr/bin/python3"
DRIVER = "dra.example.com"
UID_A = "0b6f6a5e-6a43-4c5a-9d1e-000000000001"
UID_B = "0b6f6a5e-6a43-4c5a-9d1e-000000000002"
UID_X = "0b6f6a5e-6a43-4c5a-9d1e-0000000000ff"


class FakeDraPlugin:
    """A DRA driver in miniature: Registration on <registrar>/<name>-reg.sock, DRAPlugin (v1 and
    v1beta1, or `serve` of them) on <plugins>/<name>/dra.sock. Each prepared claim gets one device
    "dev-<n>" with CDI id "example.com/claim=<uid>-dev-<n>"; `per_claim_error`, `omit`, `extra`,
    `abort` and `delay` bend the answers for the error paths. `info` overrides GetInfo fields."""

    def __init__(self, registrar, plugins, name=DRIVER, info=None, serve=("v1", "v1beta1"),
                 reg_name=None, info_delay=0.0):
        self.name = name
        self.reg_socket = os.path.join(str(registrar), reg_name or f"{name}-reg.sock")
        self.dra_dir = os.path.join(str(plugins), name)
        self.dra_socket = os.path.join(self.dra_dir, "dra.sock")
        self.info = {"type": "DRAPlugin", "name": name, "endpoint": self.dra_socket,
                     "supported_versions": ["v1.DRAPlugin", "v1beta1.DRAPlugin"]}
        self.info.update(info or {})
        self.serve = serve
        self.info_delay = info_delay
        self.per_claim_error = {}  # uid -> error text
        self.omit = set()  # uids left out of answers
        self.extra = set()  # uids added to answers
        self.abort = None  # (grpc.StatusCode, text): fail the whole call
        self.delay = 0.0
        self.share_id = None  # v1 answers carry it when set
        self.cond = threading.Condition()
        self.notifications = []  # (plugin_registered, error)
        self.get_info_calls = 0
        self.calls = []  # (version, method, [(ns, name, uid)])
        self.prepared = {}  # uid -> device name
        self.servers = []

    # ---- services ----

    def _registration(plugin):
        class Registration(reg_grpc.RegistrationServicer):
            def GetInfo(self, request, context):
                with plugin.cond:
                    plugin.get_info_calls += 1
                if plugin.info_delay:
                    time.sleep(plugin.info_delay)
                return reg_pb.PluginInfo(**plugin.info)

            def NotifyRegistrationStatus(self, request, context):
                with plugin.cond:
                    plugin.notifications.append((request.plugin_registered, request.error))
                    plugin.cond.notify_all()
                return reg_pb.RegistrationStatusResponse()
        return Registration()

    def _dra(plugin, version):
        pb, pb_grpc = dra_pb[version]

        class DRAPlugin(pb_grpc.DRAPluginServicer):
            def NodePrepareResources(self, request, context):
                return plugin._answer(version, "prepare", request, context, pb)

            def NodeUnprepareResources(self, request, context):
                return plugin._answer(version, "unprepare", request, context, pb)
        return DRAPlugin()

    def _answer(self, version, method, request, context, pb):
        claims = [(c.namespace, c.name, c.uid) for c in request.claims]
        with self.cond:
            self.calls.append((version, method, claims))
            self.cond.notify_all()
        if self.delay:
            time.sleep(self.delay)
        if self.abort:
            context.abort(*self.abort)
        uids = [u for _, _, u in claims if u not in self.omit] + sorted(self.extra)
        if method == "prepare":
            resp = pb.NodePrepareResourcesResponse()
            for uid in uids:
                entry = resp.claims[uid]
                if uid in self.per_claim_error:
                    entry.error = self.per_claim_error[uid]
                    continue
                with self.cond:
                    dev = self.prepared.setdefault(uid, f"dev-{len(self.prepared)}")
                d = entry.devices.add(request_names=["gpu"], pool_name="node-a", device_name=dev,
                                      cdi_device_ids=[f"example.com/claim={uid}-{dev}"])
                if self.share_id and version == "v1":
                    d.share_id = self.share_id
            return resp
        resp = pb.NodeUnprepareResourcesResponse()
        for uid in uids:
            entry = resp.claims[uid]
            if uid in self.per_claim_error:
                entry.error = self.per_claim_error[uid]
            else:
                with self.cond:
                    self.prepared.pop(uid, None)
        return resp

    # ---- lifecycle ----

    def start(self):
        os.makedirs(self.dra_dir, exist_ok=True)
        dra = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        for v in self.serve:
            dra_pb[v][1].add_DRAPluginServicer_to_server(self._dra(v), dra)
        if self.info["endpoint"] == "":  # the registration socket serves the DRA API too
            reg = dra
        else:
            dra.add_insecure_port("unix:" + self.dra_socket)
            dra.start()
            self.servers.append(dra)
            reg = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        reg_grpc.add_RegistrationServicer_to_server(self._registration(), reg)
        reg.add_insecure_port("unix:" + self.reg_socket)
        reg.start()
        self.servers.append(reg)
        return self

    def stop(self, remove=True):
        for s in self.servers:
            s.stop(0).wait()
        self.servers = []
        if remove:
            for p in (self.reg_socket, self.dra_socket):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass

    def wait_notification(self, count=1, timeout=10):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.notifications) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.name}: {len(self.notifications)} notifications, want {count}")
                self.cond.wait(left)
            return self.notifications[count - 1]


@pytest.fixture
def dirs():
    d = pathlib.Path(tempfile.mkdtemp(prefix="dke-"))  # short: unix socket paths are limited
    (d / "reg").mkdir()
    (d / "plugins").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def plugins(dirs):
    started = []

    def make(**kw):
        p = FakeDraPlugin(dirs / "reg", dirs / "plugins", **kw)
        started.append(p)
        return p.start()
    yield make
    for p in started:
        p.stop()


@pytest.fixture
def kubelet_factory(dirs):
    made = []

    def make(**kw):
        k = dra_emu.DraKubelet(dirs / "reg", **kw)
        made.append(k)
        return k
    yield make
    for k in made:
        k.stop()


@pytest.fixture
def kubelet(kubelet_factory):
    return kubelet_factory()


# ---- registration ----------------------------------------------------------------------------------


def test_registers_and_prefers_v1(kubelet, plugins):
    p = plugins()
    reg = kubelet.wait_registered(DRIVER)
    assert reg.service == "v1.DRAPlugin" and reg.version == "v1"
    assert reg.endpoint == p.dra_socket and reg.socket == p.reg_socket
    assert p.wait_notification() == (True, "")
    assert kubelet.wait_attempt(p.reg_socket).notified is True
    assert kubelet.drivers() == [DRIVER]
    r = kubelet.prepare(DRIVER, [("default", "a", UID_A)])
    assert r.ok, r.errors
    assert r.version == "v1" and p.calls[-1][:2] == ("v1", "prepare")
    assert r.cdi_ids(UID_A) == [f"example.com/claim={UID_A}-dev-0"]
    assert r.claims[UID_A].devices[0] == {"request_names": ["gpu"], "pool_name": "node-a",
                                          "device_name": "dev-0",
                                          "cdi_device_ids": [f"example.com/claim={UID_A}-dev-0"]}


def test_plugin_order_decides(kubelet, plugins):
    """Kubelet 1.36 walks the plugin's list: v1beta1 listed first is chosen."""
    p = plugins(info={"supported_versions": ["v1beta1.DRAPlugin", "v1.DRAPlugin"]})
    assert kubelet.wait_registered(DRIVER).service == "v1beta1.DRAPlugin"
    assert kubelet.prepare(DRIVER, [("ns", "a", UID_A)]).ok
    assert p.calls[-1][0] == "v1beta1"


def test_old_kubelet_speaks_v1beta1(kubelet_factory, plugins):
    kubelet = kubelet_factory(services=dra_emu.OLD_KUBELET_SERVICES)
    p = plugins()
    assert kubelet.wait_registered(DRIVER).service == "v1beta1.DRAPlugin"
    assert kubelet.prepare(DRIVER, ["ns/a/" + UID_A]).ok
    assert kubelet.unprepare(DRIVER, ["ns/a/" + UID_A]).ok
    assert [c[:2] for c in p.calls] == [("v1beta1", "prepare"), ("v1beta1", "unprepare")]


def test_old_kubelet_rejects_v1_only_plugin(kubelet_factory, plugins):
    kubelet = kubelet_factory(services=dra_emu.OLD_KUBELET_SERVICES)
    p = plugins(info={"supported_versions": ["v1.DRAPlugin"]}, serve=("v1",))
    assert p.wait_notification() == (False, (
        "RegisterPlugin error -- plugin validation failed with err: none of services supported by "
        "the plugin ([v1.DRAPlugin]) are supported by the kubelet ([v1beta1.DRAPlugin])"))
    assert kubelet.registered(DRIVER) is None


@pytest.mark.parametrize("info, text", [
    ({"type": "CSIPlugin"}, "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin"),
    ({"type": ""}, "RegisterPlugin error -- no handler registered for plugin type: "),
    ({"supported_versions": []}, "RegisterPlugin error -- plugin validation failed with err: empty "
                                 "list of supported gRPC services (aka supported versions)"),
    ({"supported_versions": ["v1alpha3.DRAPlugin", "v1alpha1.DRAResourceHealth"]},
     "RegisterPlugin error -- plugin validation failed with err: none of services supported by the "
     "plugin ([v1alpha3.DRAPlugin v1alpha1.DRAResourceHealth]) are supported by the kubelet "
     "([v1.DRAPlugin v1beta1.DRAPlugin])"),
    ({"name": ""}, "RegisterPlugin error -- plugin validation failed with err: DRA driver name is empty"),
    ({"endpoint": "plugins/dra.sock"}, "RegisterPlugin error -- plugin validation failed with err: "
                                       "endpoint 'plugins/dra.sock' is not an absolute path"),
])
def test_rejections(kubelet, plugins, info, text):
    p = plugins(info=info)
    assert p.wait_notification() == (False, text)
    att = kubelet.wait_attempt(p.reg_socket)
    assert not att.accepted and att.error == text and att.notified is True
    assert kubelet.registered(info.get("name", DRIVER)) is None
    assert kubelet.drivers() == []
    assert kubelet.events("reject")[0].data["error"] == text


def test_health_service_alongside_is_fine(kubelet, plugins):
    plugins(info={"supported_versions": ["v1alpha1.DRAResourceHealth", "v1.DRAPlugin"]})
    assert kubelet.wait_registered(DRIVER).service == "v1.DRAPlugin"


def test_rejected_plugin_is_retried_with_backoff(kubelet, plugins):
    p = plugins(info={"supported_versions": []})
    first = p.wait_notification(1)
    second = p.wait_notification(2, timeout=5)
    assert first == second and first[0] is False
    atts = kubelet.registrations(socket=p.reg_socket)
    assert atts[1].t - atts[0].t >= dra_emu.BACKOFF_INITIAL * 0.9


def test_no_retry_when_disabled(kubelet_factory, plugins):
    kubelet = kubelet_factory(retry=False)
    p = plugins(info={"type": "CSIPlugin"})
    p.wait_notification(1)
    # With retries the next attempt would come 0.5 s (5 scans) later; wait for 10 scans.
    start = kubelet.scans()
    kubelet.wait_for(lambda: kubelet.scans() >= start + 10, timeout=5)
    assert len(kubelet.registrations(socket=p.reg_socket)) == 1 and p.notifications == [
        (False, "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin")]


def test_empty_endpoint_means_the_registration_socket(kubelet, plugins):
    p = plugins(info={"endpoint": ""})
    reg = kubelet.wait_registered(DRIVER)
    assert reg.endpoint == p.reg_socket
    assert kubelet.prepare(DRIVER, [("ns", "a", UID_A)]).ok


def test_endpoint_already_registered(kubelet, plugins):
    first = plugins()
    kubelet.wait_registered(DRIVER)
    second = plugins(reg_name="other-reg.sock", info={"endpoint": first.dra_socket})
    assert second.wait_notification() == (False, (
        f"RegisterPlugin error -- plugin registration failed with err: endpoint {first.dra_socket} "
        f"already registered for DRA driver plugin {DRIVER}"))
    assert kubelet.registered(DRIVER).socket == first.reg_socket


def test_slow_get_info_is_not_registered(kubelet, plugins):
    p = plugins(info_delay=1.5)
    att = kubelet.wait_attempt(p.reg_socket, timeout=5)
    assert not att.accepted and att.info is None and att.notified is None
    assert att.error.startswith(f"RegisterPlugin error -- failed to get plugin info using RPC GetInfo "
                                f"at socket {p.reg_socket}, err: rpc error: code = DeadlineExceeded")
    assert p.notifications == []


def test_deregister_and_reregister(kubelet, plugins):
    p = plugins()
    first = kubelet.wait_registered(DRIVER)
    p.stop()  # removes both sockets
    kubelet.wait_deregistered(DRIVER)
    assert first.deregistered is not None and not first.current
    assert [e.kind for e in kubelet.events(driver=DRIVER)][-1] == "deregister"
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A)])
    assert r.error == f"DRA driver {DRIVER} is not registered"
    p.start()  # a re-created socket: registered again
    second = kubelet.wait_registered(DRIVER, since=first.seq + 1)
    assert second.seq > first.seq and second.current
    assert p.wait_notification(2) == (True, "")
    assert kubelet.prepare(DRIVER, [("ns", "a", UID_A)]).ok


def test_replaced_socket_is_a_new_plugin(kubelet, plugins):
    """The socket file is replaced at the same path (renamed over it): deregister, register again."""
    old = plugins()
    first = kubelet.wait_registered(DRIVER)
    # The new instance serves everything on its registration socket, made under a dot name the
    # watcher ignores and then renamed over the old one.
    new = plugins(reg_name=".swap-reg.sock", info={"endpoint": ""})
    os.rename(new.reg_socket, old.reg_socket)
    second = kubelet.wait_registered(DRIVER, since=first.seq + 1)
    assert first.deregistered is not None and second.current
    assert second.endpoint == old.reg_socket and new.notifications == [(True, "")]
    assert second.file_key == kubelet.file_key(old.reg_socket) != first.file_key
    assert kubelet.prepare(DRIVER, [("ns", "a", UID_A)]).ok
    assert new.calls and not old.calls


def test_recursive_and_dot_names(kubelet, dirs):
    sub = dirs / "reg" / "sub"
    sub.mkdir()
    hidden = FakeDraPlugin(dirs / "reg", dirs / "plugins", name="hidden.example.com",
                           reg_name=".hidden-reg.sock").start()
    nested = FakeDraPlugin(sub, dirs / "plugins", name="nested.example.com").start()
    try:
        kubelet.wait_registered("nested.example.com")
        # The dot socket was there before the nested one, so the scans that found the nested one
        # saw it too.
        assert kubelet.registrations(socket=hidden.reg_socket) == []
        assert hidden.get_info_calls == 0
        (dirs / "reg" / "not-a-socket.sock").write_text("")
        nested.stop()
        kubelet.wait_deregistered("nested.example.com")
        assert kubelet.registrations(socket=str(dirs / "reg" / "not-a-socket.sock")) == []
    finally:
        hidden.stop()
        nested.stop()


def test_kubelet_restart_registers_again(kubelet, plugins):
    p = plugins()
    first = kubelet.wait_registered(DRIVER)
    kubelet.restart()
    second = kubelet.wait_registered(DRIVER, since=first.seq + 1)
    assert p.get_info_calls == 2 and p.wait_notification(2) == (True, "")
    assert second.seq > first.seq and not first.current


def test_two_drivers(kubelet, plugins):
    a = plugins()
    b = plugins(name="other.example.com")
    kubelet.wait_registered(DRIVER)
    kubelet.wait_registered("other.example.com")
    assert kubelet.drivers() == sorted([DRIVER, "other.example.com"])
    assert kubelet.prepare("other.example.com", [("ns", "a", UID_A)]).ok
    assert a.calls == [] and len(b.calls) == 1


# ---- NodePrepareResources / NodeUnprepareResources --------------------------------------------------


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_prepare_unprepare_both_versions(kubelet, plugins, version):
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.share_id = "share-1"
    claims = [("ns", "a", UID_A), ("ns", "b", UID_B)]
    r = kubelet.prepare(DRIVER, claims, version=version)
    assert r.ok and r.version == version and r.code == "OK"
    assert list(r.claims) == [UID_A, UID_B]
    dev = r.claims[UID_A].devices[0]
    assert ("share_id" in dev) == (version == "v1")
    assert p.calls[-1] == (version, "prepare", claims)
    assert set(kubelet.prepared(DRIVER)) == {UID_A, UID_B}
    again = kubelet.prepare(DRIVER, claims, version=version)
    assert again.to_dict()["claims"] == r.to_dict()["claims"]
    u = kubelet.unprepare(DRIVER, claims[:1], version=version)
    assert u.ok and u.claims[UID_A].answered and p.calls[-1] == (version, "unprepare", claims[:1])
    assert "devices" not in u.to_dict()["claims"][UID_A]
    assert set(kubelet.prepared(DRIVER)) == {UID_B}


def test_server_without_v1beta1(kubelet, plugins):
    """A driver that lists v1beta1 but does not serve it: the call fails as the kubelet's would."""
    plugins(serve=("v1",))
    kubelet.wait_registered(DRIVER)
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A)], version="v1beta1")
    assert not r.ok and r.code == "Unimplemented"
    assert r.error.startswith("NodePrepareResources: rpc error: code = Unimplemented")


def test_per_claim_error(kubelet, plugins):
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.per_claim_error[UID_B] = "claim not allocated"
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A), ("ns", "b", UID_B)])
    assert not r.ok
    assert r.errors == ["NodePrepareResources failed for ResourceClaim b: claim not allocated"]
    assert r.claims[UID_B].error == "claim not allocated" and r.claims[UID_A].devices
    assert set(kubelet.prepared(DRIVER)) == {UID_A}
    u = kubelet.unprepare(DRIVER, [("ns", "b", UID_B)])
    assert u.errors == ["NodeUnprepareResources failed for ResourceClaim b: claim not allocated"]


def test_left_out_claims(kubelet, plugins):
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.omit = {UID_A, UID_B}
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A), ("ns", "b", UID_B), ("ns", "x", UID_X)])
    assert r.errors == ["NodePrepareResources left out 2 claims"]
    assert not r.claims[UID_A].answered and r.claims[UID_X].answered
    u = kubelet.unprepare(DRIVER, [("ns", "a", UID_A)])
    assert u.errors == ["NodeUnprepareResources left out 1 claims"]


def test_unknown_uid(kubelet, plugins):
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.extra = {UID_X}
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A)])
    assert r.errors == [f"NodePrepareResources returned result for unknown claim UID {UID_X}"]
    assert r.claims[UID_X].requested is False
    u = kubelet.unprepare(DRIVER, [("ns", "a", UID_A)])
    assert u.errors == [f"NodeUnprepareResources returned result for unknown claim UID {UID_X}"]


def test_all_checks_reported_in_order(kubelet, plugins):
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.per_claim_error[UID_A] = "boom"
    p.omit = {UID_B}
    p.extra = {UID_X}
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A), ("ns", "b", UID_B)])
    assert r.errors == ["NodePrepareResources failed for ResourceClaim a: boom",
                        f"NodePrepareResources returned result for unknown claim UID {UID_X}",
                        "NodePrepareResources left out 1 claims"]
    assert r.error == r.errors[0]


def test_whole_call_failure(kubelet, plugins):
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.abort = (grpc.StatusCode.INTERNAL, "checkpoint unreadable")
    r = kubelet.prepare(DRIVER, [("ns", "a", UID_A)])
    assert r.code == "Internal"
    assert r.errors == ["NodePrepareResources: rpc error: code = Internal desc = checkpoint unreadable"]
    assert kubelet.prepared() == {}


def test_deadline(kubelet_factory, plugins):
    kubelet = kubelet_factory(call_timeout=0.3)
    p = plugins()
    kubelet.wait_registered(DRIVER)
    p.delay = 1.0
    r = kubelet.unprepare(DRIVER, [("ns", "a", UID_A)])
    assert r.code == "DeadlineExceeded" and 0.25 < r.seconds < 0.9
    assert r.error.startswith("NodeUnprepareResources: rpc error: code = DeadlineExceeded")


def test_default_call_deadline_is_the_kubelets():
    assert dra_emu.CALL_TIMEOUT == 45.0 and dra_emu.GET_INFO_TIMEOUT == 1.0
    assert dra_emu.POLL_INTERVAL == 0.1


def test_claim_forms():
    want = dra_emu.Claim("ns", "a", UID_A)
    assert dra_emu.Claim.of(("ns", "a", UID_A)) == want
    assert dra_emu.Claim.of(f"ns/a/{UID_A}") == want
    assert dra_emu.Claim.of({"namespace": "ns", "name": "a", "uid": UID_A}) == want
    assert dra_emu.parse_claims(f"ns/a/{UID_A},ns/b/{UID_B}")[1].uid == UID_B
    with pytest.raises(ValueError):
        dra_emu.Claim.of("ns/a")


# ---- CLI -------------------------------------------------------------------------------------------


def _cli(*args, timeout=30):
    env = dict(os.environ)
    return subprocess.run([PY, str(TOOL / "kubelet-emu"), "dra", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _json_docs(text):
    dec, docs, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        doc, i = dec.raw_decode(text, i)
        docs.append(doc)
    return docs


def test_cli_prepare_unprepare(dirs, plugins):
    p = plugins()
    out = _cli("--registrar-dir", dirs / "reg", "--driver", DRIVER, "--prepare",
               f"ns/a/{UID_A},ns/b/{UID_B}", "--unprepare", f"ns/a/{UID_A}")
    assert out.returncode == 0, out.stderr
    prep, unprep = _json_docs(out.stdout)
    assert prep["method"] == "NodePrepareResources" and prep["ok"] and prep["version"] == "v1"
    assert prep["claims"][UID_B]["devices"][0]["cdi_device_ids"] == [f"example.com/claim={UID_B}-dev-1"]
    assert unprep["method"] == "NodeUnprepareResources" and unprep["ok"]
    assert [c[1] for c in p.calls] == ["prepare", "unprepare"]
    events = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    assert any(e["kind"] == "register" and e["driver"] == DRIVER for e in events)


def test_cli_failure_and_old_kubelet(dirs, plugins):
    p = plugins()
    p.per_claim_error[UID_A] = "no such claim"
    out = _cli("--registrar-dir", dirs / "reg", "--old-kubelet", "--quiet", "--prepare", f"ns/a/{UID_A}")
    assert out.returncode == 1
    (doc,) = _json_docs(out.stdout)
    assert doc["version"] == "v1beta1" and not doc["ok"]
    assert doc["error"] == "NodePrepareResources failed for ResourceClaim a: no such claim"
    assert out.stderr == ""


def test_cli_nothing_registers(dirs):
    t0 = time.monotonic()
    out = _cli("--registrar-dir", dirs / "reg", "--timeout", "0.5", "--prepare", f"ns/a/{UID_A}")
    assert out.returncode == 2 and "timed out" in out.stderr
    assert time.monotonic() - t0 < 15


def test_cli_bad_claim(dirs):
    out = _cli("--registrar-dir", dirs / "reg", "--prepare", "ns/a")
    assert out.returncode == 2 and "want namespace/name/uid" in out.stderr


def test_own_temp_directory(dirs):
    kubelet = dra_emu.DraKubelet()
    p = FakeDraPlugin(kubelet.dir, dirs / "plugins").start()
    try:
        first = kubelet.wait_registered(DRIVER)
        kubelet.restart()  # keeps the directory and the plugin's socket
        assert kubelet.wait_registered(DRIVER, since=first.seq + 1).socket == p.reg_socket
    finally:
        kubelet.stop()
        p.stop()
    assert not os.path.exists(kubelet.dir)
