# SPDX-License-Identifier: Apache-2.0
"""Each daemon maps only the libraries its job needs (docs/architecture.md, "Libraries loaded at
first use").

The daemon runs on the mock node, does its work (registers and serves Allocate; publishes, and
prepares a claim), and its /proc/PID/maps is read: every shared object mapped must be on the
daemon's allow-list. The device plugin must never map the TLS stack, libcurl, Kerberos, LDAP, YAML
or regular-expression libraries, even after reading a YAML config file; the DRA driver adds OpenSSL
(it talks to the API server) and nothing else. The mock NVML library stands where the driver's
libnvidia-ml.so.1 would be; its own dependencies are allowed with it.
"""
import pathlib
import re

from conftest import BUILD
from dp_harness import ASAN, plugin  # noqa: F401
from test_dra_driver import driver_roots, node  # noqa: F401

BASE = {"libc.so.6", "ld-linux-x86-64.so.2", "libjansson.so.4", "libnghttp2.so.14",
        "libprotobuf-c.so.1", "libnvidia-ml.so.1"}
DEVICE_PLUGIN = BASE
DRA_DRIVER = BASE | {"libssl.so.3", "libcrypto.so.3"}
# The sanitizer runtime and what it pulls in, in the ASan+UBSan build only.
SANITIZER = {"libasan.so.8", "libubsan.so.1", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6"} if ASAN else set()
NEVER = re.compile(r"lib(curl|gnutls|krb5|gssapi|ldap|sasl|ssh|rtmp|fyaml|pcre2|p11-kit|nettle)")

CONFIG = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 8
"""


def needed(path):
    """The DT_NEEDED names of a shared object or executable."""
    import subprocess
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out))


# The mock NVML library stands where the driver's libnvidia-ml.so.1 would be: what it links (libm
# for its wandering telemetry) comes with it, and with it only.
MOCK_DEPS = needed(BUILD / "mock-nvml" / "libnvidia-ml.so.1")


def soname(path):
    """libfoo.so.1.2.3 -> libfoo.so.1 (the name the dynamic linker asked for)."""
    m = re.match(r"(.*?\.so(\.\d+)?)", pathlib.Path(path).name)
    return m.group(1) if m else pathlib.Path(path).name


def mapped_libraries(pid):
    libs = set()
    for line in pathlib.Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and ".so" in parts[5]:
            libs.add(parts[5].strip())
    return libs


def check(pid, allowed):
    libs = mapped_libraries(pid)
    names = {soname(p) for p in libs}
    assert "libc.so.6" in names, libs  # the reading works at all
    extra = sorted(p for p in libs if soname(p) not in allowed | SANITIZER | MOCK_DEPS)
    assert not extra, f"libraries outside the allow-list: {extra}"
    assert not [p for p in libs if NEVER.search(p)]
    return names


def test_device_plugin_maps_only_its_libraries(plugin):  # noqa: F811
    p = plugin("dgx-h100", config=CONFIG)
    r = p.allocate([sorted(p.snapshot())[0]])
    assert len(r.container_responses) == 1
    names = check(p.pid, DEVICE_PLUGIN)
    assert {"libnghttp2.so.14", "libnvidia-ml.so.1"} <= names


def test_dra_driver_maps_only_its_libraries(node):  # noqa: F811
    node.start()
    node.wait_slices()
    c = node.claim("maps", count=2)
    assert node.prepare(c).ok
    names = check(node.proc.pid, DRA_DRIVER)
    assert {"libssl.so.3", "libcrypto.so.3"} <= names


def test_discover_maps_tls_only_for_the_nodefeature_api(gp, fakekube, tmp_path):
    from test_discover import Daemon, wait_until
    out = tmp_path / "gfd"
    (tmp_path / "c.yaml").write_text("version: v1\n")  # a YAML config: libfyaml only while read
    files = Daemon(gp, tmp_path, "--mock", "dgx-h100", "--use-node-feature-api=false", "-o", out,
                   "--sleep-interval", "infinite", "--config-file", tmp_path / "c.yaml")
    api = None
    try:
        wait_until(lambda: out.exists() or files.proc.poll() is not None, what="the features file")
        check(files.proc.pid, DEVICE_PLUGIN)  # the file alone: no TLS, YAML or regex library
        api = Daemon(gp, tmp_path, "--mock", "dgx-h100", "--node-name", "n1", "--namespace", "ns",
                     "--kubeconfig", fakekube.kubeconfig, "--sleep-interval", "infinite")
        wait_until(lambda: fakekube.objects("nodefeatures") or api.proc.poll() is not None,
                   what="the NodeFeature")
        assert {"libssl.so.3"} <= check(api.proc.pid, DRA_DRIVER)
    finally:
        for d in (files, api):
            if d:
                d.stop()


def test_exporter_maps_only_its_libraries(gp, tmp_path):
    """Plain HTTP with no web config: neither TLS nor libcrypt; zlib only once a client asks for
    gzip."""
    from test_exporter import Exporter
    e = Exporter(gp, tmp_path, "--mock", "dgx-h100")
    try:
        e.scrape()
        check(e.proc.pid, DEVICE_PLUGIN)
        e.scrape({"Accept-Encoding": "gzip"})
        assert "libz.so.1" in check(e.proc.pid, DEVICE_PLUGIN | {"libz.so.1"})
    finally:
        e.stop()


def test_build_links_no_optional_library():
    """The binary's own dependencies (DT_NEEDED) are the base set: everything else is loaded at
    first use by the commands that need it."""
    linked = needed(BUILD / "gpuplane")
    assert linked <= (BASE - {"libnvidia-ml.so.1"}) | SANITIZER, linked
