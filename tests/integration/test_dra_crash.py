# SPDX-License-Identifier: Apache-2.0
"""Crash safety of `gpuplane dra-driver`: the driver is killed (SIGKILL, through the fault points
GPUPLANE_DRA_FAULT arms) in the middle of NodePrepareResources / NodeUnprepareResources, restarted,
and the interrupted call retried, as the kubelet would. Every run must converge:

* every prepared claim has exactly one CDI spec, valid, with exactly its devices; unprepared
  claims have none; nothing else is left in the CDI root or the driver's directory;
* the checkpoint is valid JSON with a correct checksum and this boot's ID, and agrees with the
  CDI specs (same claims, all PrepareCompleted, same devices and CDI IDs);
* a repeated prepare (also after a clean restart) gives the same answer as the first;
* no device node appears in the specs of two claims.

The fault points come from `gpuplane dra-driver --list-fault-points`. Each one gets a fixed
scenario; then randomized runs (random claims, random sequences of prepare/unprepare calls, a
random fault point armed, sometimes re-armed after a crash) run on two simulated nodes at once.
Runs are seeded: a failure names its seed, and GPUPLANE_CRASH_SEED=<seed> GPUPLANE_CRASH_RUNS=1
replays exactly that run. The kubelet side is tools/kubelet-emulator/dra_emu.py, the API server
fakekube.py.
"""
import concurrent.futures
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import zlib

import pytest
import yaml

from conftest import BUILD, NODES, ROOT

sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
import dra_emu  # noqa: E402
from test_cdi import check_strict, validator  # noqa: E402

BINARY = BUILD / "gpuplane"
FAULT_ENV = "GPUPLANE_DRA_FAULT"
DRIVER = "gpu.nvidia.com"
PROFILE = "dgx-h100"  # 8 GPUs: gpu-0 .. gpu-7, /dev/nvidia0 .. /dev/nvidia7
GPUS = [f"gpu-{i}" for i in range(8)]
CDI_KIND = "k8s.gpu.nvidia.com/claim"
NAMESPACE = "crash"
CHECKPOINT = "checkpoint.json"
RANDOM_RUNS = int(os.environ.get("GPUPLANE_CRASH_RUNS", "200"))
BASE_SEED = int(os.environ.get("GPUPLANE_CRASH_SEED", "20261122"))
WORKERS = 2  # simulated nodes running randomized runs at once
MAX_CRASHES = 4  # per call; then the driver is restarted without a fault
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _fault_points():
    """(points, None), or (None, why) when the tests cannot know them."""
    if not BINARY.exists():
        return None, f"{BINARY} is not built"
    p = subprocess.run([str(BINARY), "dra-driver", "--list-fault-points"], capture_output=True,
                       text=True, timeout=30, env=_env())
    if p.returncode != 0:
        return None, f"`gpuplane dra-driver --list-fault-points` failed ({p.returncode}): {p.stderr.strip()}"
    return [line for line in p.stdout.splitlines() if line.strip()], None


def _env(fault=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MOCK_NVML", "GPUPLANE_", "KUBERNETES_"))}
    if fault:
        env[FAULT_ENV] = fault
    return env


FAULT_POINTS, PROBLEM = _fault_points()
if FAULT_POINTS is None and PROBLEM and ("unknown command" in PROBLEM or "unrecognized option" in PROBLEM
                                         or "unknown option" in PROBLEM):
    pytest.skip(f"the driver has no fault points yet: {PROBLEM}", allow_module_level=True)


def fault_points():
    if FAULT_POINTS is None:
        pytest.fail(PROBLEM, pytrace=False)
    return FAULT_POINTS


# ---------------------------------------------------------------------------------------------------
# A node: the driver under test, its directories and its kubelet


class DriverDied(Exception):
    pass


class Node:
    """One simulated node: a driver process (restartable), its directories, a kubelet emulator
    watching its registrar directory."""

    def __init__(self, base, name, fk, driver_root):
        self.base = pathlib.Path(base)
        self.name = name
        self.fk = fk
        self.driver_root = driver_root
        self.registrar = self.base / "reg"
        self.registrar.mkdir(parents=True, exist_ok=True)
        self.kubelet = dra_emu.DraKubelet(self.registrar, poll_interval=0.02, dial_timeout=2,
                                          call_timeout=20)
        self.proc = None
        self.fault = None
        self.starts = 0
        self.crashes = []  # fault points that fired
        self.run_dir = None
        self.fresh()

    def fresh(self):
        """New, empty plugins and CDI directories (a new run)."""
        if self.run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir = pathlib.Path(tempfile.mkdtemp(prefix="run-", dir=self.base))
        self.plugins = self.run_dir / "plugins"
        self.cdi = self.run_dir / "cdi"
        self.plugins.mkdir()
        self.cdi.mkdir()
        self.plugin_dir = self.plugins / DRIVER
        self.reg_socket = self.registrar / f"{DRIVER}-reg.sock"

    @property
    def log(self):
        return self.run_dir / f"driver-{self.starts}.log"

    def log_tail(self, n=4000):
        out = []
        for i in range(1, self.starts + 1):
            p = self.run_dir / f"driver-{i}.log"
            if p.exists():
                out.append(f"--- start {i} ---\n" + p.read_text(errors="replace")[-n:])
        return "\n".join(out)

    def start(self, fault=None, timeout=15):
        assert self.proc is None
        self.starts += 1
        self.fault = fault
        stale = self.kubelet.file_key(self.reg_socket)  # what a killed driver left behind
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(BINARY), "dra-driver", "--node-name", self.name, "--driver-name", DRIVER,
                 "--kubelet-registrar-directory-path", str(self.registrar),
                 "--kubelet-plugins-directory-path", str(self.plugins), "--cdi-root", str(self.cdi),
                 "--kubeconfig", str(self.fk.kubeconfig), "--mock", PROFILE,
                 "--nvidia-driver-root", str(self.driver_root),
                 "--kube-api-qps", "1000", "--kube-api-burst", "1000"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(fault))

        # Registered means: the kubelet accepted the socket file this process made (a stale
        # file from a killed one has another inode or ctime).
        def registered():
            if self.proc.poll() is not None:
                raise DriverDied(f"the driver exited with {self.proc.returncode} while starting")
            key = self.kubelet.file_key(self.reg_socket)
            reg = self.kubelet.registered(DRIVER)
            if not key or key == stale or not reg or reg.file_key != key or not reg.current:
                return None
            return reg
        return self.kubelet.wait_for(registered, timeout, what=f"registration of the driver on {self.name}")

    def reap(self, timeout=5.0):
        """Waits up to timeout for the process to end; its status, or None while it runs."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self):
        """SIGTERM, as at a node drain; SIGKILL if it does not end in 10 s (a failure)."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        status = self.reap(10)
        if status is None:
            self.kill()
            raise AssertionError("the driver did not stop within 10 s of SIGTERM")
        self.proc = None
        return status

    def close(self):
        self.kill()
        self.kubelet.stop()

    # ---- calls, with crash handling ---------------------------------------------------------------

    def call(self, method, claims, rearm=None):
        """Makes a prepare/unprepare call; when the driver dies (a fault point) it is restarted and
        the call retried until it succeeds. rearm(n) -> fault point or None for the n-th restart.
        Returns (CallResult, crashes during this call)."""
        crashes = 0
        while True:
            fn = self.kubelet.prepare if method == "prepare" else self.kubelet.unprepare
            result = fn(DRIVER, [(c.ns, c.name, c.uid) for c in claims])
            if result.ok:
                if self.proc.poll() is not None:
                    raise AssertionError(f"the driver died ({self.proc.returncode}) although it "
                                         f"answered {method}")
                return result, crashes
            status = self.reap(5)
            if status is None:
                raise AssertionError(f"{method} failed without a crash: {result.errors}")
            if status != -signal.SIGKILL or not self.fault:
                raise AssertionError(f"the driver exited with {status} (armed: {self.fault}) during "
                                     f"{method}: {result.errors}")
            self.crashes.append(self.fault)
            crashes += 1
            self.proc = None
            check_crash_state(self)
            fault = rearm(crashes) if rearm and crashes < MAX_CRASHES else None
            self.start(fault)


# ---------------------------------------------------------------------------------------------------
# Claims and the model of what should be prepared


class Claim:
    def __init__(self, rng, name, devices):
        self.ns = NAMESPACE
        self.name = name
        self.uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        # One request per device, "r0", "r1", ...: the answer must map each device to its request.
        self.results = [(f"r{i}", dev) for i, dev in enumerate(devices)]

    def devices(self):
        return sorted(dev for _, dev in self.results)

    def obj(self, node):
        return {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": self.name, "namespace": self.ns, "uid": self.uid},
            "spec": {"devices": {"requests": [
                {"name": req, "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                for req, _ in self.results]}},
            "status": {
                "allocation": {"devices": {"results": [
                    {"request": req, "driver": DRIVER, "pool": node, "device": dev}
                    for req, dev in self.results]}},
                "reservedFor": [{"resource": "pods", "name": f"pod-{self.name}",
                                 "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, self.uid))}]},
        }

    def expected_answer(self, node):
        """The devices a correct driver answers, in a comparable form."""
        return sorted((dev, (req,), node, (f"{CDI_KIND}={self.uid}-{dev}",)) for req, dev in self.results)


def answer_of(result, uid):
    return sorted((d["device_name"], tuple(d["request_names"]), d["pool_name"],
                   tuple(d["cdi_device_ids"])) for d in result.claims[uid].devices)


def make_claims(rng, node, fk, prefix, count):
    """count claims with disjoint random sets of 1-2 GPUs, stored in the API server."""
    pool = list(GPUS)
    rng.shuffle(pool)
    claims = []
    for i in range(count):
        n = rng.choice([1, 1, 2])
        devices, pool = pool[:n], pool[n:]
        c = Claim(rng, f"{prefix}-{i}", devices)
        fk.put(c.obj(node.name))
        claims.append(c)
    return claims


# ---------------------------------------------------------------------------------------------------
# Convergence


def spec_name(uid):
    return f"k8s.gpu.nvidia.com-claim_{uid}.yaml"


def boot_id():
    return pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def checkpoint_claims(node):
    """The checkpoint's claims after checking the file itself (JSON, version, checksum, boot ID)."""
    path = node.plugin_dir / CHECKPOINT
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    assert doc.get("version") == 1, doc
    rest = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert doc.get("checksum") == zlib.crc32(text.encode()), "checkpoint checksum mismatch"
    assert doc.get("nodeBootID") == boot_id()
    return doc["preparedClaims"]


def check_crash_state(node):
    """What a killed driver leaves must be whole: the checkpoint (if any) intact, every spec file
    complete, and every spec covered by a checkpoint entry (PrepareStarted or PrepareCompleted), so
    that the restarted driver knows to keep or roll it back."""
    try:
        cp = checkpoint_claims(node)
    except (ValueError, AssertionError) as e:
        raise AssertionError(f"after a crash at {node.fault}: the checkpoint is damaged: {e}") from e
    for name in os.listdir(node.cdi):
        if name.startswith("."):
            continue  # a temporary file; convergence requires it gone after the restart
        spec = yaml.load((node.cdi / name).read_text(), Loader=LOADER)
        assert isinstance(spec, dict) and spec.get("kind") == CDI_KIND, f"a torn spec {name}"
        uid = name[len("k8s.gpu.nvidia.com-claim_"):-len(".yaml")]
        assert uid in cp, f"after a crash at {node.fault}: spec {name} without a checkpoint entry"


def check_converged(node, prepared, claims, full=True):
    """prepared: {uid: Claim} the model says are prepared; claims: every claim of the run."""
    by_uid = {c.uid: c for c in claims}
    # CDI root: exactly one spec per prepared claim, nothing else (no temporary files).
    want = {spec_name(u) for u in prepared}
    have = set(os.listdir(node.cdi))
    assert not want - have, f"prepared claims without a CDI spec: {sorted(want - have)}"
    assert not have - want, (f"left behind in the CDI root: {sorted(have - want)} (specs of claims "
                             f"not prepared, or temporary files of a write a crash interrupted)")
    # The driver's directory: the checkpoint and the socket, nothing torn or moved aside.
    extra = set(os.listdir(node.plugin_dir)) - {CHECKPOINT, "dra.sock"}
    assert not extra, (f"left behind in {node.plugin_dir.name}/: {sorted(extra)} (temporary files "
                       f"of a write a crash interrupted, or a checkpoint moved aside)")
    cp = checkpoint_claims(node)
    assert sorted(cp) == sorted(prepared), f"checkpoint claims {sorted(cp)} != prepared {sorted(prepared)}"
    owners = {}
    for uid, entry in cp.items():
        c = by_uid[uid]
        assert entry["state"] == "PrepareCompleted", (uid, entry["state"])
        assert (entry["namespace"], entry["name"]) == (c.ns, c.name)
        assert sorted((d["deviceName"], tuple(d["requests"]), d["poolName"], tuple(d["cdiDeviceIDs"]))
                      for d in entry["devices"]) == c.expected_answer(node.name)
        if not full:
            continue
        spec = yaml.load((node.cdi / spec_name(uid)).read_text(), Loader=LOADER)
        validator().validate(spec)
        check_strict(spec)
        assert spec["kind"] == CDI_KIND
        names = sorted(d["name"] for d in spec["devices"])
        assert names == sorted(f"{uid}-{dev}" for dev in c.devices())
        ids = sorted(i for d in entry["devices"] for i in d["cdiDeviceIDs"])
        assert ids == sorted(f"{CDI_KIND}={n}" for n in names), "checkpoint and CDI spec disagree"
        for d in spec["devices"]:
            dev = d["name"][len(uid) + 1:]
            nodes = [n["path"] for n in d["containerEdits"].get("deviceNodes", [])]
            assert nodes == [f"/dev/nvidia{dev.split('-')[1]}"], (d["name"], nodes)
            for n in nodes:
                assert owners.setdefault(n, uid) == uid, f"{n} in the specs of {owners[n]} and {uid}"


def check_same_answers(node, prepared, answers):
    """Every prepared claim, prepared again, gets the answer it got first."""
    if not prepared:
        return
    claims = list(prepared.values())
    result, _ = node.call("prepare", claims)
    for c in claims:
        assert answer_of(result, c.uid) == answers[c.uid], f"claim {c.name}: a different answer"


# ---------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def driver_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("driver-root") / "root"
    subprocess.run([str(ROOT / "mock-nvml" / "make-driver-root.sh"), str(NODES / f"{PROFILE}.yaml"),
                    str(root)], check=True, capture_output=True)
    return root


@pytest.fixture
def short_dir():
    d = tempfile.mkdtemp(prefix="dcr-")  # short: unix socket paths are limited to 107 bytes
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def nodes(short_dir, fakekube, driver_root):
    made = []

    def make(name):
        fault_points()
        n = Node(short_dir / name, name, fakekube, driver_root)
        made.append(n)
        return n
    yield make
    for n in made:
        n.close()


def _explain(node, what):
    return f"{what}\n{node.log_tail()}"


# ---------------------------------------------------------------------------------------------------
# Tests


def test_fault_points_listed():
    points = fault_points()
    assert points, "--list-fault-points listed nothing"
    assert len(set(points)) == len(points)
    assert all(p.replace("-", "").isalnum() and p == p.strip() for p in points), points


def test_unknown_fault_point_refused(nodes):
    node = nodes("node-bad")
    with pytest.raises(DriverDied):
        node.start("no-such-point")
    assert node.proc.returncode not in (0, -signal.SIGKILL)
    assert "no-such-point" in node.log.read_text()
    node.proc = None


@pytest.mark.parametrize("point", FAULT_POINTS or ["(unknown)"])
def test_fault_point(nodes, fakekube, point):
    """A fixed scenario per point: prepare a claim, unprepare it, and prepare another then give up
    on it (unprepare instead of the retry: the pod was deleted meanwhile), with the point armed
    for each call and the driver restarted without it after a crash."""
    node = nodes("node-fixed")
    rng = random.Random(point)
    a, b, other = make_claims(rng, node, fakekube, "fixed", 3)
    try:
        prepared, answers = {}, {}
        node.start()
        other_result, _ = node.call("prepare", [other])  # something that must survive untouched
        prepared[other.uid] = other
        answers[other.uid] = answer_of(other_result, other.uid)
        node.stop()
        node.start(point)

        r, crashed_prepare = node.call("prepare", [a])
        prepared[a.uid] = a
        answers[a.uid] = answer_of(r, a.uid)
        assert answers[a.uid] == a.expected_answer(node.name)
        check_converged(node, prepared, [a, b, other])
        check_same_answers(node, prepared, answers)

        if node.fault != point:  # re-arm for the unprepare
            node.stop()
            node.start(point)
        _, crashed_unprepare = node.call("unprepare", [a])
        del prepared[a.uid]
        check_converged(node, prepared, [a, b, other])

        # Crash while preparing b, then the kubelet unprepares b instead of retrying.
        if node.fault != point:
            node.stop()
            node.start(point)
        res = node.kubelet.prepare(DRIVER, [(b.ns, b.name, b.uid)])
        if res.ok:
            prepared[b.uid] = b
        else:
            assert node.reap(5) == -signal.SIGKILL, res.errors
            node.crashes.append(point)
            node.proc = None
            node.start()
        node.call("unprepare", [b])
        prepared.pop(b.uid, None)
        check_converged(node, prepared, [a, b, other])

        # A clean restart answers from the checkpoint as before.
        node.stop()
        node.start()
        check_same_answers(node, prepared, answers)
        check_converged(node, prepared, [a, b, other])
        assert node.crashes, f"fault point {point} was never reached"
        assert crashed_prepare + crashed_unprepare >= 1
    except (AssertionError, DriverDied, TimeoutError) as e:
        raise AssertionError(_explain(node, f"fault point {point}: {e}")) from e


def test_checks_catch_damage(nodes, fakekube):
    """The convergence checks themselves: each kind of damage a crash could leave is noticed."""
    node = nodes("node-check")
    rng = random.Random(1)
    a, b = make_claims(rng, node, fakekube, "check", 2)
    node.start()
    r, _ = node.call("prepare", [a, b])
    prepared = {a.uid: a, b.uid: b}
    check_converged(node, prepared, [a, b])
    node.stop()
    cp_path = node.plugin_dir / CHECKPOINT
    good_cp = cp_path.read_bytes()
    spec_a = node.cdi / spec_name(a.uid)
    good_a = spec_a.read_text()

    def damaged(what, undo):
        try:
            check_converged(node, prepared, [a, b])
        except AssertionError:
            pass
        else:
            pytest.fail(f"the checks did not notice {what}")
        undo()
        check_converged(node, prepared, [a, b])

    (node.cdi / ".stray.yaml.tmp1").write_text("x")
    damaged("a temporary file", lambda: (node.cdi / ".stray.yaml.tmp1").unlink())
    spec_a.unlink()
    damaged("a missing spec", lambda: spec_a.write_text(good_a))
    spec_a.write_text(good_a.replace(f"{a.uid}-{a.devices()[0]}", f"{a.uid}-gpu-9"))
    damaged("a spec with the wrong device", lambda: spec_a.write_text(good_a))
    cp_path.write_bytes(good_cp.replace(b"PrepareCompleted", b"PrepareStarted", 1))
    damaged("a checkpoint byte changed", lambda: cp_path.write_bytes(good_cp))
    doc = json.loads(good_cp)
    doc["preparedClaims"][a.uid]["state"] = "PrepareStarted"
    rest = {k: v for k, v in doc.items() if k != "checksum"}
    doc["checksum"] = zlib.crc32(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())
    cp_path.write_text(json.dumps(doc))
    damaged("a claim left PrepareStarted", lambda: cp_path.write_bytes(good_cp))
    (node.plugin_dir / "checkpoint.json.corrupt").write_bytes(good_cp)
    damaged("a checkpoint moved aside", lambda: (node.plugin_dir / "checkpoint.json.corrupt").unlink())
    # b's spec naming a device node of a's: two claims on one GPU.
    spec_b = node.cdi / spec_name(b.uid)
    good_b = spec_b.read_text()
    a_minor, b_minor = a.devices()[0].split("-")[1], b.devices()[0].split("-")[1]
    spec_b.write_text(good_b.replace(f"/dev/nvidia{b_minor}\"", f"/dev/nvidia{a_minor}\""))
    damaged("a device in two claims", lambda: spec_b.write_text(good_b))


def random_run(node, fk, seed, points):
    """One randomized run on node (fresh directories); returns the fault points that fired."""
    rng = random.Random(seed)
    node.fresh()
    node.crashes = []
    node.starts = 0
    claims = make_claims(rng, node, fk, f"s{seed}", rng.randint(2, 4))
    node.start(rng.choice(points))
    prepared, answers, trail = {}, {}, []
    rearm = (lambda n: rng.choice(points) if rng.random() < 0.3 else None)
    try:
        for _ in range(rng.randint(3, 7)):
            method = "prepare" if rng.random() < 0.6 else "unprepare"
            batch = rng.sample(claims, rng.choice([1, 1, 2]) if len(claims) > 1 else 1)
            armed = node.fault
            result, crashes = node.call(method, batch, rearm)
            trail.append(f"{method} {','.join(c.name for c in batch)} (armed {armed}, crashes {crashes})")
            for c in batch:
                if method == "prepare":
                    got = answer_of(result, c.uid)
                    assert got == c.expected_answer(node.name), f"{c.name}: answer {got}"
                    assert answers.setdefault(c.uid, got) == got, f"{c.name}: a different answer"
                    prepared[c.uid] = c
                else:
                    prepared.pop(c.uid, None)
                    answers.pop(c.uid, None)
            check_converged(node, prepared, claims, full=False)
        check_converged(node, prepared, claims)
        check_same_answers(node, prepared, answers)
        # Everything unprepared: nothing may be left.
        node.call("unprepare", claims, rearm)
        check_converged(node, {}, claims)
    except (AssertionError, DriverDied, TimeoutError) as e:
        raise AssertionError(_explain(node, f"seed {seed} (replay: GPUPLANE_CRASH_SEED={seed} "
                                            f"GPUPLANE_CRASH_RUNS=1): {e}\nsteps: {trail}")) from e
    finally:
        node.kill()
    return list(node.crashes)


def test_randomized_runs(nodes, fakekube):
    points = fault_points()
    seeds = [BASE_SEED + i for i in range(RANDOM_RUNS)]
    workers = [nodes(f"node-r{i}") for i in range(min(WORKERS, len(seeds)))]
    t0 = time.monotonic()

    def work(i):
        out = []
        for s in seeds[i::len(workers)]:
            try:
                out.append((s, random_run(workers[i], fakekube, s, points), None))
            except AssertionError as e:
                out.append((s, list(workers[i].crashes), str(e)))
        return out

    with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:
        outcomes = sorted(o for part in pool.map(work, range(len(workers))) for o in part)
    assert len(outcomes) == RANDOM_RUNS
    fired = [p for _, crashes, _ in outcomes for p in crashes]
    crashed_runs = sum(1 for _, c, _ in outcomes if c)
    failed = [(s, e) for s, _, e in outcomes if e]
    print(f"{RANDOM_RUNS} runs in {time.monotonic() - t0:.1f} s, {crashed_runs} with a crash, "
          f"{len(fired)} crashes: " + ", ".join(f"{p} {fired.count(p)}" for p in points))
    if failed:
        lines = "\n".join(f"  {e.splitlines()[0][:300]}" for _, e in failed[:20])
        pytest.fail(f"{len(failed)} of {RANDOM_RUNS} runs did not converge:\n{lines}\n"
                    f"the first in full:\n{failed[0][1]}", pytrace=False)
    if RANDOM_RUNS >= 100:  # a replay of one seed proves nothing about coverage
        assert crashed_runs >= RANDOM_RUNS // 3, "too few runs crashed: the faults are not reached"
        assert not [p for p in points if p not in fired], \
            f"fault points never reached: {[p for p in points if p not in fired]}"
