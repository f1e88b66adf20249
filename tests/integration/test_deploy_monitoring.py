# SPDX-License-Identifier: Apache-2.0
"""The monitoring files under deploy/: the Grafana dashboard and the Prometheus alert rules.

Every PromQL expression of the dashboard is parsed by promtool and evaluated by a real Prometheus
scraping a dcgm-exporter-style exposition of every default field, where it must return data; every
metric it names is enabled in dcgm-exporter's default counters file. The alert rules pass `promtool
check rules` and their unit tests, and the critical XID alert fires in the live Prometheus."""
import http.server
import json
import pathlib
import re
import threading

import pytest
import yaml

import prometheus
from prometheus import Prometheus, promtool

pytestmark = pytest.mark.skipif(prometheus.available() is not None,
                                reason=prometheus.available() or "")

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuplane-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "gpuplane-alerts.yaml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "gpuplane-alerts.test.yaml"
COUNTERS = ROOT / "src" / "exporter" / "default-counters.csv"
REFERENCE_COUNTERS = pathlib.Path("/work/shared/reference/dcgm-exporter-default-counters.csv")

METRIC = re.compile(r"\b(DCGM_[A-Z0-9_]+)\b")


def default_fields():
    """{field: type} of the enabled lines of dcgm-exporter's default counters file."""
    path = COUNTERS if COUNTERS.exists() else REFERENCE_COUNTERS
    fields = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, kind, _ = (part.strip() for part in line.split(",", 2))
        fields[name] = kind
    return fields


def dashboard():
    return json.loads(DASHBOARD.read_text())


def panels(d):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", ())


def panel_exprs(d):
    """[(panel title, expression)] of every query of every panel."""
    return [(p["title"], t["expr"]) for p in panels(d) for t in p.get("targets", ())]


def variable_selectors(d):
    """The series selectors inside the label_values() queries of the template variables."""
    out = []
    for v in d["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q)
        assert m, f"variable {v['name']}: {q}"
        out.append((v["name"], m.group(1), m.group(2)))
    return out


def grafana_expand(expr, hostname=".*", gpu=".*"):
    """What Grafana sends for an expression: its variables replaced."""
    return (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            .replace("$__interval", "1m").replace("$hostname", hostname).replace("$gpu", gpu))


# --- the dashboard ---------------------------------------------------------------------------------

def test_dashboard_model():
    d = dashboard()
    assert d["uid"] == "gpuplane-gpus" and d["title"] and d["schemaVersion"] >= 36
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("hostname", "gpu"):
        assert variables[name]["type"] == "query" and variables[name]["includeAll"]
        assert variables[name]["allValue"] == ".*"  # also matches series without the label
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    ids = [p["id"] for p in panels(d)]
    assert len(ids) == len(set(ids))
    for p in panels(d):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
            # Every query follows the node and GPU selectors.
            assert 'hostname=~"$hostname"' in t["expr"] and 'gpu=~"$gpu"' in t["expr"], p["title"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]


def test_dashboard_covers_the_issue():
    exprs = " ".join(e for _, e in panel_exprs(dashboard()))
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                 "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                 "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_XID_ERRORS",
                 "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                 "DCGM_FI_DEV_ROW_REMAP_FAILURE"):
        assert name in exprs, name
    assert "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in exprs
    assert "rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER" in exprs
    assert "by (namespace, pod)" in exprs
    xid = [p for p in panels(dashboard()) if p["title"] == "XID errors"][0]
    organize = xid["transformations"][0]["options"]
    assert {"err_code", "err_msg"} <= set(organize["indexByName"])


def test_dashboard_metrics_are_default_fields():
    fields = default_fields()
    d = dashboard()
    used = set()
    for title, expr in panel_exprs(d):
        names = set(METRIC.findall(expr))
        assert names, f"{title}: no DCGM metric in {expr}"
        unknown = names - set(fields)
        assert not unknown, f"{title}: {sorted(unknown)} not enabled in the default counters"
        used |= names
    for name, selector, _ in variable_selectors(d):
        assert set(METRIC.findall(selector)) <= set(fields), name
    assert not [n for n in used if fields[n] == "label"]


def test_dashboard_expressions_parse(tmp_path):
    # promtool parses PromQL in rule files: each panel query becomes a recording rule.
    d = dashboard()
    rules = [{"record": f"dashboard:panel_{i}", "expr": grafana_expand(e)}
             for i, (_, e) in enumerate(panel_exprs(d))]
    rules += [{"record": f"dashboard:variable_{n}", "expr": grafana_expand(s)}
              for n, s, _ in variable_selectors(d)]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    p = promtool("check", "rules", path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"SUCCESS: {len(rules)} rules found" in p.stdout
    # ... and promtool does catch a broken one.
    path.write_text(json.dumps({"groups": [{"name": "d", "rules": [
        {"record": "x:y", "expr": "rate(DCGM_FI_DEV_GPU_UTIL)"}]}]}))
    assert promtool("check", "rules", path).returncode != 0


# --- the alert rules --------------------------------------------------------------------------------

def test_alert_rules_check():
    p = promtool("check", "rules", ALERTS)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 9 rules found" in p.stdout


def test_alert_rules_unit_tests():
    p = promtool("test", "rules", ALERT_TESTS)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_alert_rules_metrics_are_default_fields():
    fields = default_fields()
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    names = set(METRIC.findall("\n".join(r["expr"] for r in rules)))
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"} <= names
    assert names <= set(fields), sorted(names - set(fields))


def test_alert_unit_tests_cover_every_alert():
    alerts = set(re.findall(r"^\s+- alert: (\w+)$", ALERTS.read_text(), re.M))
    tested = set(re.findall(r"^\s+alertname: (\w+)$", ALERT_TESTS.read_text(), re.M))
    assert len(alerts) == 9 and alerts == tested
    # each alert is expected to fire somewhere, not only to stay quiet
    firing = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels", ALERT_TESTS.read_text()))
    assert firing == alerts


# --- live: a real Prometheus scraping every default field ------------------------------------------

GPUS = [
    {"gpu": "0", "UUID": "GPU-8d5b33a0-19f5-4c4e-8a3b-2f4e0c7f1a00", "pci_bus_id": "00000000:18:00.0",
     "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3", "hostname": "n1",
     "DCGM_FI_DRIVER_VERSION": "550.54.15", "pod": "trainer-0", "namespace": "ml",
     "container": "main"},
    {"gpu": "1", "UUID": "GPU-8d5b33a0-19f5-4c4e-8a3b-2f4e0c7f1a01", "pci_bus_id": "00000000:2A:00.0",
     "device": "nvidia1", "modelName": "NVIDIA H100 80GB HBM3", "hostname": "n1",
     "DCGM_FI_DRIVER_VERSION": "550.54.15"},
]


def full_exposition(scrape):
    """Every enabled default field for two GPUs; GPU 0 belongs to a pod, GPU 1 reported XID 79.
    The energy, PCIe replay and NVLink counters grow with each scrape; no rows are remapped."""
    out = []
    for name, kind in default_fields().items():
        if kind == "label":
            continue
        out += [f"# HELP {name} {name}", f"# TYPE {name} {kind}"]
        for g in GPUS:
            labels = dict(g)
            value = 10 + int(g["gpu"]) + (scrape * 1000 if kind == "counter" and "ROWS" not in name else 0)
            if name == "DCGM_FI_DEV_XID_ERRORS":
                code = 79 if g["gpu"] == "1" else 0
                labels.update(err_code=str(code),
                              err_msg="GPU has fallen off the bus" if code else "No Error")
                value = code
            elif name == "DCGM_FI_DEV_ROW_REMAP_FAILURE":
                value = 0
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            out.append(f"{name}{{{text}}} {value}")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def live():
    state = {"scrapes": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state["scrapes"] += 1
            body = full_exposition(state["scrapes"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with Prometheus([f"127.0.0.1:{server.server_address[1]}"], rule_files=[ALERTS]) as prom:
            yield prom
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_live_exposition_is_clean():
    problems = prometheus.promtool_check_metrics(full_exposition(1))
    assert prometheus.unexpected_complaints(problems) == []


def test_dashboard_queries_return_data(live):
    d = dashboard()
    live.wait_until("count_over_time(DCGM_FI_DEV_GPU_TEMP[1m])", lambda r: r and r[0][1] >= 3)
    for title, expr in panel_exprs(d):
        q = grafana_expand(expr, hostname="n1", gpu="0|1")
        result = live.wait_for_series(q, timeout=5)
        assert all(v == v for _, v in result), f"{title}: NaN in {q}: {result}"
    for name, selector, label in variable_selectors(d):
        values = {labels[label] for labels, _ in live.query(grafana_expand(selector, hostname="n1"))}
        assert values == ({"n1"} if label == "hostname" else {"0", "1"}), name
    # The selectors select: GPU 1 alone, and a node that is not there.
    util = [p for p in panels(d) if p["title"] == "GPU utilisation"][0]["targets"][0]["expr"]
    assert [v for _, v in live.query(grafana_expand(util, hostname="n1", gpu="1"))] == [11]
    assert live.query(grafana_expand(util, hostname="n2")) == []
    by_pod = [p for p in panels(d) if p["title"] == "GPU utilisation by pod"][0]["targets"][0]["expr"]
    assert live.query(grafana_expand(by_pod)) == [({"namespace": "ml", "pod": "trainer-0"}, 10)]
    [(labels, _)] = live.query(grafana_expand(
        [p for p in panels(d) if p["title"] == "XID errors"][0]["targets"][0]["expr"]))
    assert (labels["gpu"], labels["err_code"], labels["err_msg"]) == (
        "1", "79", "GPU has fallen off the bus")


def test_live_alerts(live):
    [(labels, _)] = live.wait_for_series('ALERTS{alertstate="firing"}')
    assert labels["alertname"] == "GPUXidErrorCritical" and labels["gpu"] == "1"
    assert labels["severity"] == "critical"
    rules = live.api("rules", type="alert")["groups"][0]["rules"]
    assert len(rules) == 9 and all(r["health"] == "ok" for r in rules), rules
    firing = [a for r in rules for a in r["alerts"] if a["state"] == "firing"]
    assert firing[0]["annotations"]["summary"] == "GPU 1 on n1: XID 79 (GPU has fallen off the bus)"
