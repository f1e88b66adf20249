# SPDX-License-Identifier: Apache-2.0
"""gRPC interop: gpuplane's own gRPC layer (src/rpc, through the C peer rpc-peer) against the real
implementations the kubelet side uses, python3-grpcio and grpc-go.

Server side: rpc-peer serves the Interop test service (tests/interop/interop.proto) and the Python
and Go peers call it: unary calls, concurrent streams, cancellation, a client killed mid-stream,
unknown methods, size limits, deadlines, graceful shutdown with open streams, 100 connections.
Client side: rpc-peer calls Python and Go servers: success, error status and message, a missing
socket.

GPUPLANE_INTEROP_SERVER=python|go runs the server-side tests against a reference server instead of
rpc-peer, which checks the tests themselves.
"""
import os
import signal
import socket

import pytest

import kubeproto
import rpcpeers
from google.protobuf import descriptor_pb2
from rpcpeers import BUILD, poll

CLIENTS = ("python", "go")
SERVER = os.environ.get("GPUPLANE_INTEROP_SERVER", "c")
SERVICE = "/gpuplane.interop.Interop/"
MIB = 1024 * 1024

OK, CANCELLED, DEADLINE_EXCEEDED, NOT_FOUND = 0, 1, 4, 5
FAILED_PRECONDITION, RESOURCE_EXHAUSTED, UNIMPLEMENTED, UNAVAILABLE = 9, 8, 12, 14


@pytest.fixture(scope="session")
def go_peer():
    # Until the top-level CMakeLists.txt has add_subdirectory(tests/interop), the build has no
    # rpc-peer; once it has, a missing rpc-peer is a failure.
    if not (BUILD / "tests" / "interop").is_dir():
        pytest.skip("tests/interop is not part of this build")
    return rpcpeers.build_go_peer(BUILD)


@pytest.fixture
def procs(tmp_path, go_peer):
    p = rpcpeers.Procs(BUILD, tmp_path, go_peer)
    yield p
    p.kill_all()


@pytest.fixture
def server(procs, tmp_path):
    """The server under test (rpc-peer unless GPUPLANE_INTEROP_SERVER says otherwise)."""
    srv = procs.serve(SERVER, tmp_path / "interop.sock")
    yield srv
    stop_server(srv)


def stop_server(srv):
    """Graceful stop (SIGTERM) unless the test stopped it; either way it must exit 0 (under ASan
    that includes no leaks)."""
    if srv.alive():
        srv.signal(signal.SIGTERM)
    assert srv.wait() == 0, srv.stderr()


def stats(procs, client, server):
    reply = procs.call(client, server.socket, "--method", "Stats")
    assert reply["code"] == OK, reply
    return reply["reply"]


def wait_cancels(procs, client, server, more_than):
    """Polls Stats until the server has seen more than `more_than` cancelled calls."""
    return poll(lambda: stats(procs, client, server)["cancels"] > more_than,
                what=f"the server to count a cancel (had {more_than})")


def assert_serving(procs, client, server):
    assert server.alive(), server.stderr()
    reply = procs.call(client, server.socket, "--method", "Echo", "--text", "still there")
    assert reply["code"] == OK and reply["reply"]["text"] == "still there", reply


# ---- our server, their clients ----

@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("text,payload,reply_size", [
    ("hello", 0, 0),
    ("grüße, 世界 100%", 100_000, 0),  # several DATA frames
    ("big reply", 10, 3 * MIB),  # flow control on our send side
    ("big request", 3 * MIB, 0),  # flow control on our receive side
])
def test_unary_round_trip(procs, server, client, text, payload, reply_size):
    reply = procs.call(client, server.socket, "--method", "Echo", "--text", text,
                       "--payload-size", payload, "--reply-size", reply_size)
    assert reply["code"] == OK, reply
    assert reply["reply"] == {"text": text, "payload_size": reply_size or payload}


@pytest.mark.parametrize("client", CLIENTS)
def test_three_concurrent_streams(procs, server, client):
    lines = procs.run(client, "count", "--socket", server.socket, "--streams", 3, "--count", 5,
                      "--interval-ms", 10)
    for stream in range(3):
        got = [x["n"] for x in lines if x["stream"] == stream and "n" in x]
        ends = [x for x in lines if x["stream"] == stream and x.get("end")]
        assert got == [1, 2, 3, 4, 5], lines
        assert len(ends) == 1 and ends[0]["code"] == OK and ends[0]["received"] == 5, ends


@pytest.mark.parametrize("client", CLIENTS)
def test_client_cancels_stream(procs, server, client):
    before = stats(procs, client, server)["cancels"]
    lines = procs.run(client, "count", "--socket", server.socket, "--count", 0,
                      "--interval-ms", 10, "--cancel-after", 3)
    assert lines[-1]["end"] and lines[-1]["code"] == CANCELLED and lines[-1]["received"] == 3, lines
    wait_cancels(procs, client, server, before)
    assert_serving(procs, client, server)


@pytest.mark.parametrize("client", CLIENTS)
def test_client_killed_mid_stream(procs, server, client):
    before = stats(procs, client, server)["cancels"]
    victim = procs.start(client, "count", "--socket", server.socket, "--count", 0,
                         "--interval-ms", 10)
    for n in (1, 2, 3):
        assert victim.json_line() == {"stream": 0, "n": n}
    victim.signal(signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL
    wait_cancels(procs, client, server, before)
    assert_serving(procs, client, server)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("path", [SERVICE + "Nope", "/gpuplane.interop.Nope/Echo"])
def test_unknown_method(procs, server, client, path):
    reply = procs.call(client, server.socket, "--method", "Echo", "--path", path)
    assert reply["code"] == UNIMPLEMENTED and reply["reply"] is None, reply
    assert_serving(procs, client, server)


@pytest.mark.parametrize("client", CLIENTS)
def test_oversized_request(procs, server, client):
    reply = procs.call(client, server.socket, "--method", "Echo", "--payload-size", 5 * MIB)
    assert reply["code"] == RESOURCE_EXHAUSTED, reply
    assert_serving(procs, client, server)


@pytest.mark.parametrize("client", CLIENTS)
def test_reply_over_client_limit(procs, server, client):
    """Our server sends a 5 MiB reply; the client's 4 MiB receive limit rejects it."""
    reply = procs.call(client, server.socket, "--method", "Echo", "--reply-size", 5 * MIB)
    assert reply["code"] == RESOURCE_EXHAUSTED, reply
    assert_serving(procs, client, server)


@pytest.mark.parametrize("client", CLIENTS)
def test_deadline_exceeded(procs, server, client):
    before = stats(procs, client, server)["cancels"]
    reply = procs.call(client, server.socket, "--method", "Sleep", "--ms", 10_000,
                       "--timeout-ms", 200, timeout=8)
    assert reply["code"] == DEADLINE_EXCEEDED, reply
    wait_cancels(procs, client, server, before)
    assert_serving(procs, client, server)


@pytest.mark.parametrize("client", CLIENTS)
def test_shutdown_with_open_streams(procs, server, client):
    streams = procs.start(client, "count", "--socket", server.socket, "--streams", 3,
                          "--count", 0, "--interval-ms", 20)
    seen = set()
    while len(seen) < 3:
        seen.add(streams.json_line()["stream"])
    server.signal(signal.SIGTERM)
    ends = []
    while (line := streams.json_line()) is not None:
        if line.get("end"):
            ends.append(line)
    assert sorted(e["stream"] for e in ends) == [0, 1, 2], ends
    assert all(e["code"] == OK for e in ends), ends
    assert streams.wait() == 0
    assert server.wait() == 0, server.stderr()
    assert not os.path.exists(server.socket)


@pytest.mark.parametrize("client", CLIENTS)
def test_hundred_connections(procs, server, client):
    lines = procs.run(client, "many", "--socket", server.socket, "--connections", 100)
    assert lines == [{"ok": 100, "codes": {"OK": 100}}]
    if SERVER == "c":
        assert stats(procs, client, server)["max_connections"] >= 100
    assert_serving(procs, client, server)


# ---- our client, their servers ----

@pytest.fixture(params=["python", "go"])
def their_server(request, procs, tmp_path):
    srv = procs.serve(request.param, tmp_path / f"{request.param}.sock")
    yield srv
    assert srv.alive(), srv.stderr()
    stop_server(srv)


def test_our_client_success(procs, their_server):
    reply = procs.call("c", their_server.socket, "--method", "Echo", "--text", "grüße 100%",
                       "--payload-size", 100_000, "--reply-size", MIB)
    assert reply == {"code": OK, "name": "OK", "message": "",
                     "reply": {"text": "grüße 100%", "payload_size": MIB}}


@pytest.mark.parametrize("code,message", [
    (NOT_FOUND, "plain"),
    (FAILED_PRECONDITION, "100% done, %41 is not A, %zz stays"),
    (NOT_FOUND, "grüße 世界 ✓"),
    (UNAVAILABLE, "line one\nline two\ttab"),
])
def test_our_client_error_status(procs, their_server, code, message):
    reply = procs.call("c", their_server.socket, "--method", "Fail", "--code", code,
                       "--message", message)
    assert (reply["code"], reply["message"], reply["reply"]) == (code, message, None), reply


def test_our_client_unknown_method(procs, their_server):
    reply = procs.call("c", their_server.socket, "--method", "Echo", "--path", SERVICE + "Nope")
    assert reply["code"] == UNIMPLEMENTED, reply


def test_our_client_deadline(procs, their_server):
    reply = procs.call("c", their_server.socket, "--method", "Sleep", "--ms", 10_000,
                       "--timeout-ms", 200, timeout=8)
    assert reply["code"] == DEADLINE_EXCEEDED, reply


def test_our_client_missing_socket(procs, tmp_path):
    reply = procs.call("c", tmp_path / "nobody.sock", "--method", "Echo")
    assert reply["code"] == UNAVAILABLE and reply["name"] == "UNAVAILABLE", reply


def test_our_client_nobody_listening(procs, tmp_path):
    """A socket file without a listener (a crashed server) is UNAVAILABLE too."""
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    reply = procs.call("c", path, "--method", "Echo")
    assert reply["code"] == UNAVAILABLE, reply


# ---- the kubelet APIs of proto/ ----

# Every method path of kubelet-apis.md, byte for byte, and whether it streams.
KUBELET_METHODS = {
    "deviceplugin/v1beta1/api.proto": {
        "/v1beta1.Registration/Register": False,
        "/v1beta1.DevicePlugin/GetDevicePluginOptions": False,
        "/v1beta1.DevicePlugin/ListAndWatch": True,
        "/v1beta1.DevicePlugin/GetPreferredAllocation": False,
        "/v1beta1.DevicePlugin/Allocate": False,
        "/v1beta1.DevicePlugin/PreStartContainer": False,
    },
    "pluginregistration/v1/api.proto": {
        "/pluginregistration.Registration/GetInfo": False,
        "/pluginregistration.Registration/NotifyRegistrationStatus": False,
    },
    "dra/v1/api.proto": {
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources": False,
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources": False,
    },
    "dra/v1beta1/api.proto": {
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources": False,
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources": False,
    },
    "drahealth/v1alpha1/api.proto": {"/v1alpha1.DRAResourceHealth/NodeWatchResources": True},
    "drahealth/v1/api.proto": {"/v1.DRAResourceHealth/NodeWatchResources": True},
    "podresources/v1/api.proto": {
        "/v1.PodResourcesLister/List": False,
        "/v1.PodResourcesLister/GetAllocatableResources": False,
        "/v1.PodResourcesLister/Get": False,
    },
}


def file_proto(name):
    messages, _ = kubeproto.load(name)
    fdp = descriptor_pb2.FileDescriptorProto()
    messages.DESCRIPTOR.CopyToProto(fdp)
    return fdp


def test_kubelet_method_paths():
    assert sorted(KUBELET_METHODS) == kubeproto.all_kube_protos()
    for name, expected in KUBELET_METHODS.items():
        fdp = file_proto(name)
        got = {f"/{fdp.package}.{svc.name}/{m.name}": m.server_streaming and not m.client_streaming
               for svc in fdp.service for m in svc.method}
        assert got == expected, name


def test_kubelet_optional_fields():
    """share_id has presence (proto3 optional) where the kubelet's has; nothing else does."""
    optional = set()
    for name in kubeproto.all_kube_protos():
        fdp = file_proto(name)
        for msg in fdp.message_type:
            optional |= {f"{fdp.package}.{msg.name}.{f.name}" for f in msg.field
                         if f.proto3_optional}
    assert optional == {"k8s.io.kubelet.pkg.apis.dra.v1.Device.share_id",
                        "v1.ClaimResource.share_id"}
