# SPDX-License-Identifier: Apache-2.0
"""src/http end to end: http-probe (the server with fixed bodies) driven by real clients — Python's
http.client and ssl, raw sockets for slow and malformed clients, curl when it is installed: HEAD,
gzip, keep-alive, concurrent and slow clients, basic auth, TLS with and without client certificates,
web configuration errors, and which libraries a plain-HTTP server maps."""
import base64
import concurrent.futures
import ctypes
import datetime
import gzip
import http.client
import ipaddress
import shutil
import socket
import ssl
import subprocess
import time

import pytest

from conftest import BUILD

PROBE = BUILD / "tests" / "http-probe"


class Probe:
    def __init__(self, *args):
        if not PROBE.exists():
            raise RuntimeError(f"{PROBE} is not built")
        self.proc = subprocess.Popen([str(PROBE), *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("port "):
            self.proc.wait(timeout=10)
            raise AssertionError(f"http-probe did not start: {self.proc.stderr.read()}")
        self.port = int(line.split()[1])

    def maps(self):
        return (pathlib_read(f"/proc/{self.proc.pid}/maps"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def pathlib_read(path):
    with open(path) as f:
        return f.read()


@pytest.fixture
def probes():
    started = []

    def start(*args):
        p = Probe(*args)
        started.append(p)
        return p
    yield start
    for p in started:
        assert p.stop() == 0, p.proc.stderr.read()


def get(port, path, headers=None, method="GET", host="127.0.0.1", context=None):
    if context:
        c = http.client.HTTPSConnection(host, port, timeout=10, context=context)
    else:
        c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def expected_body(size):
    out = bytearray()
    i = 0
    while len(out) < size:
        out += f'DCGM_FI_DEV_GPU_TEMP{{gpu="{i % 8}",UUID="GPU-{i:08d}"}} {30 + i % 50}\n'.encode()
        i += 1
    return bytes(out[:size])


def test_get_head_gzip_and_errors(probes):
    p = probes("--body-size", 200000)
    status, headers, body = get(p.port, "/metrics")
    assert status == 200
    assert body == expected_body(200000)
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")

    status, headers, body = get(p.port, "/metrics", method="HEAD")
    assert status == 200 and body == b""
    assert headers["Content-Length"] == "200000"

    status, headers, body = get(p.port, "/metrics", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == expected_body(200000)
    assert len(body) < 200000 // 4

    status, headers, body = get(p.port, "/metrics", {"Accept-Encoding": "gzip;q=0"})
    assert "Content-Encoding" not in headers and len(body) == 200000

    assert get(p.port, "/nope")[0] == 404
    status, headers, _ = get(p.port, "/metrics", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert get(p.port, "/hello?x=1")[2] == b"hello\n"


def raw(port, data, read=True, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def test_malformed_and_oversize(probes):
    p = probes()
    assert raw(p.port, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(p.port, b"GET /hello HTTP/3.0\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 505 ")
    assert raw(p.port, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
        b"HTTP/1.1 414 ")
    assert raw(p.port, b"GET /hello HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 9000 + b"\r\n\r\n"
               ).startswith(b"HTTP/1.1 431 ")
    # a GET with a body: refused, and the connection is not reused
    out = raw(p.port, b"GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
              b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ") and out.count(b"HTTP/1.1") == 1


def test_keep_alive_and_pipelining(probes):
    p = probes()
    c = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
    for _ in range(5):
        c.request("GET", "/hello")
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"hello\n"
    sock = c.sock
    c.request("GET", "/hello")
    c.getresponse().read()
    assert c.sock is sock  # one connection throughout
    c.close()
    out = raw(p.port, b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n" * 3 +
              b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.count(b"HTTP/1.1 200 OK") == 4 and out.endswith(b"hello\n")
    # HTTP/1.0 closes unless asked to keep alive
    out = raw(p.port, b"GET /hello HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200 OK") and out.endswith(b"hello\n")


def test_concurrent_clients(probes):
    p = probes("--body-size", 100000)
    want = expected_body(100000)

    def client(i):
        c = http.client.HTTPConnection("127.0.0.1", p.port, timeout=20)
        try:
            for _ in range(10):
                c.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"} if i % 2 else {})
                r = c.getresponse()
                body = r.read()
                if r.getheader("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                assert r.status == 200 and body == want
        finally:
            c.close()
        return i

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        assert sorted(pool.map(client, range(32))) == list(range(32))


def test_slow_clients_do_not_stall_others(probes):
    size = 16 << 20  # more than the socket buffers hold: the server must write in pieces
    p = probes("--body-size", size, "--head-ms", 1000)
    # a client that sends half a head and waits
    lazy = socket.create_connection(("127.0.0.1", p.port))
    lazy.sendall(b"GET /hello HTTP/1.1\r\nHo")
    # a client that asks for the big body and reads nothing for a while
    sleepy = socket.create_connection(("127.0.0.1", p.port))
    sleepy.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    t0 = time.monotonic()
    for _ in range(20):
        assert get(p.port, "/hello")[2] == b"hello\n"
    assert time.monotonic() - t0 < 5
    # the half head is cut after head-ms
    lazy.settimeout(5)
    assert lazy.recv(100) == b""
    lazy.close()
    # the slow reader still gets every byte
    sleepy.settimeout(10)
    got = b""
    while True:
        chunk = sleepy.recv(1 << 20)
        if not chunk:
            break
        got += chunk
        head_end = got.find(b"\r\n\r\n")
        if head_end >= 0 and len(got) - head_end - 4 >= size:
            break
    sleepy.close()
    assert got[got.find(b"\r\n\r\n") + 4:] == expected_body(size)


def test_idle_timeout_and_connection_cap(probes):
    p = probes("--idle-ms", 300, "--max-conns", 2)
    a = socket.create_connection(("127.0.0.1", p.port))
    b = socket.create_connection(("127.0.0.1", p.port))
    t0 = time.monotonic()
    # a third client waits in the backlog until the idle ones are closed, then gets its answer
    assert get(p.port, "/hello")[2] == b"hello\n"
    assert time.monotonic() - t0 >= 0.2
    for s in (a, b):
        s.settimeout(5)
        assert s.recv(10) == b""
        s.close()


def test_plain_server_maps_no_optional_library(probes):
    p = probes()
    get(p.port, "/hello")
    maps = p.maps()
    for lib in ("libz.so", "libssl.so", "libcrypto.so", "libcrypt.so", "libmicrohttpd",
                "libgnutls"):
        assert lib not in maps, lib
    get(p.port, "/metrics", {"Accept-Encoding": "gzip"})
    assert "libz.so" in p.maps()


def bcrypt(password, cost=5):
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    setting = f"$2b${cost:02d}$abcdefghijklmnopqrstuu".encode()
    h = lib.crypt(password.encode(), setting).decode()
    assert h.startswith(setting[:7].decode()) and len(h) == 60
    return h


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_basic_auth(probes, tmp_path):
    cfg = tmp_path / "web.yml"
    cfg.write_text(f"basic_auth_users:\n  alice: '{bcrypt('wonderland')}'\n"
                   f"  bob: '{bcrypt('builder').replace('$2b$', '$2y$', 1)}'\n")
    p = probes("--web-config", cfg)
    status, headers, _ = get(p.port, "/metrics")
    assert status == 401 and headers["WWW-Authenticate"] == "Basic"
    assert get(p.port, "/metrics", basic("alice", "nope"))[0] == 401
    assert get(p.port, "/metrics", basic("mallory", "wonderland"))[0] == 401
    assert get(p.port, "/metrics", {"Authorization": "Basic !!!"})[0] == 401
    assert get(p.port, "/whoami", basic("alice", "wonderland"))[2] == b"alice\n"
    assert get(p.port, "/whoami", basic("bob", "builder"))[2] == b"bob\n"
    assert get(p.port, "/nope", basic("bob", "builder"))[0] == 404
    # remembered: many scrapes cost far less than a bcrypt each
    t0 = time.monotonic()
    for _ in range(50):
        assert get(p.port, "/metrics", basic("alice", "wonderland"))[0] == 200
    assert time.monotonic() - t0 < 3
    assert "libcrypt.so" in p.maps() and "libssl.so" not in p.maps()


def test_wrong_passwords_do_not_stall_the_loop(probes, tmp_path):
    """bcrypt runs on worker threads: slow checks of wrong passwords (cost 12, a quarter of a
    second each) leave remembered credentials answered at once."""
    t0 = time.monotonic()
    slow = bcrypt("dragon", cost=12)
    cost = time.monotonic() - t0
    cfg = tmp_path / "web.yml"
    cfg.write_text(f"basic_auth_users:\n  alice: '{bcrypt('wonderland')}'\n  mallory: '{slow}'\n")
    p = probes("--web-config", cfg)
    assert get(p.port, "/hello", basic("alice", "wonderland"))[0] == 200  # remembered now

    def attack(i):
        return get(p.port, "/hello", basic("mallory", f"guess{i}"))[0]

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        wrong = [pool.submit(attack, i) for i in range(4)]
        worst = 0.0
        while not all(f.done() for f in wrong):
            t = time.monotonic()
            assert get(p.port, "/hello", basic("alice", "wonderland"))[0] == 200
            worst = max(worst, time.monotonic() - t)
        assert [f.result() for f in wrong] == [401] * 4
    assert worst < max(cost / 2, 0.05), (worst, cost)


@pytest.mark.parametrize("text,message", [
    ("basic_auth_users:\n  alice: secret\n", "web.yml:2:10: basic_auth_users.alice: not a bcrypt"),
    ("tls_server_config:\n  cert_file: x.pem\n", "web.yml:2:3: missing key_file"),
    ("tls_server_config:\n  cert_file: nothere.pem\n  key_file: nothere.key\n", "nothere.pem"),
    ("basic_auth_users: {}\nextra: 1\n", "web.yml:2:1: unknown key \"extra\""),
])
def test_web_config_errors(tmp_path, text, message):
    cfg = tmp_path / "web.yml"
    cfg.write_text(text)
    r = subprocess.run([str(PROBE), "--web-config", str(cfg)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    assert message in r.stderr
    if "web.yml:" in message:
        assert f"{cfg}:" in r.stderr


def test_listen_addresses(probes):
    p = probes("--listen", ":0")
    assert get(p.port, "/hello", host="127.0.0.1")[0] == 200
    if socket.has_ipv6:
        try:
            assert get(p.port, "/hello", host="::1")[0] == 200
        except OSError:
            pass  # no IPv6 loopback here
    r = subprocess.run([str(PROBE), "--listen", "9400"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "expected [host]:port" in r.stderr


# ---- TLS ----

def make_pki(d):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(cn, key, issuer_name, issuer_key, ca=False, san=None, usage=None):
        b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(issuer_name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(hours=1))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        if usage:
            b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    def write(stem, c, k):
        (d / f"{stem}.pem").write_bytes(c.public_bytes(serialization.Encoding.PEM))
        if k is not None:
            (d / f"{stem}.key").write_bytes(k.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = cert("test ca", ca_key, name("test ca"), ca_key, ca=True)
    write("ca", ca, None)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    write("server", cert("server", srv_key, ca.subject, ca_key,
                         san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                              x509.DNSName("localhost")],
                         usage=ExtendedKeyUsageOID.SERVER_AUTH), srv_key)
    cl_key = ec.generate_private_key(ec.SECP256R1())
    write("client", cert("client", cl_key, ca.subject, ca_key,
                         usage=ExtendedKeyUsageOID.CLIENT_AUTH), cl_key)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = cert("other ca", other_key, name("other ca"), other_key, ca=True)
    st_key = ec.generate_private_key(ec.SECP256R1())
    write("stranger", cert("stranger", st_key, other_ca.subject, other_key,
                           usage=ExtendedKeyUsageOID.CLIENT_AUTH), st_key)


def client_context(d, cert=None):
    ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(d / f"{cert}.pem"), str(d / f"{cert}.key"))
    return ctx


def test_tls(probes, tmp_path):
    make_pki(tmp_path)
    cfg = tmp_path / "web.yml"
    # relative names are read from the configuration file's directory
    cfg.write_text("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n")
    p = probes("--web-config", cfg, "--body-size", 300000)
    ctx = client_context(tmp_path)
    status, headers, body = get(p.port, "/metrics", context=ctx)
    assert status == 200 and body == expected_body(300000)
    status, headers, body = get(p.port, "/metrics", {"Accept-Encoding": "gzip"}, context=ctx)
    assert gzip.decompress(body) == expected_body(300000)
    # keep-alive over TLS
    c = http.client.HTTPSConnection("127.0.0.1", p.port, timeout=10, context=ctx)
    for _ in range(5):
        c.request("GET", "/hello")
        assert c.getresponse().read() == b"hello\n"
    c.close()
    # plain HTTP to the TLS port gets no answer
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        get(p.port, "/hello")
    # a TLS 1.2 client to a server whose minimum is TLS 1.3
    old = client_context(tmp_path)
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    cfg.write_text("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                   "  min_version: TLS13\n")
    p13 = probes("--web-config", cfg)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        get(p13.port, "/hello", context=old)
    assert get(p.port, "/hello", context=old)[0] == 200
    assert "libssl.so" in p.maps()

    if shutil.which("curl"):
        r = subprocess.run(["curl", "-sS", "--compressed", "--cacert", str(tmp_path / "ca.pem"),
                            f"https://127.0.0.1:{p.port}/metrics"], capture_output=True,
                           timeout=20)
        assert r.returncode == 0 and r.stdout == expected_body(300000), r.stderr


def test_tls_client_certificates(probes, tmp_path):
    make_pki(tmp_path)
    cfg = tmp_path / "web.yml"
    cfg.write_text(f"tls_server_config:\n  cert_file: {tmp_path}/server.pem\n"
                   f"  key_file: {tmp_path}/server.key\n  client_ca_file: {tmp_path}/ca.pem\n"
                   "  client_auth_type: RequireAndVerifyClientCert\n  min_version: TLS13\n")
    p = probes("--web-config", cfg)
    assert get(p.port, "/hello", context=client_context(tmp_path, "client"))[2] == b"hello\n"
    for who in (None, "stranger"):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError, http.client.HTTPException)):
            get(p.port, "/hello", context=client_context(tmp_path, who))

    cfg.write_text(f"tls_server_config:\n  cert_file: {tmp_path}/server.pem\n"
                   f"  key_file: {tmp_path}/server.key\n  client_ca_file: {tmp_path}/ca.pem\n"
                   "  client_auth_type: VerifyClientCertIfGiven\n")
    q = probes("--web-config", cfg)
    assert get(q.port, "/hello", context=client_context(tmp_path))[2] == b"hello\n"
    assert get(q.port, "/hello", context=client_context(tmp_path, "client"))[2] == b"hello\n"
    with pytest.raises((ssl.SSLError, ConnectionError, OSError, http.client.HTTPException)):
        get(q.port, "/hello", context=client_context(tmp_path, "stranger"))

    cfg.write_text(f"tls_server_config:\n  cert_file: {tmp_path}/server.pem\n"
                   f"  key_file: {tmp_path}/server.key\n"
                   "  client_auth_type: RequireAnyClientCert\n")
    r = probes("--web-config", cfg)
    assert get(r.port, "/hello", context=client_context(tmp_path, "stranger"))[2] == b"hello\n"
    with pytest.raises((ssl.SSLError, ConnectionError, OSError, http.client.HTTPException)):
        get(r.port, "/hello", context=client_context(tmp_path))


def test_tls_and_basic_auth(probes, tmp_path):
    make_pki(tmp_path)
    cfg = tmp_path / "web.yml"
    cfg.write_text("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
                   f"basic_auth_users:\n  alice: '{bcrypt('wonderland')}'\n")
    p = probes("--web-config", cfg)
    ctx = client_context(tmp_path)
    assert get(p.port, "/hello", context=ctx)[0] == 401
    assert get(p.port, "/whoami", basic("alice", "wonderland"), context=ctx)[2] == b"alice\n"


def test_security_headers(probes, tmp_path):
    cfg = tmp_path / "web.yml"
    cfg.write_text("http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
                   "    Content-Security-Policy: default-src 'none'\n")
    p = probes("--web-config", cfg)
    for path in ("/hello", "/nope"):
        _, headers, _ = get(p.port, path)
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Content-Security-Policy"] == "default-src 'none'"


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_curl(probes):
    p = probes("--body-size", 50000)
    r = subprocess.run(["curl", "-sS", "--compressed", "-D", "-",
                        f"http://127.0.0.1:{p.port}/metrics"], capture_output=True, timeout=20)
    assert r.returncode == 0
    head, body = r.stdout.split(b"\r\n\r\n", 1)
    assert b"Content-Encoding: gzip" in head and body == expected_body(50000)
    r = subprocess.run(["curl", "-sS", "-I", f"http://127.0.0.1:{p.port}/metrics"],
                       capture_output=True, timeout=20)
    assert r.returncode == 0 and b"Content-Length: 50000" in r.stdout
