# SPDX-License-Identifier: Apache-2.0
"""A real Prometheus server (Debian's `prometheus`) for the tests, and `promtool`.

The exporter is held to what a user's Prometheus makes of it, not to a parser of our own: the tests
start Prometheus on a free port of 127.0.0.1, with its own configuration and a temporary TSDB, scraping
the given targets every second, and query it through its HTTP API. It never touches a system
Prometheus (its port, config or data): everything it uses lives in a temporary directory removed when
it stops. `promtool` checks expositions (`check metrics`), rule files (`check rules`) and rule unit
tests (`test rules`).

    with Prometheus(["127.0.0.1:9400"]) as prom:
        prom.wait_for_series('DCGM_FI_DEV_GPU_UTIL{gpu="0"}')
        [(labels, value)] = prom.query('DCGM_FI_DEV_GPU_UTIL{gpu="0"}')
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

PROMETHEUS = os.environ.get("GPUPLANE_PROMETHEUS", "prometheus")
PROMTOOL = os.environ.get("GPUPLANE_PROMTOOL", "promtool")


class PrometheusError(Exception):
    """The API answered an error (bad expression, timeout): `error_type` and the server's message."""

    def __init__(self, error_type, message, expr=None):
        super().__init__(f"{error_type}: {message}" + (f" (expr {expr!r})" if expr else ""))
        self.error_type = error_type
        self.message = message


def available():
    """Why Prometheus cannot run here (a string), or None when `prometheus` and `promtool` exist."""
    for tool in (PROMETHEUS, PROMTOOL):
        if shutil.which(tool) is None:
            return f"{tool} not installed (scripts/install-deps.sh installs Debian's prometheus)"
    return None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(targets, rule_files, scrape_interval, metrics_path):
    # JSON is YAML: no YAML writer is needed. The scrape timeout may not exceed the interval.
    cfg = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                   "evaluation_interval": scrape_interval},
        "scrape_configs": [{"job_name": "gpuplane", "metrics_path": metrics_path,
                            "static_configs": [{"targets": list(targets)}]}],
    }
    if rule_files:
        cfg["rule_files"] = [str(p) for p in rule_files]
    return json.dumps(cfg, indent=2)


def _parse_value(pair):
    return float(pair[1])  # "NaN", "+Inf" and "-Inf" are what float() reads


class Prometheus:
    """One Prometheus process. `start()` (or `with`) runs it and waits until /-/ready answers 200;
    `stop()` ends it by PID (SIGTERM, then SIGKILL) and removes its directory (config, TSDB, log)."""

    def __init__(self, targets, rule_files=(), scrape_interval="1s", metrics_path="/metrics",
                 ready_timeout=20.0):
        self.targets = list(targets)
        self.rule_files = list(rule_files)
        self.scrape_interval = scrape_interval
        self.metrics_path = metrics_path
        self.ready_timeout = ready_timeout
        self.dir = None
        self.proc = None
        self.port = None
        self.url = None

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="gpuplane-prom-")
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(_config(self.targets, self.rule_files, self.scrape_interval, self.metrics_path))
        try:
            # The port is free when chosen but could be taken before Prometheus binds it: then it
            # exits at once, and another port is tried.
            for _ in range(3):
                self.port = _free_port()
                self.url = f"http://127.0.0.1:{self.port}"
                with open(self.log_path, "w") as log:
                    self.proc = subprocess.Popen(
                        [PROMETHEUS, f"--config.file={config}",
                         f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
                         f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info"],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True)
                if self._wait_ready():
                    return self
                if "address already in use" not in self.log():
                    break
                self._end_process()
            raise RuntimeError(f"Prometheus not ready within {self.ready_timeout} s:\n{self.log()[-4000:]}")
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self):
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        return False

    def _end_process(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def stop(self):
        """Ends the process by its PID and removes the directory. Safe to call twice."""
        try:
            self._end_process()
        finally:
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def log_path(self):
        return os.path.join(self.dir, "prometheus.log")

    def log(self):
        """What Prometheus has logged so far (for failure messages)."""
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # --- the HTTP API ----------------------------------------------------------------------------

    def api(self, path, **params):
        """GET /api/v1/<path> with the query parameters; returns `data` of a success, raises
        PrometheusError for an error answer (400 bad_data, 422 execution, 503 timeout)."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            try:
                body = json.load(e)
            except ValueError:
                raise PrometheusError(f"http {e.code}", e.reason) from None
        if body.get("status") != "success":
            raise PrometheusError(body.get("errorType", "unknown"), body.get("error", ""),
                                  params.get("query"))
        return body["data"]

    def query(self, expr, at=None):
        """An instant query. A vector gives [(labels, value)] (labels include __name__ where the
        result keeps it), a scalar a float, a string the string."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        kind, result = data["resultType"], data["result"]
        if kind == "vector":
            return [(s["metric"], _parse_value(s["value"])) for s in result]
        if kind == "scalar":
            return _parse_value(result)
        if kind == "string":
            return result[1]
        return [(s["metric"], [(float(t), float(v)) for t, v in s["values"]]) for s in result]

    def query_range(self, expr, start, end, step=1.0):
        """A range query (times in Unix seconds): [(labels, [(t, value), ...])]."""
        data = self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
                        step=f"{step}")
        return [(s["metric"], [(float(t), float(v)) for t, v in s["values"]])
                for s in data["result"]]

    def targets_health(self):
        """{scrapeUrl: (health, lastError)} of the active targets."""
        return {t["scrapeUrl"]: (t["health"], t["lastError"])
                for t in self.api("targets", state="active")["activeTargets"]}

    def wait_until(self, expr, predicate, timeout=15.0, what=None):
        """Polls the instant query until predicate(result) is true; returns that result. After the
        timeout, raises AssertionError with the last result and the targets' health."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            last = self.query(expr)
            if predicate(last):
                return last
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what or expr!r}: not seen within {timeout} s; last result "
                                     f"{last!r}; targets {self.targets_health()!r}")
            time.sleep(0.1)

    def wait_for_series(self, expr, count=None, timeout=15.0):
        """Waits until `expr` returns at least one series (exactly `count` when given)."""
        if count is None:
            return self.wait_until(expr, lambda r: bool(r), timeout, f"series of {expr}")
        return self.wait_until(expr, lambda r: len(r) == count, timeout,
                               f"{count} series of {expr}")

    def wait_for_absent(self, expr, timeout=15.0):
        """Waits until `expr` returns no series (a target's series are marked stale at the first
        scrape that lacks them)."""
        return self.wait_until(expr, lambda r: not r, timeout, f"no series of {expr}")


# --- promtool -------------------------------------------------------------------------------------

def promtool(*args, stdin=None, timeout=30):
    """Runs promtool; returns the CompletedProcess (text)."""
    return subprocess.run([PROMTOOL, *map(str, args)], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


class ExpositionError(Exception):
    """promtool could not parse the exposition at all (exit status 1)."""


def promtool_check_metrics(text):
    """`promtool check metrics` on an exposition (text format 0.0.4). Returns its lint complaints,
    each distinct problem once ("<metric> <text>"; promtool repeats a label complaint per series), in
    promtool's order (by metric name); [] for a clean exposition. Raises ExpositionError
    when the text does not parse (promtool stops at the first such error)."""
    p = promtool("check", "metrics", stdin=text)
    out = (p.stdout + p.stderr).strip()
    if p.returncode == 0:
        return []
    if p.returncode == 3:  # lint problems only
        return list(dict.fromkeys(line for line in out.splitlines() if line.strip()))
    raise ExpositionError(out or f"promtool exit status {p.returncode}")


# The complaints promtool 2.42 makes about dcgm-exporter's own names and labels, which a drop-in has
# to keep (see docs/monitoring.md): a counter whose name does not end in lower-case "_total", a
# name that says "counter", and the camelCase label modelName.
DCGM_NAME_COMPLAINTS = (
    'counter metrics should have "_total" suffix',
    "metric name should not include type 'counter'",
    "label names should be written in 'snake_case' not 'camelCase'",
)


def unexpected_complaints(problems):
    """The complaints of promtool_check_metrics() that are not inherent in dcgm-exporter's names:
    what an exporter that copies those names must still have none of."""
    return [p for p in problems if not p.startswith("DCGM_") or
            not any(p.endswith(" " + c) for c in DCGM_NAME_COMPLAINTS)]
