# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` end to end: the binary under test against the kubelet emulator
(tools/kubelet-emulator) and the mock NVML library with a node profile.

The `plugin` fixture is a factory: `plugin(profile="dgx-h100", config=None, env=None, args=(),
wait=("nvidia.com/gpu",))` starts an emulator in a fresh short temp dir, then the daemon with
`--mock PROFILE --kubelet-socket DIR/kubelet.sock`, and waits for the listed resources to register.
Every daemon is remembered by PID and ended at teardown (SIGTERM, then SIGKILL); temp dirs are removed.
Waiting is always a poll with a deadline (`kubelet.wait_for`, `DevicePlugin.wait_log`).
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

import grpc
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build")).resolve()
NODES = ROOT / "examples" / "nodes"
TOOL = ROOT / "tools" / "kubelet-emulator"
sys.path.insert(0, str(TOOL))

import kubelet_emu as ke  # noqa: E402

pb, pb_grpc = ke.pb, ke.pb_grpc
GPU = "nvidia.com/gpu"
ASAN = "asan" in BUILD.name or "sanitize" in BUILD.name
# Deadlines: generous, they only bound a failure. The ASan build starts more slowly.
T = 20.0 if ASAN else 10.0

# dgx-h100.yaml: GPUs 0-3 on NUMA 0, 4-7 on NUMA 1.
H100 = ["GPU-15125529-e60f-498d-95ba-a8065d1c108c", "GPU-f5a894a0-c898-4741-b0b8-473ecea2200e",
        "GPU-45b05de2-bfa2-4c0f-a483-cf2ceb04c086", "GPU-a26430da-2b38-42ea-81f5-3a5231980d4e",
        "GPU-79783acb-65dd-4b40-be66-c03e1f6d9b7e", "GPU-9553cf30-feda-434a-bbf1-2f95baf872be",
        "GPU-10d66609-ddcb-4dbd-81e1-f4b0d3ce0c1e", "GPU-262a61d8-bd8b-475c-a4d0-14075f47dc64"]
H100_NUMA = [0, 0, 0, 0, 1, 1, 1, 1]
# pcie-t4.yaml: 0, 1 on NUMA 0; 2, 3 on NUMA 1.
T4 = ["GPU-2a098a0c-87c1-4b5f-9a0c-490acb2bac45", "GPU-558471e8-e27e-49e4-9739-26954f5c6e4a",
      "GPU-9b0c0554-d8f2-48ec-a13e-b91574b0f7ed", "GPU-e555d3b5-c053-45e7-b301-1f440b04e295"]
# a100-mig.yaml
A100 = ["GPU-59360ef0-80c3-4998-a34d-04782356ba66", "GPU-05103f9e-3b10-4118-b2dd-678da0f5330f",
        "GPU-8081facd-5d3c-49fb-8c78-80c20a9f564d", "GPU-4b61c9a8-f9d3-4474-ae4d-e98fe236b3e3"]
MIG0 = {"3g.20gb": "MIG-6129f8b4-2bcf-4087-a0c3-2cd8458057d6", "2g.10gb": "MIG-eea63077-a70f-460e-b318-14156cba9966",
        "1g.5gb-a": "MIG-ef6c445d-3bb2-47b0-bea4-b7e16699dd96", "1g.5gb-b": "MIG-d7e0f2c7-4329-4742-b88c-20a54f711b04"}
MIG1 = {"3g.20gb": "MIG-a15ba067-c684-4201-be49-b60dfeee5260", "1c.3g.20gb": "MIG-ce395b76-e454-45a5-bbc1-c61a2e663ea1",
        "2c.3g.20gb": "MIG-87a7c223-6f8c-4104-9824-8cb913487064"}
# lost-gpu.yaml: GPU 5 lost from the start.
LOST = ["GPU-828b2b62-2a70-4bcf-a5fc-c25ba131ee3f", "GPU-6f7a4a37-41f6-47b8-931c-6bd2eb0c2cd6",
        "GPU-56c6c7db-91bf-4420-9a32-5cb01efc37fa", "GPU-c1eaf228-bd39-4147-baee-242f6a16f27e",
        "GPU-083baef3-ec27-4190-b8c7-f6cd7462736b", "GPU-74d8b5b5-c59a-433a-80a6-3ce438d4fb99",
        "GPU-1f2b44b0-0c6b-42ad-8f6a-319926664516", "GPU-bde197a0-97ed-4f7e-aa16-fa1c9d758b85"]

# A health section that recovers quickly (tests of recovery and of anything that must not wait 60 s).
FAST_HEALTH = "version: v1\nhealth:\n  probeInterval: 200ms\n  recoveryWindow: 1s\n"


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
    # NVIDIA's variables must come from the test only.
    for k in [k for k in env if k.startswith(("DP_", "MIG_", "DEVICE_", "CONFIG_FILE", "KUBELET_SOCKET",
                                              "PASS_DEVICE", "NVIDIA_", "CDI_", "FAIL_ON", "MPS_",
                                              "SHARED_DEVICES", "IMEX_", "GDS_", "GDRCOPY_", "MOFED_",
                                              "DRIVER_ROOT", "CONTAINER_DRIVER"))]:
        del env[k]
    if ASAN:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.update(extra or {})
    return env


def driver_root(profile, directory):
    """A fake driver root built by mock-nvml/make-driver-root.sh from a profile."""
    p = subprocess.run([str(ROOT / "mock-nvml" / "make-driver-root.sh"), str(NODES / f"{profile}.yaml"),
                        str(directory)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return pathlib.Path(directory)


class DevicePlugin:
    """One `gpuplane device-plugin` process."""

    def __init__(self, binary, work, sockdir, profile, config, env, args, kubelet_socket=True):
        self.work = work
        self.dir = sockdir
        self.events = work / "events.jsonl"
        self.events.touch()
        self.log_path = work / f"daemon-{time.monotonic_ns()}.log"
        self.config_path = None
        cmd = [str(binary), "device-plugin"] + (["--mock", profile] if profile else [])
        if kubelet_socket:
            cmd += ["--kubelet-socket", str(sockdir / "kubelet.sock")]
        if config is not None:
            self.config_path = work / "config.yaml"
            self.config_path.write_text(config)
            cmd += ["--config-file", str(self.config_path)]
        cmd += [str(a) for a in args]
        self.cmd = cmd
        self.env = clean_env({"MOCK_NVML_EVENTS": str(self.events), **(env or {})})
        self._log = open(self.log_path, "w")
        self.popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      env=self.env)
        self.pid = self.popen.pid

    # ---- faults ---------------------------------------------------------------------------------

    def inject(self, gpu, type, **kw):
        """Appends one fault line (docs/mock-nvml.md) to the process's MOCK_NVML_EVENTS file."""
        with open(self.events, "a") as f:
            f.write(json.dumps({"gpu": gpu, "type": type, **kw}) + "\n")
        return time.monotonic()

    def xid(self, gpu, xid, **kw):
        return self.inject(gpu, "xid", xid=xid, **kw)

    # ---- process --------------------------------------------------------------------------------

    def signal(self, signo):
        os.kill(self.pid, signo)

    def alive(self):
        return self.popen.poll() is None

    def wait(self, timeout=T):
        return self.popen.wait(timeout=timeout)

    def stop(self, timeout=T):
        """SIGTERM and the exit status (the process must end by itself within the timeout)."""
        if self.alive():
            self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self):
        """Ends the process (SIGTERM, SIGKILL after 5 s). Returns a problem to report or None: a daemon
        that was running must stop with status 0, and no daemon may log a sanitizer report."""
        problem = None
        if self.alive():
            try:
                self.signal(signal.SIGTERM)
                if self.popen.wait(T) != 0:
                    problem = f"exit status {self.popen.returncode} after SIGTERM"
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
                problem = f"did not stop within {T} s of SIGTERM"
        self._log.close()
        out = self.log_path.read_text(errors="replace")
        if "ERROR: AddressSanitizer" in out or "ERROR: LeakSanitizer" in out or "runtime error:" in out:
            problem = "sanitizer report"
        return f"pid {self.pid}: {problem}:\n{out[-6000:]}" if problem else None

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text, timeout=T, count=1):
        """Waits until `text` occurs `count` times in the daemon's output; returns the output."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.log()
            if out.count(text) >= count:
                return out
            if not self.alive():
                raise AssertionError(f"daemon exited ({self.popen.returncode}) before logging {text!r}:\n{out}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not logged {count}x within {timeout} s:\n{out[-4000:]}")
            time.sleep(0.02)

    # ---- direct RPCs (what the kubelet would never send) -----------------------------------------

    def stub(self, resource=GPU):
        name = "nvidia-" + resource.split("/", 1)[1] + ".sock"
        ch = grpc.insecure_channel(f"unix:{self.dir / name}", options=[("grpc.default_authority", "localhost")])
        self._channels = getattr(self, "_channels", []) + [ch]
        return pb_grpc.DevicePluginStub(ch)

    def allocate(self, *containers, resource=GPU):
        """A raw Allocate with one container request per id list."""
        reqs = [pb.ContainerAllocateRequest(devices_ids=list(x)) for x in containers]
        return self.stub(resource).Allocate(pb.AllocateRequest(container_requests=reqs), timeout=T)

    def preferred(self, available, size, must=(), resource=GPU):
        req = pb.PreferredAllocationRequest(container_requests=[pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=list(available), must_include_deviceIDs=list(must), allocation_size=size)])
        resp = self.stub(resource).GetPreferredAllocation(req, timeout=T)
        return list(resp.container_responses[0].deviceIDs)

    def snapshot(self, resource=GPU):
        """{id: health} from the first message of a new ListAndWatch stream: the daemon's state now
        (unlike the emulator's view, not subject to the order in which streams of several resources
        deliver)."""
        stream = self.stub(resource).ListAndWatch(pb.Empty(), timeout=T)
        try:
            return {d.ID: d.health for d in next(stream).devices}
        finally:
            stream.cancel()

    def close_channels(self):
        for ch in getattr(self, "_channels", []):
            ch.close()


class Harness:
    def __init__(self, gp):
        self.gp = gp
        self.kubelets = []
        self.plugins = []
        self.dirs = []

    def workdir(self):
        d = pathlib.Path(tempfile.mkdtemp(prefix="dp-"))  # short: socket paths are limited to 107 bytes
        self.dirs.append(d)
        return d

    def kubelet(self, sockdir, **kw):
        kw.setdefault("dial_timeout", 5)
        k = ke.KubeletEmulator(sockdir, **kw)
        self.kubelets.append(k)
        return k

    def __call__(self, profile="dgx-h100", config=None, env=None, args=(), wait=(GPU,), kubelet=True,
                 kubelet_socket=True, grace_period=300, root=False):
        """Starts a daemon (and an emulator unless kubelet=False) and waits for `wait` to register.
        root=True: a fake driver root of the profile (--driver-root) and a private --cdi-spec-dir,
        as cdi-* strategies write CDI specs at start-up."""
        work = self.workdir()
        sockdir = work / "s"
        sockdir.mkdir()
        args = list(args)
        if root:
            args += ["--driver-root", driver_root(profile, work / "root"), "--cdi-spec-dir", work / "cdi"]
        k = self.kubelet(sockdir, grace_period=grace_period) if kubelet else None
        p = DevicePlugin(self.gp.binary, work, sockdir, profile, config, env, args, kubelet_socket)
        p.root, p.cdi_dir = (work / "root", work / "cdi") if root else (None, None)
        self.plugins.append(p)
        p.kubelet = k
        if k is not None:
            for r in wait:
                def ready():
                    if not p.alive():
                        return True
                    try:
                        return k.wait_registered(r, timeout=0)
                    except TimeoutError:
                        return False
                try:
                    k.wait_for(ready, timeout=T, what=f"registration of {r}")
                except TimeoutError:
                    pass
                if not p.alive() or not k.registered(r):
                    raise AssertionError(f"{r} not registered (daemon {'running' if p.alive() else 'exited'}); "
                                         f"resources {k.resources()}; daemon log:\n{p.log()}")
        return p

    def teardown(self):
        problems = []
        for p in self.plugins:
            p.close_channels()
            problems.append(p.kill())
        for k in self.kubelets:
            k.stop()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        problems = [x for x in problems if x]
        assert not problems, "\n".join(problems)


@pytest.fixture
def plugin(gp):
    h = Harness(gp)
    yield h
    h.teardown()


def snapshot(kubelet, resource=GPU):
    """{id: (health, numa)} of the emulator's view."""
    return {d.id: (d.health, d.numa) for d in kubelet.devices(resource)}


def rpc_error(fn, *a, **kw):
    with pytest.raises(grpc.RpcError) as err:
        fn(*a, **kw)
    return err.value
