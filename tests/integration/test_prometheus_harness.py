# SPDX-License-Identifier: Apache-2.0
"""The Prometheus harness (prometheus.py) against a small HTTP server serving a fixed exposition in
dcgm-exporter's format: proof that the harness works before the exporter does."""
import http.server
import os
import threading
import time

import pytest

import prometheus
from prometheus import Prometheus, promtool_check_metrics, unexpected_complaints

pytestmark = pytest.mark.skipif(prometheus.available() is not None,
                                reason=prometheus.available() or "")

LABELS = ('gpu="{i}",UUID="GPU-4f1c3a52-7e0d-4b8e-9a51-{i:012d}",pci_bus_id="00000000:{bus}:00.0",'
          'device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"')
BUSES = ("18", "2A")


def exposition(energy, gpus=(0, 1)):
    """dcgm-exporter's shape: HELP and TYPE from the default counters file, one line per GPU."""
    out = []
    for name, kind, help_text, value in (
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda i: 42 + i),
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda i: 35),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
             "Total energy consumption since boot (in mJ).", lambda i: energy),
            ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
             lambda i: 0),
            ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
             "Total number of NVLink bandwidth counters for all lanes.", lambda i: 0)):
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        out += [f"{name}{{{LABELS.format(i=i, bus=BUSES[i])}}} {value(i)}" for i in gpus]
    out += ["# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
            "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
    out += [f'DCGM_FI_DEV_XID_ERRORS{{{LABELS.format(i=i, bus=BUSES[i])},err_code="0",'
            f'err_msg="No Error"}} 0' for i in gpus]
    return "\n".join(out) + "\n"


class FakeExporter:
    """Serves exposition() on 127.0.0.1:<free port>/metrics; each scrape adds 1500 mJ of energy.
    `gpus` can be changed to make a GPU's series disappear."""

    def __init__(self):
        self.energy = 1_000_000
        self.gpus = (0, 1)
        self.scrapes = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                with outer.lock:
                    outer.energy += 1500
                    outer.scrapes += 1
                    body = exposition(outer.energy, outer.gpus).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def exporter():
    fx = FakeExporter()
    yield fx
    fx.close()


@pytest.fixture(scope="module")
def prom(exporter):
    with Prometheus([exporter.address]) as p:
        yield p


def test_scrape_and_query(prom, exporter):
    series = prom.wait_for_series('DCGM_FI_DEV_GPU_UTIL{gpu="0"}')
    [(labels, value)] = series
    assert value == 42
    assert labels["UUID"] == "GPU-4f1c3a52-7e0d-4b8e-9a51-000000000000"
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert labels["pci_bus_id"] == "00000000:18:00.0"
    assert labels["Hostname"] == "n1"
    assert labels["instance"] == exporter.address and labels["job"] == "gpuplane"
    both = prom.wait_for_series("DCGM_FI_DEV_GPU_UTIL", count=2)
    assert sorted(v for _, v in both) == [42, 43]
    assert prom.query("scalar(sum(DCGM_FI_DEV_GPU_UTIL))") == 85
    health = prom.targets_health()
    assert health == {f"http://{exporter.address}/metrics": ("up", "")}


def test_rate_of_a_counter(prom):
    # 1500 mJ per scrape, one scrape a second: about 1.5 W once two samples are in the window.
    [(_, rate)] = prom.wait_until('rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}[5s])',
                                  lambda r: len(r) == 1 and r[0][1] > 0)
    assert 300 < rate < 6000  # about 1500; a second scraper of the same server doubles it


def test_query_range(prom):
    prom.wait_until('count_over_time(DCGM_FI_DEV_GPU_TEMP{gpu="1"}[10s])',
                    lambda r: r and r[0][1] >= 3)
    end = time.time()
    [(labels, points)] = prom.query_range('DCGM_FI_DEV_GPU_TEMP{gpu="1"}', end - 2, end, step=1)
    assert labels["gpu"] == "1"
    assert len(points) == 3 and all(v == 35 for _, v in points)
    assert [round(t - points[0][0]) for t, _ in points] == [0, 1, 2]


def test_bad_expression_is_an_error(prom):
    with pytest.raises(prometheus.PrometheusError) as e:
        prom.query("rate(DCGM_FI_DEV_GPU_UTIL)")
    assert e.value.error_type == "bad_data"
    with pytest.raises(prometheus.PrometheusError):
        prom.query("sum(")


def test_a_gpu_that_goes_away(exporter, prom):
    prom.wait_for_series('DCGM_FI_DEV_GPU_UTIL{gpu="1"}')
    with exporter.lock:
        exporter.gpus = (0,)
    try:
        assert prom.wait_for_absent('DCGM_FI_DEV_GPU_UTIL{gpu="1"}', timeout=10) == []
        prom.wait_for_series('absent(DCGM_FI_DEV_GPU_UTIL{gpu="1"})')
        assert len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 1
    finally:
        with exporter.lock:
            exporter.gpus = (0, 1)


def test_wait_gives_up_at_its_deadline(prom):
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match="not seen within 0.5 s"):
        prom.wait_for_series("DCGM_FI_DEV_NO_SUCH_FIELD", timeout=0.5)
    assert time.monotonic() - t0 < 5


def test_stop_ends_the_process_and_removes_its_directory(exporter):
    p = Prometheus([exporter.address]).start()
    pid, directory = p.proc.pid, p.dir
    assert os.path.isdir(os.path.join(directory, "data"))
    assert p.port != 9090  # never the port of a system Prometheus
    p.stop()
    assert not os.path.exists(directory)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    p.stop()  # a second stop is harmless


def test_promtool_accepts_a_clean_exposition():
    text = ("# HELP gpuplane_scrapes_total Scrapes served.\n"
            "# TYPE gpuplane_scrapes_total counter\n"
            'gpuplane_scrapes_total{gpu="0",pci_bus_id="00000000:18:00.0"} 3\n'
            "# HELP gpuplane_gpu_temp_celsius GPU temperature.\n"
            "# TYPE gpuplane_gpu_temp_celsius gauge\n"
            'gpuplane_gpu_temp_celsius{gpu="0"} 35\n')
    assert promtool_check_metrics(text) == []


def test_promtool_flags_wrong_expositions():
    assert promtool_check_metrics("# TYPE energy counter\nenergy 1\n") == [
        'energy counter metrics should have "_total" suffix', "energy no help text"]
    with pytest.raises(prometheus.ExpositionError, match="second HELP line"):
        promtool_check_metrics("# HELP a_total h\n# TYPE a_total counter\na_total 1\n"
                               "# HELP a_total h\n# TYPE a_total counter\na_total 2\n")
    with pytest.raises(prometheus.ExpositionError, match="expected float"):
        promtool_check_metrics('DCGM_FI_DEV_GPU_UTIL{gpu="0"} forty-two\n')


def test_promtool_on_dcgm_exporter_names():
    """What promtool 2.42 says about dcgm-exporter's real names: a drop-in keeps these, so the
    exporter's tests allow exactly these complaints (unexpected_complaints) and no others."""
    problems = promtool_check_metrics(exposition(1000))
    assert problems == [
        "DCGM_FI_DEV_GPU_TEMP label names should be written in 'snake_case' not 'camelCase'",
        "DCGM_FI_DEV_GPU_UTIL label names should be written in 'snake_case' not 'camelCase'",
        'DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counter metrics should have "_total" suffix',
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL label names should be written in 'snake_case' not "
        "'camelCase'",
        'DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter metrics should have "_total" suffix',
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER label names should be written in 'snake_case' not "
        "'camelCase'",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'",
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter metrics should have "_total" suffix',
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION label names should be written in 'snake_case' not "
        "'camelCase'",
        "DCGM_FI_DEV_XID_ERRORS label names should be written in 'snake_case' not 'camelCase'",
    ]
    assert unexpected_complaints(problems) == []
    # Without modelName the label complaints go; the three name complaints stay.
    no_model = exposition(1000).replace(',modelName="NVIDIA H100 80GB HBM3"', "")
    assert len(promtool_check_metrics(no_model)) == 4
    # Anything beyond the inherent ones is reported: a missing HELP, a gauge named like a counter.
    extra = no_model.replace("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n", "")
    extra += "# HELP DCGM_FI_DEV_FB_USED_total x\n# TYPE DCGM_FI_DEV_FB_USED_total gauge\n" \
             'DCGM_FI_DEV_FB_USED_total{gpu="0"} 1\n'
    assert unexpected_complaints(promtool_check_metrics(extra)) == [
        "DCGM_FI_DEV_FB_USED_total non-counter metrics should not have \"_total\" suffix",
        "DCGM_FI_DEV_GPU_TEMP no help text"]
