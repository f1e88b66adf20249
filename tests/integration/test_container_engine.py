# SPDX-License-Identifier: Apache-2.0
"""A real container engine runs the CDI specs gpuplane writes: Debian's podman with runc starts a
busybox container with `--device <CDI name>` from

  (a) the node's spec (`gpuplane cdi generate`),
  (b) the names the device plugin's cdi-cri strategy puts into an AllocateResponse (through the
      kubelet emulator), resolved in the spec the plugin wrote at start-up,
  (c) the per-claim spec `gpuplane dra-driver` writes in NodePrepareResources,

and the test looks inside the container: the character devices it sees must be exactly the claimed
GPUs' /dev/nvidia<minor> plus the control nodes, with the host nodes' major:minor; the mount points
it has beyond a container without devices must be exactly the driver's libraries and tools, each the
very host file (same st_dev and st_ino); the spec's createContainer hooks must have run with the
spec's arguments; and a device no spec names must be refused by the engine. Everything runs on --mock
alone: the daemons make the simulated node's driver root for as long as they run, `cdi generate` a
lasting one (gpuplane-mock-<uid>-<profile> under its TMPDIR, here the test's work directory) that is
still there when the engine reads the spec; both hold character devices as root. One more run of
`cdi generate` is given an explicit --nvidia-driver-root (a tree from make-driver-root.sh), the way
a real node's containerised driver is named.

The engine is isolated from the host (docs/testing.md explains each flag): storage, run root and
temporary files in a temp dir; podman runs in a private mount namespace where the temp dir is
bound over /run (so /var/run/cdi is a directory the test fills, runc's state stays inside) and
/dev/shm is a fresh tmpfs (podman's lock file). Podman 4.3 reads CDI specs only from /etc/cdi and
/var/run/cdi, and this way neither host directory is touched. Needs root (mknod, mounts) and podman
that can start a container; otherwise the tests skip, saying why.
"""
import json
import os
import pathlib
import re
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import uuid

import pytest
import yaml

from conftest import NODES, ROOT
from dp_harness import GPU, plugin  # noqa: F401
from test_dra_driver import T, Driver, devices_of, short_dir

PROFILE = "dgx-h100"
LIBDIR = "usr/lib/x86_64-linux-gnu"
CONTROL = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"]
# The driver's tools a spec mounts when the root has them (docs/cdi.md).
TOOLS = ["nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
         "nvidia-cuda-mps-server", "nvidia-imex", "nvidia-imex-ctl"]
# NVIDIA's character major; nvidia-uvm and nvidia-caps get dynamic majors on a real node, any
# unused number stands in for them here.
NVIDIA_MAJOR = 195
FIXED_MINORS = {"nvidiactl": 255, "nvidia-modeset": 254}
DYNAMIC_MAJORS = {"nvidia-uvm": 511, "nvidia-uvm-tools": 511, "nvidia-caps": 510}
PODMAN_TIMEOUT = 60

# Run inside the container by busybox sh: every character device under /dev with its major and
# minor (hex), every mount point, and the device and inode of each path given as an argument.
PROBE = r"""
bb=/bin/busybox
echo '== devices'
$bb find /dev -type c | while read -r f; do $bb stat -c '%n %t %T' "$f"; done
echo '== mounts'
$bb cut -d ' ' -f 5 /proc/self/mountinfo
echo '== files'
for f in "$@"; do $bb stat -c '%n %d %i' "$f" 2>/dev/null || echo "$f missing"; done
echo '== env'
$bb env
"""

# The hook the specs name: records its arguments (argv[0] is the hook's name in the spec) and
# takes the container state runc writes on its stdin.
HOOK = """#!/bin/sh
echo "$*" >> '{log}'
cat > /dev/null
exit 0
"""

# Runs podman in the private mount namespace `unshare` made: $1 the run dir, $2 the CDI spec dir.
WRAPPER = """set -e
run=$1 specs=$2 empty=$3
shift 3
mount -n --bind "$run" /run
mount -n --bind "$specs" /run/cdi
if [ -d /etc/cdi ]; then mount -n --bind "$empty" /etc/cdi; fi
mount -n -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm
exec podman "$@"
"""


class Seen:
    """What a container saw: {path: (major, minor)}, the set of mount points, {path: (dev, ino)}
    (None when missing), the environment."""

    def __init__(self, out):
        sections = {}
        name = None
        for line in out.splitlines():
            if line.startswith("== "):
                name = line[3:]
                sections[name] = []
            elif name:
                sections[name].append(line)
        assert set(sections) == {"devices", "mounts", "files", "env"}, out
        self.devices = {}
        for line in sections["devices"]:
            path, major, minor = line.split()
            self.devices[path] = (int(major, 16), int(minor, 16))
        self.mounts = set(sections["mounts"])
        self.files = {}
        for line in sections["files"]:
            parts = line.split()
            self.files[parts[0]] = None if parts[1] == "missing" else (int(parts[1]), int(parts[2]))
        self.env = dict(line.split("=", 1) for line in sections["env"] if "=" in line)


class Engine:
    """podman + runc on private storage under `work`; one container per run()."""

    def __init__(self, work):
        self.work = work
        self.run_dir = work / "run"
        (self.run_dir / "cdi").mkdir(parents=True)
        self.empty = work / "empty"
        self.empty.mkdir()
        self.busybox = shutil.which("busybox", path="/bin:/usr/bin")
        self.hook = work / "nvidia-cdi-hook"
        self.hook_log = work / "hook.log"
        self.hook.write_text(HOOK.format(log=self.hook_log))
        self.hook.chmod(0o755)
        self.conf = work / "containers.conf"
        self.conf.write_text(f"""[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
events_logfile_path = "{work}/tmp/events.log"
tmp_dir = "{work}/tmp"
[network]
network_config_dir = "{work}/net"
""")
        self.runs = 0
        self.baseline = None

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTAINERS_", "CONTAINER_"))}
        env["CONTAINERS_CONF"] = str(self.conf)
        return env

    def rootfs(self):
        """A fresh root file system for each container: runc leaves the mount points it creates
        (empty files for bind-mounted libraries) behind, which must not leak into the next run."""
        self.runs += 1
        root = self.work / f"rootfs-{self.runs}"
        (root / "bin").mkdir(parents=True)
        shutil.copy2(self.busybox, root / "bin" / "busybox")
        return root

    def run(self, specs, devices=(), files=(), timeout=PODMAN_TIMEOUT):
        """Runs the probe in a container given `devices` (CDI names) with the CDI specs of the
        directory `specs` in /var/run/cdi. Returns the CompletedProcess."""
        self.hook_log.write_text("")
        root = self.rootfs()
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", WRAPPER, "wrapper",
               str(self.run_dir), str(specs), str(self.empty),
               "--root", str(self.work / "storage"), "--runroot", str(self.work / "runroot"),
               "--storage-driver", "vfs",
               "run", "--rm", "--network", "none",
               "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
        for d in devices:
            cmd += ["--device", d]
        cmd += ["--rootfs", str(root), "/bin/busybox", "sh", "-c", PROBE, "probe", *files]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env())
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def see(self, specs, devices, files=()):
        p = self.run(specs, devices, files)
        assert p.returncode == 0, f"podman failed ({p.returncode}) for {list(devices)}:\n{p.stderr}"
        return Seen(p.stdout)

    def hooks(self):
        return [line.split() for line in self.hook_log.read_text().splitlines()]


def dynamically_linked(path):
    """True when the ELF file has a program interpreter (PT_INTERP): it needs libraries the
    container's root does not have."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # a 64-bit ELF file
            return True
        end = "<" if head[5] == 1 else ">"
        phoff, = struct.unpack_from(end + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return any(struct.unpack_from(end + "I", table, i * phentsize)[0] == 3 for i in range(phnum))


def skip_reason():
    """Why podman cannot run containers here, or None."""
    if os.geteuid() != 0:
        return "needs root: device nodes made with mknod, mounts in a private namespace, podman as root"
    for tool in ("podman", "runc", "unshare", "busybox"):
        if not shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"):
            return f"{tool} is not installed (scripts/install-deps.sh installs podman, runc, busybox-static)"
    if dynamically_linked(shutil.which("busybox", path="/bin:/usr/bin")):
        return "busybox is not a static binary (install busybox-static)"
    return None


@pytest.fixture(scope="module")
def engine():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    work = pathlib.Path(tempfile.mkdtemp(prefix="gp-podman-"))
    try:
        e = Engine(work)
        p = e.run(e.empty)
        if p.returncode != 0:
            pytest.skip(f"podman cannot run a container here (exit {p.returncode}): {p.stderr.strip()[-600:]}")
        e.baseline = Seen(p.stdout)
        assert not any("nvidia" in d for d in e.baseline.devices), e.baseline.devices
        yield e
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- the driver root ----


def make_device_nodes(root):
    """Replaces the placeholder files make-driver-root.sh leaves under dev/ by character devices
    (the engine injects only those): /dev/nvidia<N> is 195:N, nvidiactl 195:255, nvidia-modeset
    195:254, nvidia-uvm(-tools) and nvidia-caps/nvidia-cap<N> other majors."""
    dev = root / "dev"
    for path in sorted(dev.rglob("*")):
        if not path.is_file():
            continue
        name = path.name
        if name in FIXED_MINORS:
            major, minor = NVIDIA_MAJOR, FIXED_MINORS[name]
        elif name == "nvidia-uvm":
            major, minor = DYNAMIC_MAJORS[name], 0
        elif name == "nvidia-uvm-tools":
            major, minor = DYNAMIC_MAJORS[name], 1
        elif name.startswith("nvidia-cap"):
            major, minor = DYNAMIC_MAJORS["nvidia-caps"], int(name[len("nvidia-cap"):])
        elif name.startswith("nvidia") and name[len("nvidia"):].isdigit():
            major, minor = NVIDIA_MAJOR, int(name[len("nvidia"):])
        else:
            continue
        path.unlink()
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def make_driver_root(engine, profile):
    """A driver root of the profile (mock-nvml/make-driver-root.sh) with real device nodes."""
    root = engine.work / f"driver-root-{profile}"
    p = subprocess.run([str(ROOT / "mock-nvml" / "make-driver-root.sh"), str(NODES / f"{profile}.yaml"),
                        str(root)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    make_device_nodes(root)
    return root


@pytest.fixture(scope="module")
def info(gp):
    """`gpuplane info --json` of a profile, as NVML reports it."""
    cache = {}

    def get(profile=PROFILE):
        if profile not in cache:
            cache[profile] = gp.json("info", "--mock", profile, "--json")
        return cache[profile]
    return get


def minors_of(info, ids):
    """The minors of GPUs named by UUID or index."""
    return sorted(g["minor"] for g in info["gpus"] if g["uuid"] in ids or g["index"] in ids)


def mock_root(log):
    """The driver root a daemon made for --mock, from its log; it must hold character devices."""
    m = re.search(r'"the simulated node\'s driver root" path="([^"]+)" made="?true"? device_nodes="([^"]+)"', log)
    assert m, log[-3000:]
    assert m.group(2) == "character devices", m.group(0)
    return pathlib.Path(m.group(1))


# ---- what the container must see ----


def driver_files(root, version):
    """The container paths the driver root's files must be mounted at, worked out from the root
    itself rather than from the spec: every regular lib*.so.<version> in the library directory and
    the driver's tools in usr/bin."""
    out = {}
    for f in sorted((root / LIBDIR).iterdir()):
        if f.name.startswith("lib") and f.name.endswith(f".so.{version}") and f.is_file() and not f.is_symlink():
            out[f"/{LIBDIR}/{f.name}"] = f
    for tool in TOOLS:
        f = root / "usr" / "bin" / tool
        if f.is_file() and not f.is_symlink():
            out[f"/usr/bin/{tool}"] = f
    return out


def mig_caps(root, minor, gi, ci):
    """The capability nodes of MIG device (gi, ci) of GPU `minor`, from the driver's mig-minors."""
    minors = dict(line.split() for line in (root / "proc/driver/nvidia-caps/mig-minors").read_text().splitlines())
    return [f"nvidia-caps/nvidia-cap{minors[f'gpu{minor}/gi{gi}/access']}",
            f"nvidia-caps/nvidia-cap{minors[f'gpu{minor}/gi{gi}/ci{ci}/access']}"]


def look(engine, specs, devices, root, version, minors, extra_nodes=()):
    """Runs a container given `devices` and checks that it saw exactly the GPUs of `minors` (plus
    `extra_nodes`, paths under dev/), the control nodes and the driver's files of `root`."""
    files = driver_files(root, version)
    seen = engine.see(specs, devices, files=files)
    nodes = [f"nvidia{m}" for m in minors] + CONTROL + list(extra_nodes)
    expected = {}
    for node in nodes:
        rdev = os.stat(root / "dev" / node).st_rdev
        expected[f"/dev/{node}"] = (os.major(rdev), os.minor(rdev))
    for m in minors:
        assert expected[f"/dev/nvidia{m}"] == (NVIDIA_MAJOR, m)
    seen_extra = {p: v for p, v in seen.devices.items() if p not in engine.baseline.devices}
    assert seen_extra == expected

    assert len(files) >= 6, files
    assert seen.mounts - engine.baseline.mounts == set(files)
    for path, host in files.items():
        st = os.stat(host)
        assert seen.files[path] == (st.st_dev, st.st_ino), f"{path} is not a bind mount of {host}"
    assert seen.env.get("NVIDIA_VISIBLE_DEVICES") == "void"


def check_hooks(engine, spec):
    """The createContainer hooks ran, in the spec's order with the spec's arguments."""
    hooks = [h for h in spec["containerEdits"]["hooks"] if h["hookName"] == "createContainer"]
    assert hooks and all(h["path"] == str(engine.hook) for h in hooks)
    assert engine.hooks() == [h["args"][1:] for h in hooks]


def refused(engine, specs, name):
    p = engine.run(specs, [name])
    assert p.returncode != 0, p.stdout
    assert "unresolvable CDI devices" in p.stderr and name in p.stderr, p.stderr


# ---- (a) gpuplane cdi generate ----
#
# With --mock alone, `cdi generate` names the simulated node's lasting driver root, which outlives
# the command: the engine runs the spec after gpuplane has exited. TMPDIR is the engine's work
# directory, so the root goes with it.


def generate(gp, engine, profile, root=None):
    """The spec of `cdi generate --mock profile` (with --nvidia-driver-root root when given) and the
    driver root it names: (spec dir, spec, root)."""
    specs = engine.work / f"specs-{profile}{'-explicit' if root else ''}"
    args = ["--nvidia-driver-root", root] if root else []
    p = gp.run("cdi", "generate", "--mock", profile, *args, "--nvidia-cdi-hook-path", engine.hook,
               "--output", specs, env={"TMPDIR": str(engine.work)})
    assert p.returncode == 0, p.stderr
    if not root:
        root = engine.work / f"gpuplane-mock-{os.geteuid()}-{profile}"
        assert f"driver root {root}, which stays" in p.stderr, p.stderr
    return specs, json.loads((specs / "nvidia.com-gpu.json").read_text()), root


@pytest.fixture(scope="module")
def node_spec(gp, engine):
    return generate(gp, engine, PROFILE)


def test_cdi_generate_one_gpu_by_index(engine, node_spec, info):
    specs, spec, root = node_spec
    look(engine, specs, ["nvidia.com/gpu=3"], root, info()["driverVersion"], [3])
    check_hooks(engine, spec)


def test_cdi_generate_gpus_by_uuid_and_index(engine, node_spec, info):
    specs, _, root = node_spec
    gpu5 = next(g for g in info()["gpus"] if g["index"] == 5)
    look(engine, specs, [f"nvidia.com/gpu={gpu5['uuid']}", "nvidia.com/gpu=0"], root,
         info()["driverVersion"], minors_of(info(), [0, 5]))


def test_cdi_generate_all(engine, node_spec, info):
    specs, _, root = node_spec
    look(engine, specs, ["nvidia.com/gpu=all"], root, info()["driverVersion"],
         [g["minor"] for g in info()["gpus"]])


def test_cdi_generate_twice_reuses_the_root(gp, engine, node_spec, info):
    """A second run names the same root, which is still whole: the first spec keeps working."""
    specs, spec, root = node_spec
    again, spec2, root2 = generate(gp, engine, PROFILE)
    assert root2 == root and spec2 == spec
    look(engine, specs, ["nvidia.com/gpu=1"], root, info()["driverVersion"], [1])


def test_cdi_generate_explicit_root(gp, engine, info):
    """An explicit --nvidia-driver-root wins: the engine uses that tree's nodes and files."""
    specs, spec, root = generate(gp, engine, PROFILE, make_driver_root(engine, PROFILE))
    assert all(n["hostPath"].startswith(f"{root}/") for n in spec["containerEdits"]["deviceNodes"])
    look(engine, specs, ["nvidia.com/gpu=2"], root, info()["driverVersion"], [2])


def test_cdi_generate_mig_device(gp, engine, info):
    specs, _, root = generate(gp, engine, "a100-mig")
    gpu = info("a100-mig")["gpus"][1]
    mig = next(m for m in gpu["migDevices"] if m["ciId"] != 0)  # a compute instance, not a whole GI
    look(engine, specs, [f"nvidia.com/gpu={mig['uuid']}"], root, info("a100-mig")["driverVersion"],
         [gpu["minor"]], mig_caps(root, gpu["minor"], mig["giId"], mig["ciId"]))


def test_cdi_generate_unknown_device_is_refused(engine, node_spec):
    specs, _, _ = node_spec
    refused(engine, specs, "nvidia.com/gpu=8")
    refused(engine, specs, "nvidia.com/gpu=GPU-00000000-0000-0000-0000-000000000000")


# ---- (b) the device plugin, cdi-cri, on --mock alone ----


def test_device_plugin_cdi_cri(engine, plugin, info):  # noqa: F811
    specs = engine.work / "dp-specs"
    p = plugin(PROFILE, args=["--device-list-strategy=cdi-cri", "--cdi-spec-dir", specs,
                              "--nvidia-cdi-hook-path", engine.hook])
    root = mock_root(p.log())
    a = p.kubelet.allocate(GPU, 2, pod="engine")
    names = a.response["cdi_devices"]
    assert names == [f"k8s.device-plugin.nvidia.com/gpu={i}" for i in a.device_ids]
    look(engine, specs, names, root, info()["driverVersion"], minors_of(info(), a.device_ids))
    check_hooks(engine, json.loads((specs / "k8s.device-plugin.nvidia.com-gpu.json").read_text()))
    refused(engine, specs, "k8s.device-plugin.nvidia.com/gpu=GPU-00000000-0000-0000-0000-000000000000")
    assert p.stop() == 0
    assert not root.exists(), "the simulated node's driver root outlived the plugin"


# ---- (c) the DRA driver, a per-claim spec, on --mock alone ----


def test_dra_claim_spec(gp, fakekube, engine, info):
    work = short_dir()
    node = Driver(gp, fakekube, work, None, PROFILE)  # no --nvidia-driver-root: --mock's own
    try:
        node.start(args=["--nvidia-cdi-hook-path", str(engine.hook)])
        root = mock_root(node.log())
        node.wait_slices()
        claim = node.claim("engine", count=2,
                           selector="device.attributes['gpu.nvidia.com'].index in [2, 6]")
        uid = claim["metadata"]["uid"]
        assert sorted(devices_of(claim)) == ["gpu-2", "gpu-6"]
        r = node.prepare(claim)
        assert r.ok, r.errors
        names = r.cdi_ids(uid)
        assert sorted(names) == [f"k8s.gpu.nvidia.com/claim={uid}-gpu-{i}" for i in (2, 6)]
        look(engine, node.cdi, names, root, info()["driverVersion"], minors_of(info(), [2, 6]))
        check_hooks(engine, yaml.safe_load(node.spec_path(uid).read_text()))
        # A device of the claim's kind the claim does not hold, and a claim never prepared.
        refused(engine, node.cdi, f"k8s.gpu.nvidia.com/claim={uid}-gpu-3")
        refused(engine, node.cdi, f"k8s.gpu.nvidia.com/claim={uuid.uuid4()}-gpu-2")
        # Unprepared, the claim's devices are gone for the engine too.
        assert node.unprepare(claim).ok
        refused(engine, node.cdi, names[0])
        assert node.stop() == 0
        assert not root.exists(), "the simulated node's driver root outlived the driver"
    finally:
        # SIGTERM first, so that the driver removes its root even when the test failed.
        if node.proc and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGTERM)
            try:
                node.proc.wait(T)
            except subprocess.TimeoutExpired:
                pass
        node.close()
        shutil.rmtree(work, ignore_errors=True)
