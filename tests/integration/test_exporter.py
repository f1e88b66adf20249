# SPDX-License-Identifier: Apache-2.0
"""`gpuplane exporter` through the binary on the mock nodes: scraped by a real Prometheus (Debian's,
started here on a free localhost port) and queried through its HTTP API; the exposition checked with
promtool and value by value against the mock profile; an XID injected through the mock; pods from the
pod-resources emulator appearing, going and coming back with the kubelet; bad counters files and
options; basic auth from a web config file."""
import gzip
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT

import prometheus as prom

sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
T = 15.0


def wait_until(fn, timeout=T, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Exporter:
    def __init__(self, gp, work, *args, env=None):
        self.work = work
        self.log_path = work / f"exporter-{time.monotonic_ns()}.log"
        self.events = work / "events.jsonl"
        self.events.touch()
        full = {k: v for k, v in os.environ.items()
                if not k.startswith(("MOCK_NVML", "GPUPLANE_", "DCGM_", "NODE_NAME"))}
        full.update({"MOCK_NVML_EVENTS": str(self.events), "NODE_NAME": "gpu-node-1"}, **(env or {}))
        self.proc = subprocess.Popen([str(gp.binary), "exporter", "-a", "127.0.0.1:0", *map(str, args)],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"), env=full)
        m = wait_until(lambda: self.proc.poll() is not None or re.search(r'"serving /metrics".* port=(\d+)', self.log()),
                       what="the exporter to listen")
        assert self.proc.poll() is None, self.log()
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def log(self):
        return self.log_path.read_text()

    def scrape(self, headers=None):
        req = urllib.request.Request(self.url + "/metrics", headers=headers or {})
        with urllib.request.urlopen(req, timeout=5) as r:
            body = r.read()
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            return r.headers, body.decode()

    def inject(self, **line):
        with open(self.events, "a") as f:
            f.write(json.dumps(line) + "\n")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(T)
        return self.proc.returncode


@pytest.fixture
def exporters(gp, tmp_path):
    started = []
    yield lambda *a, **kw: started.append(Exporter(gp, tmp_path, *a, **kw)) or started[-1]
    for e in started:
        if e.proc.poll() is None:
            e.proc.kill()
            e.proc.wait()


def series(text, name):
    """{labels dict as tuple items: value} of one metric in an exposition."""
    out = {}
    for line in text.splitlines():
        m = re.match(rf'{name}\{{(.*)\}} (\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
            out[labels["gpu"] + ("/" + labels["GPU_I_ID"] if "GPU_I_ID" in labels else "")] = (labels, float(m.group(2)))
    return out


def test_exposition_follows_the_profile(gp, exporters):
    info = gp.json("info", "--mock", "dgx-h100", "--json")
    e = exporters("--mock", "dgx-h100", "-c", "200")
    headers, text = e.scrape()
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    util = series(text, "DCGM_FI_DEV_GPU_UTIL")
    assert sorted(util) == [str(g["index"]) for g in info["gpus"]]
    for g in info["gpus"]:
        labels, value = util[str(g["index"])]
        assert labels["UUID"] == g["uuid"] and labels["pci_bus_id"] == g["pciBusId"]
        assert labels["device"] == f"nvidia{g['index']}" and labels["modelName"] == g["name"]
        assert labels["hostname"] == "gpu-node-1"
        assert labels["DCGM_FI_DRIVER_VERSION"] == info["driverVersion"]
        assert 0 <= value <= 100
    fb_used = series(text, "DCGM_FI_DEV_FB_USED")
    fb_free = series(text, "DCGM_FI_DEV_FB_FREE")
    fb_res = series(text, "DCGM_FI_DEV_FB_RESERVED")
    for g in info["gpus"]:
        k = str(g["index"])
        total = fb_used[k][1] + fb_free[k][1] + fb_res[k][1]
        assert abs(total - (g["memoryBytes"] >> 20)) <= 2, (k, total)
    xid = series(text, "DCGM_FI_DEV_XID_ERRORS")
    assert all(v == 0 and l["err_msg"] == "No Error" for l, v in xid.values())
    # counters only grow
    energy1 = {k: v for k, (l, v) in series(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").items()}
    wait_until(lambda: all(series(e.scrape()[1], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[k][1] > v
                           for k, v in energy1.items()), what="energy to grow")


@pytest.mark.skipif(prom.available() is not None, reason=str(prom.available()))
def test_promtool_finds_only_dcgm_exporters_own_names(exporters):
    e = exporters("--mock", "dgx-h100")
    problems = prom.promtool_check_metrics(e.scrape()[1])
    assert prom.unexpected_complaints(problems) == [], problems


def test_gzip_and_health(exporters):
    e = exporters("--mock", "pcie-t4")
    headers, text = e.scrape({"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"
    assert "DCGM_FI_DEV_GPU_TEMP{" in text
    with urllib.request.urlopen(e.url + "/health", timeout=5) as r:
        assert r.status == 200


def test_xid_appears_with_its_message(exporters):
    e = exporters("--mock", "dgx-h100", "-c", "100")
    e.inject(gpu=3, type="xid", xid=79)
    def seen():
        s = series(e.scrape()[1], "DCGM_FI_DEV_XID_ERRORS")["3"]
        return s if s[1] == 79 else None
    labels, _ = wait_until(seen, what="XID 79")
    assert labels["err_code"] == "79"
    assert "fallen off the bus" in labels["err_msg"]
    assert series(e.scrape()[1], "DCGM_FI_DEV_XID_ERRORS")["2"][1] == 0


WINDOW_COUNTERS = ("DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window\n"
                   "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n")


def window_counts(text, name, key):
    """{(series, key label or None): value} of a DCGM_EXP_* count."""
    out = {}
    for labels, value in ((dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1))), float(m.group(2)))
                          for m in re.finditer(rf'^{name}\{{(.*)\}} (\S+)$', text, re.M)):
        where = labels["gpu"] + ("/" + labels["GPU_I_ID"] if "GPU_I_ID" in labels else "")
        out[(where, labels.get(key))] = value
        assert labels["window_size_in_ms"] == "1500"
    return out


def test_xids_counted_over_their_window(exporters, tmp_path):
    csv = tmp_path / "window.csv"
    csv.write_text(WINDOW_COUNTERS)
    e = exporters("--mock", "dgx-h100", "-c", "100", "-f", csv, "-x", "1500",
                  "--clock-events-count-window-size", "1500")
    before = window_counts(e.scrape()[1], "DCGM_EXP_XID_ERRORS_COUNT", "xid")
    assert before == {(str(g), None): 0 for g in range(8)}
    for xid in (13, 79, 13):
        e.inject(gpu=3, type="xid", xid=xid)
    counts = wait_until(lambda: (c := window_counts(e.scrape()[1], "DCGM_EXP_XID_ERRORS_COUNT", "xid"))
                        .get(("3", "13")) == 2 and c, what="two XID 13 in the window")
    assert counts[("3", "79")] == 1 and ("3", None) not in counts
    assert counts[("2", None)] == 0
    # Past the window they are forgotten and the GPU is back to one sample of 0.
    wait_until(lambda: window_counts(e.scrape()[1], "DCGM_EXP_XID_ERRORS_COUNT", "xid").get(("3", None)) == 0,
               what="the XIDs to leave the window")


def test_clock_events_counted_over_their_window(exporters, tmp_path):
    csv = tmp_path / "window.csv"
    csv.write_text(WINDOW_COUNTERS)
    e = exporters("--mock", "dgx-h100", "-c", "100", "-f", csv, "-x", "1500",
                  "--clock-events-count-window-size", "1500")
    # GPU 7 of the profile idles: its reasons say gpu_idle at every collection.
    counts = wait_until(lambda: (c := window_counts(e.scrape()[1], "DCGM_EXP_CLOCK_EVENTS_COUNT", "clock_event"))
                        .get(("7", "gpu_idle"), 0) >= 3 and c, what="gpu_idle samples")
    assert counts[("2", None)] == 0
    assert counts[("7", "gpu_idle")] <= 1500 / 100 + 1  # one sample per collection at most
    e.inject(gpu=2, type="telemetry", clocksEventReasons=0x24)  # SwPowerCap | SwThermalSlowdown
    counts = wait_until(lambda: (c := window_counts(e.scrape()[1], "DCGM_EXP_CLOCK_EVENTS_COUNT", "clock_event"))
                        .get(("2", "sw_thermal"), 0) >= 2 and c, what="sw_thermal samples")
    assert counts[("2", "power_cap")] >= 2 and ("2", None) not in counts
    e.inject(gpu=2, type="telemetry", clocksEventReasons=0)
    wait_until(lambda: window_counts(e.scrape()[1], "DCGM_EXP_CLOCK_EVENTS_COUNT", "clock_event").get(("2", None)) == 0,
               what="the clock events to leave the window")


def test_mig_instances_count_their_gpus_clock_events(exporters, tmp_path):
    csv = tmp_path / "window.csv"
    csv.write_text(WINDOW_COUNTERS)
    e = exporters("--mock", "a100-mig", "-c", "100", "-f", csv, "-x", "1500",
                  "--clock-events-count-window-size", "1500")
    e.inject(gpu=0, type="telemetry", clocksEventReasons=0x4)  # GPU 0 is in MIG mode
    counts = wait_until(lambda: (c := window_counts(e.scrape()[1], "DCGM_EXP_CLOCK_EVENTS_COUNT", "clock_event"))
                        .get(("0/2", "power_cap"), 0) >= 2 and c, what="power_cap on a GPU instance")
    instances = {where for where, _ in counts if where.startswith("0/")}
    assert len(instances) > 1, counts
    assert all(counts.get((i, "power_cap"), 0) >= 1 and (i, None) not in counts for i in instances), counts
    assert counts[("2", None)] == 0


def test_mig_devices_are_their_own_series(exporters):
    e = exporters("--mock", "a100-mig")
    fb = series(e.scrape()[1], "DCGM_FI_DEV_FB_USED")
    mig = [l for k, (l, v) in fb.items() if "/" in k]
    assert mig and all(l["GPU_I_PROFILE"] and l["GPU_I_ID"] for l in mig)


@pytest.mark.skipif(prom.available() is not None, reason=str(prom.available()))
@pytest.mark.parametrize("spec,want", [("f", ["0/10", "0/2", "0/3", "0/9", "1/1", "1/2", "2", "3"]),
                                       ("g", ["0", "1", "2", "3"]), ("g:1,3", ["1", "3"]),
                                       ("f:0", ["0/10", "0/2", "0/3", "0/9"]), ("i:2", ["0/2", "1/2"])])
def test_devices_select_the_series(gp, exporters, spec, want):
    """-d as dcgm-exporter's: a100-mig's GPUs 0 (GPU instances 2, 3, 9, 10) and 1 (1, 2) are in MIG
    mode, 2 and 3 are not."""
    e = exporters("--mock", "a100-mig", "-d", spec)
    got = sorted(series(e.scrape()[1], "DCGM_FI_DEV_FB_USED"))
    assert got == want, got


@pytest.mark.skipif(prom.available() is not None, reason=str(prom.available()))
def test_prometheus_scrapes_and_queries(exporters, tmp_path):
    import podresources_emu as pre
    sock_dir = pathlib.Path(tempfile.mkdtemp(prefix="pr-"))
    kubelet = pre.PodResourcesEmulator(sock_dir / "kubelet.sock").start()
    try:
        e = exporters("--mock", "dgx-h100", "-c", "500", "-k",
                      "--pod-resources-kubelet-socket", kubelet.socket)
        uuid0 = series(e.scrape()[1], "DCGM_FI_DEV_GPU_UTIL")["0"][0]["UUID"]
        kubelet.set_pod("ml", "trainer-0", {"main": {"devices": {"nvidia.com/gpu": [uuid0]}}})
        with prom.Prometheus([f"127.0.0.1:{e.port}"]) as p:
            util = p.wait_for_series("DCGM_FI_DEV_GPU_UTIL", count=8)
            assert all(0 <= v <= 100 for _, v in util)
            rate = p.wait_until("rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[1m])",
                                lambda r: len(r) == 8 and all(v > 0 for _, v in r), timeout=20)
            assert all(v > 0 for _, v in rate)
            pods = p.wait_for_series('DCGM_FI_DEV_GPU_UTIL{pod="trainer-0",namespace="ml"}', count=1)
            assert pods[0][0]["gpu"] == "0" and pods[0][0]["container"] == "main"
            # the kubelet goes away: the series stay, without pods
            kubelet.stop()
            p.wait_for_absent('DCGM_FI_DEV_GPU_UTIL{pod="trainer-0"}', timeout=20)
            assert len(p.query("DCGM_FI_DEV_GPU_UTIL")) == 8
            kubelet.start()
            p.wait_for_series('DCGM_FI_DEV_GPU_UTIL{pod="trainer-0"}', count=1, timeout=20)
            kubelet.remove_pod("ml", "trainer-0")
            p.wait_for_absent('DCGM_FI_DEV_GPU_UTIL{pod="trainer-0"}', timeout=20)
    finally:
        kubelet.stop()
        sock_dir.rmdir()


def test_malformed_counters_file_exits_1(gp, tmp_path):
    bad = tmp_path / "counters.csv"
    bad.write_text("# fields\nDCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\nDCGM_FI_NOPE, gauge, x\n")
    p = gp.run("exporter", "--mock", "pcie-t4", "-f", bad, "-a", "127.0.0.1:0", timeout=20)
    assert p.returncode == 1
    assert f"{bad}:3:" in p.stderr, p.stderr


def test_usage_errors_exit_2(gp):
    for args in (["-c", "5s"], ["--bogus"], ["-d", "x"]):
        p = gp.run("exporter", "--mock", "pcie-t4", *args)
        assert p.returncode == 2 and "--help" in p.stderr, (args, p.stderr)


def test_basic_auth_from_the_web_config(exporters, tmp_path):
    import warnings
    with warnings.catch_warnings():  # crypt is deprecated, but Debian's python3.11 ships it
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))
    web = tmp_path / "web.yaml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    e = exporters("--mock", "pcie-t4", "--web-config-file", web)
    with pytest.raises(urllib.error.HTTPError) as err:
        e.scrape()
    assert err.value.code == 401
    import base64
    good = base64.b64encode(b"prometheus:s3cret").decode()
    bad = base64.b64encode(b"prometheus:nope").decode()
    assert "DCGM_FI_DEV_GPU_TEMP" in e.scrape({"Authorization": f"Basic {good}"})[1]
    with pytest.raises(urllib.error.HTTPError) as err:
        e.scrape({"Authorization": f"Basic {bad}"})
    assert err.value.code == 401


def test_tls_from_the_web_config(exporters, tmp_path):
    import ssl
    import fakekube
    certs = fakekube.Certs(tmp_path / "certs")
    web = tmp_path / "web.yaml"
    web.write_text(f"tls_server_config:\n  cert_file: {certs.server_cert}\n  key_file: {certs.server_key}\n")
    e = exporters("--mock", "pcie-t4", "--web-config-file", web)
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    with urllib.request.urlopen(f"https://127.0.0.1:{e.port}/metrics", context=ctx, timeout=5) as r:
        assert r.status == 200 and b"DCGM_FI_DEV_GPU_TEMP" in r.read()
    with pytest.raises((urllib.error.URLError, ConnectionError, http_client_errors())):
        urllib.request.urlopen(f"http://127.0.0.1:{e.port}/metrics", timeout=5).read()
    with pytest.raises(urllib.error.URLError):  # a client that does not trust the certificate
        urllib.request.urlopen(f"https://127.0.0.1:{e.port}/metrics",
                               context=ssl.create_default_context(), timeout=5)


def http_client_errors():
    import http.client
    return http.client.HTTPException


@pytest.mark.parametrize("virtual", [False, True])
def test_shared_gpu_pods(exporters, virtual):
    import podresources_emu as pre
    sock_dir = pathlib.Path(tempfile.mkdtemp(prefix="pr-"))
    kubelet = pre.PodResourcesEmulator(sock_dir / "kubelet.sock").start()
    try:
        args = ["--mock", "pcie-t4", "-c", "100", "-k", "--pod-resources-kubelet-socket", kubelet.socket]
        e = exporters(*args, *(["--kubernetes-virtual-gpus"] if virtual else []))
        uuid = series(e.scrape()[1], "DCGM_FI_DEV_GPU_UTIL")["1"][0]["UUID"]
        kubelet.set_pod("a", "p0", {"c": {"devices": {"nvidia.com/gpu": [f"{uuid}::0"]}}})
        kubelet.set_pod("b", "p1", {"c": {"devices": {"nvidia.com/gpu": [f"{uuid}::1"]}}})

        def gpu1():
            lines = [l for l in e.scrape()[1].splitlines()
                     if l.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="1"') and 'pod="' in l]
            return lines if lines else None
        lines = wait_until(gpu1, what="pods on GPU 1")
        if virtual:
            lines = wait_until(lambda: (l := gpu1()) and len(l) == 2 and l, what="two pods on GPU 1")
            assert 'pod="p0"' in lines[0] and 'vgpu="0"' in lines[0]
            assert 'pod="p1"' in lines[1] and 'vgpu="1"' in lines[1]
        else:
            assert len(lines) == 1 and 'pod="p0"' in lines[0] and "vgpu" not in lines[0]
        assert sum(l.startswith("DCGM_FI_DEV_GPU_UTIL{") for l in e.scrape()[1].splitlines()) == (5 if virtual else 4)
    finally:
        kubelet.stop()
        sock_dir.rmdir()
