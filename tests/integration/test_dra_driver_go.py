# SPDX-License-Identifier: Apache-2.0
"""`gpuplane dra-driver` against a kubelet on grpc-go, the library the real kubelet uses: the
registration handshake and NodePrepareResources / NodeUnprepareResources over v1 and v1beta1, made
by tests/interop/go/dra-kubelet (built by tests/interop/build-go-peer.sh from the project's own
.proto files). test_dra_driver.py covers the behaviour with the Python emulator; these tests check
that grpc-go's framing, codec and status handling meet the driver's. The node, the fake API server
and the claims (allocated by `gpuplane allocate`, stored with reservedFor) are test_dra_driver.py's.

The Python kubelet emulator is stopped before the driver starts, so the only kubelet the driver
talks to is the Go one. Skipped only where Go or Debian's Go packages are missing."""
import json
import os
import subprocess
import uuid

import pytest
import yaml

import rpcpeers
from conftest import BUILD
from test_dra_driver import (DRIVER, KIND, NODE, devices_of, driver_roots, node,  # noqa: F401
                             ref, wait_until)


@pytest.fixture(scope="session")
def go_kubelet():
    why = rpcpeers.go_missing()
    if why:
        pytest.skip(f"the grpc-go DRA kubelet cannot be built: {why}")
    return rpcpeers.build_go_dra_kubelet(BUILD)


class GoKubelet:
    """Runs the Go kubelet's commands against one node; each returns (exit status, JSON answer)."""

    def __init__(self, binary, drv):
        self.binary, self.node = binary, drv

    def run(self, *args):
        p = subprocess.run([str(self.binary), *map(str, args)], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode in (0, 1), f"exit {p.returncode}: {p.stderr}"
        lines = p.stdout.splitlines()
        assert len(lines) == 1, p.stdout + p.stderr
        return p.returncode, json.loads(lines[0])

    def register(self, *args):
        return self.run("register", "--socket", self.node.reg_sock, *args)

    def call(self, op, *claims, version="v1"):
        args = [op, "--endpoint", self.node.dra_sock, "--version", version]
        for c in claims:
            args += ["--claim", "/".join(ref(c))]
        return self.run(*args)

    def prepare(self, *claims, version="v1"):
        rc, out = self.call("prepare", *claims, version=version)
        assert rc == 0, out
        assert out["version"] == version
        assert set(out["claims"]) == {ref(c)[2] for c in claims}, "every requested UID is answered"
        return out["claims"]

    def unprepare(self, *claims, version="v1"):
        rc, out = self.call("unprepare", *claims, version=version)
        assert rc == 0, out
        assert set(out["claims"]) == {ref(c)[2] for c in claims}
        return out["claims"]


@pytest.fixture
def go_node(node, go_kubelet):  # noqa: F811 (the fixture imported above)
    """A node serving, its slices published, with no kubelet but the Go one (not yet registered)."""
    node.kubelet.stop()
    node.start(wait="serving")
    assert node.proc.poll() is None, node.log()
    wait_until(node.reg_sock.exists, what="the registration socket")
    node.wait_slices()
    node.go = GoKubelet(go_kubelet, node)
    return node


def spec_cdi_ids(drv, uid):
    """The fully qualified CDI device names of the spec the driver wrote for a claim."""
    spec = yaml.safe_load(drv.spec_path(uid).read_text())
    return sorted(f"{spec['kind']}={d['name']}" for d in spec["devices"])


# ---- registration ----


def test_registration_handshake_picks_v1(go_node):
    rc, out = go_node.go.register()
    assert rc == 0, out
    assert out["info"] == {"type": "DRAPlugin", "name": DRIVER, "endpoint": str(go_node.dra_sock),
                           "supported_versions": ["v1.DRAPlugin", "v1beta1.DRAPlugin"]}
    assert out["service"] == "v1.DRAPlugin" and out["version"] == "v1"
    assert out["registered"] and out["notified"]
    wait_until(lambda: "registered with the kubelet" in go_node.log(), what="the registration log")


def test_an_older_kubelet_picks_v1beta1(go_node):
    rc, out = go_node.go.register("--services", "v1beta1.DRAPlugin")
    assert rc == 0, out
    assert out["service"] == "v1beta1.DRAPlugin" and out["version"] == "v1beta1"
    assert out["notified"]


def test_a_kubelet_without_a_common_service_refuses(go_node):
    rc, out = go_node.go.register("--services", "v2.DRAPlugin")
    assert rc == 1
    assert not out["registered"] and out["notified"]
    assert "none of the services" in out["error"]
    wait_until(lambda: "the kubelet refused the registration" in go_node.log(), what="the refusal log")
    assert go_node.proc.poll() is None


# ---- prepare and unprepare ----


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_prepare_returns_the_cdi_ids_of_the_written_spec(go_node, version):
    c = go_node.claim("a", count=2)
    uid = c["metadata"]["uid"]
    answer = go_node.go.prepare(c, version=version)[uid]
    assert answer["error"] == ""
    devs = answer["devices"]
    assert [d["device_name"] for d in devs] == devices_of(c)
    for d in devs:
        assert d["request_names"] == ["gpu"]
        assert d["pool_name"] == NODE
        assert d["cdi_device_ids"] == [f"{KIND}={uid}-{d['device_name']}"]
        assert "share_id" not in d  # whole GPUs are not multi-allocatable
    ids = sorted(i for d in devs for i in d["cdi_device_ids"])
    assert ids == spec_cdi_ids(go_node, uid)
    assert go_node.entries()[uid]["state"] == "PrepareCompleted"


def test_both_versions_answer_a_prepared_claim_alike(go_node):
    c = go_node.claim("both")
    uid = c["metadata"]["uid"]
    v1 = go_node.go.prepare(c, version="v1")[uid]
    v1beta1 = go_node.go.prepare(c, version="v1beta1")[uid]
    assert v1["error"] == "" and v1 == v1beta1
    assert [i for d in v1["devices"] for i in d["cdi_device_ids"]] == spec_cdi_ids(go_node, uid)


def test_prepare_is_idempotent(go_node):
    c = go_node.claim("b")
    uid = c["metadata"]["uid"]
    first = go_node.go.prepare(c)[uid]
    assert first["error"] == "" and first["devices"]
    before = os.stat(go_node.spec_path(uid))
    again = go_node.go.prepare(c)[uid]
    assert again == first
    after = os.stat(go_node.spec_path(uid))
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert list(go_node.entries()) == [uid]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_unprepare_removes_spec_and_entry(go_node, version):
    c = go_node.claim("c")
    uid = c["metadata"]["uid"]
    assert go_node.go.prepare(c, version=version)[uid]["error"] == ""
    assert go_node.spec_path(uid).exists()
    assert go_node.go.unprepare(c, version=version) == {uid: {"error": ""}}
    assert not go_node.spec_path(uid).exists()
    assert uid not in go_node.entries()
    # again, and a claim the driver never saw: both fine
    never = ("default", "never", str(uuid.uuid4()))
    assert go_node.go.unprepare(c, never, version=version) == {uid: {"error": ""},
                                                              never[2]: {"error": ""}}


def test_per_claim_errors_arrive_as_the_claims_error(go_node):
    good = go_node.claim("good")
    wrong_uid = ("default", "good", str(uuid.uuid4()))
    missing = ("default", "missing", str(uuid.uuid4()))
    claims = go_node.go.prepare(good, wrong_uid, missing)
    assert claims[good["metadata"]["uid"]]["error"] == ""
    assert claims[good["metadata"]["uid"]]["devices"]
    assert "UID" in claims[wrong_uid[2]]["error"]
    assert claims[wrong_uid[2]]["devices"] == []
    assert "not found" in claims[missing[2]]["error"]
    assert list(go_node.entries()) == [good["metadata"]["uid"]]
    assert [p.name for p in go_node.cdi.iterdir()] == [go_node.spec_path(good["metadata"]["uid"]).name]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_malformed_request_is_a_status_error_and_the_driver_stays(go_node, version):
    for op in ("prepare", "unprepare"):
        rc, out = go_node.go.call(op, ("default", "x", ""), version=version)
        assert rc == 1, out
        assert "claims" not in out
        assert out["status"]["name"] == "INVALID_ARGUMENT" and out["status"]["code"] == 3
        assert out["status"]["message"]
    assert go_node.proc.poll() is None
    assert go_node.go.prepare(version=version) == {}  # an empty request is well formed
    c = go_node.claim("after")
    assert go_node.go.prepare(c, version=version)[c["metadata"]["uid"]]["error"] == ""
