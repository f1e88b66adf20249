# SPDX-License-Identifier: Apache-2.0
"""src/kube end to end: kube-probe (the client driven from the command line) against fakekube (an
HTTPS API server with a CA of its own). Verbs, Status messages, pagination, conflicts and the
read-modify-write retry, merge patches, watches with bookmarks, re-lists after 410 and reconnects,
token rotation, client certificates, in-cluster configuration, rate limiting; and no bearer token
ever printed, whatever the verbosity."""
import json
import os
import pathlib
import queue
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from conftest import BUILD  # noqa: E402
import fakekube  # noqa: E402

PROBE = BUILD / "tests" / "kube-probe"
PODS = "/api/v1/namespaces/default/pods"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def pod(name, namespace="default", labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def claim(name):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}


def wait_for(cond, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Probe:
    """Runs kube-probe, keeps every output so the test can check no token leaked."""

    def __init__(self, fk):
        self.fk = fk
        self.outputs = []
        self.tokens = {fk.token}
        self.procs = []

    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KUBERNETES_SERVICE_", "GPUPLANE_")) and k != "KUBECONFIG"
               and not k.lower().endswith("_proxy")}  # fakekube is local
        env.update(extra or {})
        return env

    def cmd(self, args, kubeconfig):
        kc = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
        return [str(PROBE), "-v", "10", *kc, *map(str, args)]

    def run(self, *args, kubeconfig="token", env=None, timeout=30):
        kc = self.fk.kubeconfigs[kubeconfig] if kubeconfig in self.fk.kubeconfigs else kubeconfig
        p = subprocess.run(self.cmd(args, kc), capture_output=True, text=True, env=self.env(env),
                           timeout=timeout)
        self.outputs += [p.stdout, p.stderr]
        return p

    def json(self, *args, **kw):
        p = self.run(*args, **kw)
        assert p.returncode == 0, p.stderr[-2000:]
        return [json.loads(line) for line in p.stdout.splitlines()]

    def one(self, *args, **kw):
        out = self.json(*args, **kw)
        assert len(out) == 1, out
        return out[0]

    def start(self, *args, kubeconfig="token", env=None):
        kc = self.fk.kubeconfigs[kubeconfig] if kubeconfig in self.fk.kubeconfigs else kubeconfig
        return Running(self, self.cmd(args, kc), self.env(env))

    def check_no_token(self):
        for p in self.procs:
            p.stop()
        self.tokens.add(self.fk.token)
        for out in self.outputs:
            for t in self.tokens:
                assert t not in out, "a bearer token was printed"


class Running:
    """A kube-probe in the background whose JSON lines arrive on a queue."""

    def __init__(self, probe, cmd, env):
        self.probe = probe
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env)
        self.lines = queue.Queue()
        self.stdout, self.stderr = [], []
        self.t_out = threading.Thread(target=self._read, args=(self.p.stdout, self.stdout, True),
                                      daemon=True)
        self.t_err = threading.Thread(target=self._read, args=(self.p.stderr, self.stderr, False),
                                      daemon=True)
        self.t_out.start()
        self.t_err.start()
        probe.procs.append(self)

    def _read(self, f, keep, parse):
        for line in f:
            keep.append(line)
            if parse:
                self.lines.put(json.loads(line))

    def next(self, timeout=15.0):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line from kube-probe in time; stderr: " +
                                 "".join(self.stderr)[-3000:]) from None

    def until_synced(self, timeout=15.0):
        out = []
        while True:
            ev = self.next(timeout)
            out.append(ev)
            if ev["type"] == "SYNCED":
                return out

    def quiet(self, seconds):
        """Asserts nothing arrives for a while."""
        try:
            ev = self.lines.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected event {ev}")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.t_out.join(timeout=5)
        self.t_err.join(timeout=5)
        self.probe.outputs += ["".join(self.stdout), "".join(self.stderr)]


@pytest.fixture
def fk(tmp_path):
    if not PROBE.exists():
        pytest.skip(f"{PROBE} is not built")
    with fakekube.FakeKube(tmp_path / "fk", bookmark_interval=0.2) as server:
        yield server
        assert server.unexpected_violations() == []


@pytest.fixture
def probe(fk):
    p = Probe(fk)
    yield p
    p.check_no_token()


def names(items):
    return [o["metadata"]["name"] for o in items]


# --- configuration and transport -------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["token", "tokenfile", "cert", "embedded", "embedded-token"])
def test_kubeconfig_variants(fk, probe, variant):
    fk.put(pod("a"))
    res = probe.one("get", f"{PODS}/a", kubeconfig=variant)
    assert res["status"] == 200, res
    assert res["body"]["metadata"]["name"] == "a"
    req = fk.requests("GET", f"{PODS}/a$")[-1]
    assert req["status"] == 200
    assert req["headers"]["User-Agent"].startswith("gpuplane/")
    assert req["headers"]["Accept"] == "application/json"


def test_unauthorized_message_and_no_token(fk, probe):
    # the inline token stops working once rotated; a 401 comes back as the API's Status
    old = fk.token
    fk.rotate_token()
    probe.tokens.add(old)
    res = probe.one("get", f"{PODS}/a", kubeconfig="token")
    assert res["status"] == 401
    assert res["reason"] == "Unauthorized"
    assert res["message"] == "Unauthorized"


def test_debug_log_names_requests_not_tokens(fk, probe):
    fk.put(pod("a"))
    for variant in ("token", "tokenfile", "embedded-token"):
        p = probe.run("get", f"{PODS}/a", kubeconfig=variant)
        assert p.returncode == 0
        # -v=10: every response is logged, with its path and status, and that is all
        assert '"kube response" method="GET" path="/api/v1/namespaces/default/pods/a" status=200' \
            in p.stderr, p.stderr
        assert fk.token not in p.stderr and fk.token not in p.stdout


def test_wrong_ca_is_a_transport_error(fk, probe, tmp_path):
    other = fakekube.Certs(tmp_path / "other")
    cfg = yaml.safe_load(fk.kubeconfigs["token"].read_text())
    cfg["clusters"][0]["cluster"]["certificate-authority"] = str(other.ca)
    kc = tmp_path / "wrong-ca.yaml"
    kc.write_text(yaml.safe_dump(cfg))
    p = probe.run("get", f"{PODS}/a", kubeconfig=kc)
    assert p.returncode == 1, p.stderr
    res = json.loads(p.stdout)
    assert res["status"] == 0
    assert "certificate" in res["message"].lower() or "ssl" in res["message"].lower(), res
    assert fk.requests() == []


def test_nothing_listening_is_a_transport_error(fk, probe, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed again: nothing listens there now
    cfg = yaml.safe_load(fk.kubeconfigs["token"].read_text())
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    kc = tmp_path / "closed.yaml"
    kc.write_text(yaml.safe_dump(cfg))
    p = probe.run("get", f"{PODS}/a", kubeconfig=kc)
    assert p.returncode == 1, p.stderr
    res = json.loads(p.stdout)
    assert res["status"] == 0
    assert res["message"] == f"connect to 127.0.0.1:{port}: Connection refused", res


def test_insecure_refused_unless_allowed(fk, probe, tmp_path):
    cfg = yaml.safe_load(fk.kubeconfigs["token"].read_text())
    cluster = cfg["clusters"][0]["cluster"]
    del cluster["certificate-authority"]
    cluster["insecure-skip-tls-verify"] = True
    kc = tmp_path / "insecure.yaml"
    kc.write_text(yaml.safe_dump(cfg))
    p = probe.run("get", f"{PODS}/a", kubeconfig=kc)
    assert p.returncode == 2
    assert "insecure-skip-tls-verify" in p.stderr and "explicitly allowed" in p.stderr
    res = probe.one("--allow-insecure", "get", f"{PODS}/a", kubeconfig=kc)
    assert res["status"] == 404


def test_missing_current_context(fk, probe, tmp_path):
    cfg = yaml.safe_load(fk.kubeconfigs["token"].read_text())
    cfg["current-context"] = "elsewhere"
    kc = tmp_path / "ctx.yaml"
    kc.write_text(yaml.safe_dump(cfg))
    p = probe.run("get", PODS, kubeconfig=kc)
    assert p.returncode == 2
    assert f"kubeconfig {kc}:" in p.stderr and 'no context named "elsewhere"' in p.stderr


def test_in_cluster(fk, probe):
    fk.put(pod("a"))
    res = probe.one("get", f"{PODS}/a", kubeconfig=None, env=fk.incluster_env())
    assert res["status"] == 200
    cfg = probe.one("config", kubeconfig=None, env=fk.incluster_env())
    assert cfg["source"] == "in-cluster" and cfg["namespace"] == "default"
    assert cfg["server"] == fk.url
    p = probe.run("get", PODS, kubeconfig=None, env={})
    assert p.returncode == 2 and "KUBERNETES_SERVICE_HOST is not set" in p.stderr


@pytest.mark.parametrize("config", ["tokenfile", "in-cluster"])
def test_token_rotation(fk, probe, config):
    """The token file is read again when it changes: the second request carries the new token."""
    fk.put(pod("a"))
    if config == "in-cluster":
        run = probe.start("gets", f"{PODS}/a", 2, 1500, kubeconfig=None, env=fk.incluster_env())
    else:
        run = probe.start("gets", f"{PODS}/a", 2, 1500, kubeconfig=config)
    assert run.next()["status"] == 200
    probe.tokens.add(fk.token)
    fk.rotate_token()  # the old token is refused from now on
    assert run.next()["status"] == 200
    assert run.p.wait(timeout=10) == 0
    assert [r["status"] for r in fk.requests("GET", f"{PODS}/a$")] == [200, 200]


def test_timeout(fk, probe):
    fk.inject("GET", f"{PODS}/slow", hang=True)
    start = time.monotonic()
    p = probe.run("--timeout-ms", "500", "get", f"{PODS}/slow")
    assert time.monotonic() - start < 5
    assert p.returncode == 1
    res = json.loads(p.stdout)
    assert res["status"] == 0 and "timed out" in res["message"].lower(), res
    fk.release()


# --- verbs -----------------------------------------------------------------------------------------

def test_crud_and_status_messages(fk, probe, tmp_path):
    f = tmp_path / "claim.json"
    f.write_text(json.dumps(claim("c1")))
    res = probe.one("create", CLAIMS, f)
    assert res["status"] == 201, res
    rv = res["body"]["metadata"]["resourceVersion"]

    res = probe.one("create", CLAIMS, f)
    assert res["status"] == 409 and res["reason"] == "AlreadyExists"
    assert res["message"] == 'resourceclaims.resource.k8s.io "c1" already exists'

    got = probe.one("get", f"{CLAIMS}/c1")
    assert got["status"] == 200 and got["body"]["metadata"]["uid"] == res["body"]["details"].get(
        "uid", got["body"]["metadata"]["uid"])

    # update with the current resourceVersion, then again with the now stale one
    obj = got["body"]
    obj["metadata"]["labels"] = {"x": "1"}
    f.write_text(json.dumps(obj))
    res = probe.one("update", f"{CLAIMS}/c1", f)
    assert res["status"] == 200 and res["body"]["metadata"]["labels"] == {"x": "1"}
    assert res["body"]["metadata"]["resourceVersion"] != rv
    res = probe.one("update", f"{CLAIMS}/c1", f)
    assert res["status"] == 409 and res["reason"] == "Conflict"
    assert res["message"].startswith('Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c1"')

    # a body the schema refuses: 422 with the server's message
    bad = claim("c2")
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    f.write_text(json.dumps(bad))
    with fk.expect_invalid():
        res = probe.one("create", CLAIMS, f)
    assert res["status"] == 422 and res["reason"] == "Invalid"
    assert 'ResourceClaim.resource.k8s.io "c2" is invalid' in res["message"]

    res = probe.one("delete", f"{CLAIMS}/c1")
    assert res["status"] == 200
    res = probe.one("get", f"{CLAIMS}/c1")
    assert res["status"] == 404 and res["reason"] == "NotFound"
    assert res["message"] == 'resourceclaims.resource.k8s.io "c1" not found'
    res = probe.one("delete", f"{CLAIMS}/c1")
    assert res["status"] == 404


def test_merge_patch(fk, probe):
    fk.put(pod("a", labels={"a": "1", "keep": "yes"}))
    res = probe.one("patch", f"{PODS}/a", '{"metadata":{"labels":{"a":null,"b":"2"}}}')
    assert res["status"] == 200
    assert fk.get("pods", "a", "default")["metadata"]["labels"] == {"keep": "yes", "b": "2"}
    req = fk.requests("PATCH")[-1]
    assert req["headers"]["Content-Type"] == "application/merge-patch+json"
    res = probe.one("patch", f"{PODS}/missing", '{"metadata":{"labels":{"a":"1"}}}')
    assert res["status"] == 404 and res["message"] == 'pods "missing" not found'


def test_list_pagination(fk, probe):
    for i in range(7):
        fk.put(pod(f"p{i}"))
    fk.put(pod("elsewhere", namespace="other"))
    res = probe.one("list", f"{PODS}?limit=3")
    assert res["status"] == 200
    assert names(res["body"]["items"]) == [f"p{i}" for i in range(7)]
    assert "continue" not in res["body"]["metadata"]
    assert res["body"]["metadata"]["resourceVersion"]
    pages = fk.requests("GET", f"{PODS}$")
    assert len(pages) == 3
    assert [bool(p["query"].get("continue")) for p in pages] == [False, True, True]
    assert all(p["query"]["limit"] == ["3"] for p in pages)

    # without a limit the client asks for pages of 500
    res = probe.one("list", "/api/v1/pods")
    assert len(res["body"]["items"]) == 8
    assert fk.requests("GET", "^/api/v1/pods$")[-1]["query"]["limit"] == ["500"]


def test_requests_share_a_kept_alive_connection(fk, probe):
    for i in range(5):
        fk.put(pod(f"k{i}"))
    res = probe.one("list", f"{PODS}?limit=1")
    assert len(res["body"]["items"]) == 5
    pages = fk.requests("GET", f"{PODS}$")
    assert len(pages) == 5
    assert len({p["peer"] for p in pages}) == 1, "each page should reuse the first connection"


def test_request_on_a_connection_the_server_dropped_is_sent_again(fk, probe):
    fk.put(pod("a"))
    run = probe.start("gets", f"{PODS}/a", 2, 300)
    assert run.next()["status"] == 200
    fk.inject("GET", f"{PODS}/a$", drop=True)  # the kept-alive connection dies under the next one
    assert run.next()["status"] == 200
    assert run.p.wait(timeout=10) == 0
    log = fk.requests("GET", f"{PODS}/a$")
    assert [r["status"] for r in log] == [200, None, 200]
    assert log[0]["peer"] == log[1]["peer"] != log[2]["peer"]


class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT), mapping fakekube.TEST_NAME to 127.0.0.1."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.requests = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self._tunnel, args=(conn,), daemon=True).start()

    def _tunnel(self, conn):
        conn.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            data = conn.recv(4096)
            if not data:
                conn.close()
                return
            head += data
        lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in lines[1:])
        self.requests.append({"method": method, "target": target, "headers": headers})
        if method != "CONNECT" or target != f"{fakekube.TEST_NAME}:{self.target_port}":
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        up = socket.create_connection(("127.0.0.1", self.target_port))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()


def test_proxy_tunnel_with_credentials(fk, probe, tmp_path):
    fk.put(pod("via-proxy"))
    cfg = yaml.safe_load(fk.kubeconfigs["token"].read_text())
    cfg["clusters"][0]["cluster"]["server"] = f"https://{fakekube.TEST_NAME}:{fk.port}"
    kc = tmp_path / "proxied.yaml"
    kc.write_text(yaml.safe_dump(cfg))
    proxy = ConnectProxy(fk.port)
    try:
        env = {"HTTPS_PROXY": f"http://alice:s3cret@127.0.0.1:{proxy.port}", "NO_PROXY": "other.example"}
        res = probe.one("get", f"{PODS}/via-proxy", kubeconfig=kc, env=env)
        assert res["status"] == 200, res
        assert proxy.requests[0]["method"] == "CONNECT"
        assert proxy.requests[0]["target"] == f"{fakekube.TEST_NAME}:{fk.port}"
        assert proxy.requests[0]["headers"]["Proxy-Authorization"] == "Basic YWxpY2U6czNjcmV0"
        # NO_PROXY exempts the name: the client then tries to resolve it itself, and cannot
        env["NO_PROXY"] = "gpuplane.test"
        before = len(proxy.requests)
        p = probe.run("get", f"{PODS}/via-proxy", kubeconfig=kc, env=env)
        res = json.loads(p.stdout)
        assert p.returncode == 1 and res["status"] == 0 and len(proxy.requests) == before, res
        # a proxy that refuses the tunnel is a clear error
        cfg["clusters"][0]["cluster"]["server"] = f"https://{fakekube.TEST_NAME}:1"
        kc.write_text(yaml.safe_dump(cfg))
        env["NO_PROXY"] = ""
        p = probe.run("get", f"{PODS}/via-proxy", kubeconfig=kc, env=env)
        res = json.loads(p.stdout)
        assert p.returncode == 1 and res["status"] == 0, res
        assert "refused the tunnel: HTTP 403" in res["message"], res
    finally:
        proxy.close()


def test_list_continue_expired_restarts(fk, probe):
    for i in range(5):
        fk.put(pod(f"p{i}"))
    # one request a second: the test expires the tokens between the first page and the next
    run = probe.start("--qps", "1", "--burst", "1", "list", f"{PODS}?limit=2")
    wait_for(lambda: fk.requests("GET", f"{PODS}$"), what="the first page")
    fk.expire_continues()
    fk.put(pod("p5"))
    res = run.next(timeout=20)
    assert res["status"] == 200, res
    assert names(res["body"]["items"]) == [f"p{i}" for i in range(6)]
    statuses = [(bool(r["query"].get("continue")), r["status"]) for r in fk.requests("GET", f"{PODS}$")]
    assert statuses[:3] == [(False, 200), (True, 410), (False, 200)]
    assert len(statuses) == 5


def test_modify_retries_on_conflict(fk, probe):
    fk.put(pod("a", labels={"n": "0"}))
    # the first two writes carry a stale resourceVersion: 409, fresh GET, mutate again
    res = probe.one("modify", f"{PODS}/a", '{"metadata":{"labels":{"n":"1"}}}', 2)
    assert res["status"] == 200, res
    assert res["mutations"] == 3
    assert fk.get("pods", "a", "default")["metadata"]["labels"] == {"n": "1"}
    assert [r["status"] for r in fk.requests("PUT")] == [409, 409, 200]
    assert len(fk.requests("GET", f"{PODS}/a$")) == 3


def test_modify_gives_up_after_five_retries(fk, probe):
    fk.put(pod("a"))
    res = probe.one("modify", f"{PODS}/a", '{"metadata":{"labels":{"n":"1"}}}', 100)
    assert res["status"] == 409 and res["reason"] == "Conflict"
    assert res["mutations"] == 6
    assert len(fk.requests("PUT")) == 6


def test_modify_nothing_to_write(fk, probe):
    fk.put(pod("a", labels={"n": "1"}))
    res = probe.one("modify", f"{PODS}/a", '{"metadata":{"labels":{"n":"1"}}}')
    assert res["status"] == 200 and res["body"]["metadata"]["labels"] == {"n": "1"}
    assert fk.requests("PUT") == []
    res = probe.one("modify", f"{PODS}/missing", '{}')
    assert res["status"] == 404


def test_rate_limit(fk, probe):
    fk.put(pod("a"))
    # 5 qps, burst 2: six requests need at least (6 - 2) / 5 = 0.8 s
    out = probe.json("--qps", "5", "--burst", "2", "burst", f"{PODS}/a", 6)
    assert all(r["status"] == 200 for r in out)
    assert max(r["ms"] for r in out) >= 750
    times = sorted(r["time"] for r in fk.requests("GET", f"{PODS}/a$"))
    assert times[-1] - times[0] >= 0.7
    # a burst big enough lets them all out at once
    out = probe.json("--qps", "5", "--burst", "10", "burst", f"{PODS}/a", 6)
    assert max(r["ms"] for r in out) < 700


def test_server_errors_and_non_status_bodies(fk, probe):
    fk.inject("GET", f"{PODS}/a", status=503, message="etcd is unhappy")
    res = probe.one("get", f"{PODS}/a")
    assert res["status"] == 503 and res["reason"] == "ServiceUnavailable"
    assert res["message"] == "etcd is unhappy"


# --- watches ---------------------------------------------------------------------------------------

def event(ev):
    return (ev["type"], ev.get("object", {}).get("metadata", {}).get("name"))


def test_watch_events(fk, probe):
    fk.put(pod("a"))
    fk.put(pod("b"))
    run = probe.start("watch", PODS, 0)
    assert [event(e) for e in run.until_synced()] == [("ADDED", "a"), ("ADDED", "b"), ("SYNCED", None)]
    fk.put(pod("c"))
    assert event(run.next()) == ("ADDED", "c")
    fk.put(pod("a", labels={"x": "1"}))
    ev = run.next()
    assert event(ev) == ("MODIFIED", "a") and ev["object"]["metadata"]["labels"] == {"x": "1"}
    fk.remove("pods", "b", "default")
    assert event(run.next()) == ("DELETED", "b")
    fk.put(pod("z", namespace="other"))  # not in the watched collection
    run.quiet(0.5)
    watches = fk.requests("GET", f"{PODS}$")
    assert watches[-1]["watch"] and watches[-1]["query"]["allowWatchBookmarks"] == ["true"]


def test_watch_follows_bookmarks(fk, probe):
    """A watch that only sees bookmarks still moves its resourceVersion: after a compaction and a
    cut connection it resumes where it was, without listing again."""
    fk.put(pod("a"))
    run = probe.start("watch", PODS, 0)
    run.until_synced()
    for i in range(5):  # changes elsewhere move the server's resourceVersion on
        fk.put(pod(f"o{i}", namespace="other"))
    target = fk.resource_version
    time.sleep(0.6)  # a few bookmark intervals
    fk.compact()
    fk.drop_watches()
    wait_for(lambda: [r for r in fk.requests("GET", f"{PODS}$")
                      if r["watch"] and int(r["query"]["resourceVersion"][0]) >= target],
             what="the watch to resume from the bookmark's resourceVersion")
    fk.put(pod("b"))
    assert event(run.next()) == ("ADDED", "b")
    lists = [r for r in fk.requests("GET", f"{PODS}$") if "watch" not in r["query"]]
    assert len(lists) == 1


@pytest.mark.parametrize("expired", ["event", "status"])
def test_watch_relists_after_410_and_reports_the_difference(fk, probe, expired):
    """410 as an ERROR event in the stream, or as the HTTP status of the watch request."""
    fk.watch_expired = expired
    fk.put(pod("a"))
    fk.put(pod("b"))
    fk.bookmark_interval = 3600  # no bookmarks: the watch's resourceVersion stays behind
    run = probe.start("watch", PODS, 0)
    run.until_synced()
    wait_for(lambda: fk.watch_count() == 1, what="the watch")
    # the reconnect hangs while the collection changes and history is compacted away
    fk.inject("GET", PODS, hang=True)
    fk.drop_watches()
    wait_for(lambda: fk.watch_count() == 0 and len(fk.requests("GET", f"{PODS}$")) >= 3,
             what="the hung reconnect")
    fk.remove("pods", "a", "default")
    fk.put(pod("b", labels={"v": "2"}))
    fk.put(pod("d"))
    fk.put(pod("o", namespace="other"))
    fk.compact()
    fk.release()  # the reconnect fails; the next one is told 410 and lists again
    evs = run.until_synced(timeout=20)
    assert sorted(event(e) for e in evs) == sorted(
        [("MODIFIED", "b"), ("ADDED", "d"), ("DELETED", "a"), ("SYNCED", None)])
    assert evs[-1]["type"] == "SYNCED"
    lists = [r for r in fk.requests("GET", f"{PODS}$") if "watch" not in r["query"]]
    assert len(lists) == 2
    expired_watches = [r for r in fk.requests("GET", f"{PODS}$") if r["status"] == 410]
    assert len(expired_watches) == (1 if expired == "status" else 0)
    fk.put(pod("e"))
    assert event(run.next()) == ("ADDED", "e")


def test_watch_reconnects_after_a_cut(fk, probe):
    fk.put(pod("a"))
    run = probe.start("watch", PODS, 0)
    run.until_synced()
    fk.drop_watches(clean=False)
    fk.put(pod("b"))  # happens while the client is away: seen after it resumes
    assert event(run.next()) == ("ADDED", "b")
    fk.drop_watches(clean=True)
    fk.put(pod("c"))
    assert event(run.next()) == ("ADDED", "c")
    assert len([r for r in fk.requests("GET", f"{PODS}$") if "watch" not in r["query"]]) == 1


def test_watch_with_selector_and_token_file(fk, probe):
    fk.put(pod("a", labels={"app": "gpu"}))
    fk.put(pod("b", labels={"app": "web"}))
    run = probe.start("watch", f"{PODS}?labelSelector=app%3Dgpu", 0, kubeconfig="tokenfile")
    assert [event(e) for e in run.until_synced()] == [("ADDED", "a"), ("SYNCED", None)]
    fk.put(pod("c", labels={"app": "gpu"}))
    fk.put(pod("d", labels={"app": "web"}))
    assert event(run.next()) == ("ADDED", "c")
    run.quiet(0.5)
