# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` end to end against the kubelet emulator and the mock NVML library:

* CDI specs: with a cdi-* device-list strategy the plugin writes k8s.device-plugin.nvidia.com-gpu.json
  into --cdi-spec-dir before it registers; every name Allocate hands out resolves in it; SIGHUP
  rewrites it (index names) and removes it when CDI is turned off; SIGTERM leaves it (as NVIDIA's).
* A GPU lost before NVML could name it (lost-gpu.yaml, GPU 5) that comes back is noticed by the
  periodic probe and advertised on the open ListAndWatch stream, without a SIGHUP or a new Register.
* SIGHUP: unchanged resources keep their streams and registrations; a non-resource setting applies
  in place; a changed device set goes out as a new snapshot on the same stream; only a resource that
  appears or goes away registers anew or ends its stream.

Every daemon is tracked by PID and ended at teardown; waits are polls with deadlines.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BUILD, NODES, ROOT

sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
import kubelet_emu as ke  # noqa: E402

GPU = "nvidia.com/gpu"
KIND = "k8s.device-plugin.nvidia.com/gpu"
SPEC = "k8s.device-plugin.nvidia.com-gpu.json"
ASAN = "asan" in BUILD.name or "sanitize" in BUILD.name
T = 20.0 if ASAN else 10.0
FAST = "version: v1\nhealth:\n  probeInterval: 200ms\n  recoveryWindow: 1s\n"
CDI = "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [cdi-annotations, cdi-cri]\n"
# lost-gpu.yaml: GPU 5 is lost from the start.
LOST5 = "GPU-74d8b5b5-c59a-433a-80a6-3ce438d4fb99"


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MOCK_NVML", "GPUPLANE_", "DP_", "MIG_", "DEVICE_", "CONFIG_FILE",
                                "KUBELET_SOCKET", "PASS_DEVICE", "NVIDIA_", "CDI_", "FAIL_ON", "MPS_",
                                "SHARED_DEVICES", "IMEX_", "GDS_", "GDRCOPY_", "MOFED_", "DRIVER_ROOT",
                                "CONTAINER_DRIVER"))}
    if ASAN:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.update(extra)
    return env


class Daemon:
    """One `gpuplane device-plugin` with its emulator, config file and fault file."""

    def __init__(self, work, profile, config, args=()):
        self.work = work
        self.sockdir = work / "s"
        self.sockdir.mkdir()
        self.events = work / "events.jsonl"
        self.events.touch()
        self.config = work / "config.yaml"
        self.config.write_text(config)
        self.kubelet = ke.KubeletEmulator(self.sockdir, dial_timeout=5, grace_period=300)
        self.log_path = work / "daemon.log"
        self._log = open(self.log_path, "w")
        cmd = [str(BUILD / "gpuplane"), "device-plugin", "--mock", profile,
               "--kubelet-socket", str(self.sockdir / "kubelet.sock"), "--config-file", str(self.config),
               *map(str, args)]
        self.popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      env=clean_env({"MOCK_NVML_EVENTS": str(self.events)}))
        self.pid = self.popen.pid

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text, count=1, timeout=T):
        deadline = time.monotonic() + timeout
        while True:
            out = self.log()
            if out.count(text) >= count:
                return out
            if self.popen.poll() is not None:
                raise AssertionError(f"daemon exited ({self.popen.returncode}) before {text!r}:\n{out}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not logged {count}x in {timeout} s:\n{out[-4000:]}")
            time.sleep(0.02)

    def inject(self, **line):
        with open(self.events, "a") as f:
            f.write(json.dumps(line) + "\n")

    def reload(self, config=None):
        """Rewrites the config file (if given), sends SIGHUP and waits until it is applied."""
        n = self.log().count("SIGHUP: configuration applied")
        if config is not None:
            self.config.write_text(config)
        os.kill(self.pid, signal.SIGHUP)
        self.wait_log("SIGHUP: configuration applied", count=n + 1)

    def wait_registered(self, resource=GPU):
        try:
            self.kubelet.wait_registered(resource, timeout=T)
        except TimeoutError:
            raise AssertionError(f"{resource} not registered; daemon log:\n{self.log()}")

    def stop(self):
        """SIGTERM; the daemon must exit 0 by itself."""
        if self.popen.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        return self.popen.wait(timeout=T)

    def close(self):
        if self.popen.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait(5)
        self._log.close()
        self.kubelet.stop()


@pytest.fixture
def start():
    made, dirs = [], []

    def go(profile, config, args=(), driver_root=False):
        work = pathlib.Path(tempfile.mkdtemp(prefix="dpf-"))  # short: socket paths <= 107 bytes
        dirs.append(work)
        if driver_root:
            p = subprocess.run([str(ROOT / "mock-nvml" / "make-driver-root.sh"), str(NODES / f"{profile}.yaml"),
                                str(work / "root")], capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr
            args = ("--driver-root", work / "root", *args)
        d = Daemon(work, profile, config, args)
        made.append(d)
        d.wait_registered()
        return d

    yield go
    for d in made:
        d.close()
    for w in dirs:
        shutil.rmtree(w, ignore_errors=True)


def spec_devices(path):
    spec = json.loads(path.read_text())
    assert spec["kind"] == KIND
    return {d["name"] for d in spec["devices"]}


def resolve(names, devices):
    for name in names:
        kind, _, dev = name.partition("=")
        assert kind == KIND, name
        assert dev in devices, f"{name} is not in the spec ({sorted(devices)})"


@pytest.fixture
def cdi_daemon(start):
    """A DGX H100 plugin with CDI strategies writing into its own spec directory."""
    specs = pathlib.Path(tempfile.mkdtemp(prefix="dpf-cdi-"))
    yield start("dgx-h100", CDI, driver_root=True, args=("--cdi-spec-dir", specs)), specs
    shutil.rmtree(specs, ignore_errors=True)


def test_cdi_specs(cdi_daemon):
    d, specs = cdi_daemon
    # The emulator sees the Register before the daemon has logged the kubelet's answer.
    log = d.wait_log('"registered with the kubelet"')
    # Written before the first Register, as NVIDIA does.
    assert log.index('"CDI spec written"') < log.index('"registered with the kubelet"'), log
    path = specs / SPEC
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    devices = spec_devices(path)
    assert len(devices) == 9 and "all" in devices
    d.kubelet.allocate(GPU, 3, pod="uuid")
    resp = d.kubelet.last_allocate_response(GPU)
    assert len(resp["cdi_devices"]) == 3
    resolve(resp["cdi_devices"], devices)
    (value,) = resp["annotations"].values()
    resolve(value.split(","), devices)

    # SIGHUP with index ids: the spec is rewritten with the names Allocate now uses.
    d.reload(CDI + "    deviceIDStrategy: index\n")
    devices = spec_devices(path)
    assert {"0", "7", "all"} <= devices and not any(n.startswith("GPU-") for n in devices)
    d.kubelet.allocate(GPU, 2, pod="index")
    resp = d.kubelet.last_allocate_response(GPU)
    resolve(resp["cdi_devices"], devices)
    assert all(n.split("=")[1].isdigit() for n in resp["cdi_devices"])

    # SIGHUP without a CDI strategy: our spec goes, nothing else in the directory does.
    (specs / "other-vendor.json").write_text("{}")
    d.reload("version: v1\n")
    assert not path.exists()
    assert (specs / "other-vendor.json").exists()
    assert "NVIDIA_VISIBLE_DEVICES" in d.kubelet.allocate(GPU, 1, pod="envvar").response["envs"]

    # Back to CDI, then SIGTERM: NVIDIA's plugin leaves its specs; so do we.
    d.reload(CDI)
    assert path.exists()
    assert d.stop() == 0
    assert path.exists()
    assert '"cdi_specs"="kept"' in d.log() or 'cdi_specs="kept"' in d.log()


def test_lost_gpu_comes_back(start):
    d = start("lost-gpu", FAST)
    k = d.kubelet
    assert k.capacity(GPU) == 7
    assert LOST5 not in {x.id for x in k.devices(GPU)}
    mark = k.mark()
    registrations = k.registrations(GPU)
    d.inject(gpu=5, type="recover")
    # The periodic probe sees it answer; a rebuild sends it on the open stream.
    ev = k.wait_event("update", GPU, since=mark, predicate=lambda e: e.data["capacity"] == 8, timeout=T)
    assert ev.data["allocatable"] == 8
    dev = {x.id: x for x in k.devices(GPU)}[LOST5]
    assert dev.health == "Healthy"
    assert k.events("stream-end", GPU, since=mark) == []
    assert k.events("register", GPU, since=mark) == []
    assert k.registrations(GPU) == registrations
    assert "resources rebuilt" in d.wait_log("resources rebuilt")
    # It can be allocated (all 8 at once).
    a = k.allocate(GPU, 8, pod="all")
    assert LOST5 in a.device_ids
    # Health still works on the rebuilt state: an XID on the returned GPU reaches the same stream.
    k.free("all")
    mark = k.mark()
    d.inject(gpu=5, type="xid", xid=79)
    k.wait_event("update", GPU, since=mark, predicate=lambda e: e.data["allocatable"] == 7, timeout=T)
    assert {x.id: x for x in k.devices(GPU)}[LOST5].health == "Unhealthy"
    assert d.stop() == 0


SHARED2 = FAST + "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"


def test_sighup_keeps_streams(start):
    d = start("dgx-h100", FAST)
    k = d.kubelet
    mark = k.mark()
    registrations = k.registrations(GPU)

    # Unchanged: nothing visible to the kubelet.
    d.reload()
    # A non-resource setting: applied in place (Allocate now passes device specs).
    d.reload(FAST + "flags:\n  plugin:\n    passDeviceSpecs: true\n")
    a = k.allocate(GPU, 1, pod="specs")
    assert a.response["devices"], a.response
    k.free("specs")
    # The old stream still carries health changes.
    d.inject(gpu=3, type="xid", xid=79)
    k.wait_event("update", GPU, since=mark, predicate=lambda e: e.data["allocatable"] == 7, timeout=T)
    assert k.events("stream-end", GPU, since=mark) == []
    assert k.events("register", GPU, since=mark) == []

    # The device set changes (2 replicas per GPU), the name does not: a new snapshot on the same
    # stream; the unhealthy GPU stays unhealthy across the reload.
    d.reload(SHARED2)
    ev = k.wait_event("update", GPU, since=mark, predicate=lambda e: e.data["capacity"] == 16, timeout=T)
    assert ev.data["allocatable"] == 14
    assert k.events("stream-end", GPU, since=mark) == []
    assert k.registrations(GPU) == registrations

    # A renamed resource: nvidia.com/gpu.shared registers, nvidia.com/gpu's stream ends.
    mark = k.mark()
    d.reload(SHARED2.replace("timeSlicing:\n", "timeSlicing:\n    renameByDefault: true\n"))
    k.wait_registered("nvidia.com/gpu.shared", timeout=T)
    assert k.capacity("nvidia.com/gpu.shared") == 16
    k.wait_event("stream-end", GPU, since=mark, timeout=T)
    assert not (d.sockdir / "nvidia-gpu.sock").exists()
    assert d.stop() == 0
