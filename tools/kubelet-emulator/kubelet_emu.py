# SPDX-License-Identifier: Apache-2.0
"""A kubelet stand-in for device plugins (device plugin API v1beta1), for tests and the demo.

It serves the kubelet's ``v1beta1.Registration`` service on ``<dir>/kubelet.sock`` and behaves like the
kubelet's device manager towards every plugin that registers (shared/reference/kubelet-apis.md §3):

* ``Register`` is validated as the kubelet does (version, extended resource name) and then, still
  inside the handler, the plugin's socket is dialed (10 s) and ``GetDevicePluginOptions`` is called;
  ``ListAndWatch`` is started in the background. Rejections are gRPC status UNKNOWN with the kubelet's
  message text.
* Every ``ListAndWatch`` message is a full snapshot: capacity = all devices, allocatable = healthy ones.
  When the stream ends the resource keeps its capacity, allocatable drops to 0 and a grace period
  (5 min, configurable) starts; re-registration revives it, expiry removes it (capacity 0).
* Admission (`allocate`, `allocate_pod`) follows the device manager: available = healthy - allocated,
  ``GetPreferredAllocation`` when the plugin offers it, then one ``Allocate`` per container and
  resource, ``PreStartContainer`` when required; allocations are kept in a checkpoint file.
* `restart` simulates a kubelet restart: connections drop, every unix socket in the directory is
  deleted, state is reloaded from the checkpoint and ``kubelet.sock`` is served again.

Everything observable is recorded in an event log with monotonic timestamps; `wait_for` and
`wait_event` block on state changes with deadlines (no fixed sleeps).

    with KubeletEmulator(directory) as kubelet:
        ...start a plugin with --kubelet-socket <directory>/kubelet.sock...
        kubelet.wait_registered("nvidia.com/gpu", timeout=10)
        kubelet.wait_for(lambda: kubelet.allocatable("nvidia.com/gpu") == 8, timeout=10)
        alloc = kubelet.allocate("nvidia.com/gpu", 4)
        alloc.response["envs"]
"""
import base64
import concurrent.futures
import dataclasses
import importlib.util
import itertools
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

import grpc

from emu_wait import wait_on

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROTO = "deviceplugin/v1beta1/api.proto"

API_VERSION = "v1beta1"
SUPPORTED_VERSIONS = ["v1beta1"]
KUBELET_SOCKET = "kubelet.sock"
CHECKPOINT = "kubelet_internal_checkpoint"
DEFAULT_DIR = "/var/lib/kubelet/device-plugins"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
DIAL_TIMEOUT = 10.0
PRESTART_TIMEOUT = 30.0
GRACE_PERIOD = 300.0


# ---------------------------------------------------------------------------------------------------
# Generated protobuf modules


def _own_compile(cache):
    """Fallback when tests/integration/kubeproto.py is absent: compile only the device plugin proto
    (it has no proto3 `optional`, so Debian's grpc_tools handles it for the stubs too)."""
    import hashlib

    src = ROOT / "proto" / PROTO
    out = pathlib.Path(cache) / ("kubelet-emu-" + hashlib.sha256(src.read_bytes()).hexdigest()[:16])
    if not out.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=".gen-", dir=out.parent))
        try:
            for cmd in (["protoc", f"-I{ROOT / 'proto'}", f"--python_out={tmp}", PROTO],
                        ["/usr/bin/python3", "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                         f"--grpc_python_out={tmp}", PROTO]):
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr}")
            try:
                os.rename(tmp, out)
            except OSError:
                if not out.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    import deviceplugin.v1beta1.api_pb2 as pb  # noqa: E402  (generated)
    import deviceplugin.v1beta1.api_pb2_grpc as pb_grpc  # noqa: E402

    return pb, pb_grpc


def load_proto(cache=None):
    """(api_pb2, api_pb2_grpc) of the device plugin API, generated into a cache directory:
    <GPUPLANE_BUILD or build>/pyproto through tests/integration/kubeproto.py when present."""
    helper = ROOT / "tests" / "integration" / "kubeproto.py"
    if helper.exists():
        spec = importlib.util.spec_from_file_location("kubeproto", helper)
        kubeproto = sys.modules.get("kubeproto")
        if kubeproto is None or getattr(kubeproto, "__file__", None) != str(helper):
            kubeproto = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(kubeproto)
        return kubeproto.load(PROTO, cache)
    default = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build")) / "pyproto"
    return _own_compile(cache or default)


pb, pb_grpc = load_proto()


# ---------------------------------------------------------------------------------------------------
# Kubelet validation


_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _is_qualified_name(value):
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def is_extended_resource_name(name):
    """v1helper.IsExtendedResourceName: not native (must contain '/', must not contain
    'kubernetes.io/'), not 'requests.'-prefixed, and 'requests.<name>' a qualified name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return _is_qualified_name("requests." + name)


def _answers(path):
    import socket as sk

    s = sk.socket(sk.AF_UNIX, sk.SOCK_STREAM)
    s.settimeout(1)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------
# Public records


class AdmissionError(Exception):
    """Pod admission failed; `message` is the kubelet's text, `code` the gRPC status of a failed RPC."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code


@dataclasses.dataclass(frozen=True)
class Device:
    id: str
    health: str  # as the kubelet sees it: "Unhealthy" for every device of a disconnected plugin
    numa: tuple  # NUMA node ids of Device.topology; () when the plugin sent none
    plugin_health: str  # the health string of the last snapshot
    allocated: bool

    @property
    def healthy(self):
        return self.health == HEALTHY


@dataclasses.dataclass(frozen=True)
class Event:
    seq: int
    t: float  # time.monotonic()
    wall: float  # time.time()
    kind: str  # register, reject, options, stream-open, update, stream-end, grace-expired,
    # preferred, allocate, prestart, admit-failed, free, restart, stop
    resource: str
    data: dict


@dataclasses.dataclass
class Allocation:
    pod: str
    container: str
    resource: str
    device_ids: list
    init: bool = False
    preferred_request: dict = None  # {"available": [...], "must_include": [...], "size": n} or None
    preferred_answer: list = None  # ids the plugin answered
    preferred_issues: list = dataclasses.field(default_factory=list)  # unknown/short/duplicate/extra
    response: dict = None  # the ContainerAllocateResponse as a dict
    response_bytes: bytes = b""
    prestart: bool = False


def response_to_dict(resp):
    """ContainerAllocateResponse -> {envs, mounts, devices, annotations, cdi_devices}."""
    return {
        "envs": dict(sorted(resp.envs.items())),
        "mounts": [{"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
                   for m in resp.mounts],
        "devices": [{"container_path": d.container_path, "host_path": d.host_path,
                     "permissions": d.permissions} for d in resp.devices],
        "annotations": dict(sorted(resp.annotations.items())),
        "cdi_devices": [c.name for c in resp.cdi_devices],
    }


# ---------------------------------------------------------------------------------------------------
# Internal state


class _Endpoint:
    """One registered plugin instance (one socket) of a resource."""

    _ids = itertools.count(1)

    def __init__(self, resource, socket, channel, stub, options):
        self.id = next(self._ids)
        self.resource = resource
        self.socket = socket
        self.channel = channel
        self.stub = stub
        self.options = options
        self.call = None  # the ListAndWatch call
        self.stopped = False


class _Resource:
    def __init__(self, name):
        self.name = name
        self.endpoint = None  # current _Endpoint, None when never registered since (re)start
        self.connected = False
        self.devices = {}  # id -> (health, numa tuple), in snapshot order
        self.registrations = 0
        self.updates = 0
        self.last_update = None  # monotonic time of the last snapshot
        self.disconnected_at = None
        self.removed = False
        self.grace_timer = None


class KubeletEmulator:
    """The kubelet's device manager, seen from device plugins. See the module docstring."""

    def __init__(self, directory=None, *, grace_period=GRACE_PERIOD, strict_endpoint=True,
                 checkpoint=True, dial_timeout=DIAL_TIMEOUT, on_event=None, start=True):
        self._own_dir = directory is None
        self.dir = pathlib.Path(directory or tempfile.mkdtemp(prefix="kubelet-emu-")).resolve()
        self.socket = self.dir / KUBELET_SOCKET
        self.checkpoint_path = self.dir / CHECKPOINT
        self.grace_period = grace_period
        self.strict_endpoint = strict_endpoint
        self.dial_timeout = dial_timeout
        self.use_checkpoint = checkpoint
        self.on_event = on_event
        self._cond = threading.Condition(threading.RLock())
        self._events = []
        self._resources = {}
        self._allocations = []  # Allocation, in admission order
        self._server = None
        self._endpoints = []
        self._pods = itertools.count(1)
        self._running = False
        if start:
            self.start()

    # ---- lifecycle --------------------------------------------------------------------------------

    def start(self):
        """Kubelet start: reload the checkpoint, delete every socket in the directory, serve kubelet.sock."""
        with self._cond:
            if self._running:
                return
            self.dir.mkdir(parents=True, exist_ok=True)
            if _is_socket(self.socket) and _answers(self.socket):
                raise RuntimeError(f"{self.socket} is being served (a kubelet?); refusing to take over "
                                   f"{self.dir}")
            self._load_checkpoint()
            deleted = []
            for entry in sorted(self.dir.iterdir()):
                if _is_socket(entry):
                    try:
                        entry.unlink()
                        deleted.append(entry.name)
                    except FileNotFoundError:
                        pass
            server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16,
                                                                       thread_name_prefix="kubelet-reg"))
            pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
            if server.add_insecure_port(f"unix:{self.socket}") == 0:
                raise RuntimeError(f"cannot listen on {self.socket}")
            server.start()
            self._server = server
            self._running = True
            self._event("start", "", socket=str(self.socket), deleted_sockets=deleted)

    def stop(self):
        """Kubelet exit: close every plugin connection and kubelet.sock (removed, unlike a crash)."""
        self._shutdown("stop")
        try:
            if _is_socket(self.socket):
                self.socket.unlink()
        except FileNotFoundError:
            pass

    def restart(self, downtime=0.0):
        """Kubelet restart (§3.5): connections drop, then start() (checkpoint, socket wipe, serve)."""
        self._shutdown("restart")
        if downtime:
            time.sleep(downtime)
        self.start()

    def close(self):
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _shutdown(self, kind):
        with self._cond:
            if not self._running:
                return
            self._running = False
            server, self._server = self._server, None
            endpoints, self._endpoints = self._endpoints, []
            for ep in endpoints:
                ep.stopped = True
            for res in self._resources.values():
                if res.grace_timer:
                    res.grace_timer.cancel()
            self._event(kind, "")
        server.stop(grace=None).wait(5)
        for ep in endpoints:
            if ep.call is not None:
                ep.call.cancel()
            ep.channel.close()
        with self._cond:
            # What a new kubelet process knows comes from the checkpoint only (see start()).
            self._resources = {}
            self._allocations = []
            self._cond.notify_all()

    # ---- registration (called from the gRPC server) -----------------------------------------------

    def _register(self, request, context):
        name, version, endpoint = request.resource_name, request.version, request.endpoint
        self._event("register-request", name, version=version, endpoint=endpoint,
                    options=_options_dict(request.options))
        if version not in SUPPORTED_VERSIONS:
            return self._reject(context, name, f'requested API version "{version}" is not supported by '
                                f'kubelet. Supported version is ["{API_VERSION}"]')
        if not is_extended_resource_name(name):
            return self._reject(context, name, f'the ResourceName "{name}" is invalid')
        if self.strict_endpoint and (not endpoint or "/" in endpoint or endpoint in (".", "..")
                                     or endpoint == KUBELET_SOCKET):
            return self._reject(context, name, f"kubelet-emu (stricter than the kubelet): endpoint "
                                f'"{endpoint}" must be a socket file name in {self.dir}')
        socket = os.path.join(self.dir, endpoint)
        channel = grpc.insecure_channel(f"unix:{socket}", options=[
            ("grpc.default_authority", "localhost"),  # as the kubelet forces for device plugins
            ("grpc.primary_user_agent", "kubelet-emu"),
            ("grpc.enable_retries", 0),
        ])
        try:
            grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
        except grpc.FutureTimeoutError:
            channel.close()
            return self._reject(context, name, f"failed to dial device plugin: context deadline exceeded "
                                f"(dialing {socket} for {self.dial_timeout:g} s)")
        stub = pb_grpc.DevicePluginStub(channel)
        try:
            options = stub.GetDevicePluginOptions(pb.Empty(), timeout=context.time_remaining())
        except grpc.RpcError as e:
            channel.close()
            return self._reject(context, name, f"failed to get device plugin options: rpc error: code = "
                                f"{e.code().name} desc = {e.details()}")
        ep = _Endpoint(name, socket, channel, stub, _options_dict(options))
        with self._cond:
            if not self._running:
                channel.close()
                context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet is shutting down")
            res = self._resources.get(name)
            if res is None or res.removed:
                count = res.registrations if res else 0
                res = self._resources[name] = _Resource(name)
                res.registrations = count
            old = res.endpoint
            res.endpoint = ep
            res.registrations += 1
            res.connected = True
            res.removed = False
            res.disconnected_at = None
            if res.grace_timer:
                res.grace_timer.cancel()
                res.grace_timer = None
            self._endpoints.append(ep)
            self._event("options", name, **ep.options)
            self._event("register", name, endpoint=endpoint, socket=socket, options=ep.options,
                        registration=res.registrations,
                        replaces=(os.path.basename(old.socket) if old else None))
        # The kubelet starts ListAndWatch in a goroutine from inside Register.
        threading.Thread(target=self._list_and_watch, args=(ep,), daemon=True,
                         name=f"law-{name}-{ep.id}").start()
        return pb.Empty()

    def _reject(self, context, name, message):
        self._event("reject", name, message=message)
        context.abort(grpc.StatusCode.UNKNOWN, message)

    def _list_and_watch(self, ep):
        code, details = None, None
        try:
            call = ep.stub.ListAndWatch(pb.Empty())
            with self._cond:
                ep.call = call
                if ep.stopped:
                    call.cancel()
                else:
                    self._event("stream-open", ep.resource, endpoint=os.path.basename(ep.socket))
            for msg in call:
                self._snapshot(ep, msg)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code, details = e.code(), e.details()
        except ValueError as e:  # channel closed under us
            code, details = grpc.StatusCode.CANCELLED, str(e)
        self._stream_end(ep, code, details)

    def _snapshot(self, ep, msg):
        devices = {}
        for d in msg.devices:
            devices[d.ID] = (d.health, tuple(n.ID for n in d.topology.nodes))
        duplicates = len(msg.devices) - len(devices)
        with self._cond:
            res = self._resources.get(ep.resource)
            if ep.stopped or res is None or res.endpoint is not ep:
                self._event("stale-update", ep.resource, endpoint=os.path.basename(ep.socket),
                            devices=len(msg.devices))
                return
            before = (self._capacity(res), self._allocatable(res), self._unhealthy(res))
            res.devices = devices
            res.updates += 1
            res.last_update = time.monotonic()
            after = (self._capacity(res), self._allocatable(res), self._unhealthy(res))
            self._event("update", ep.resource, capacity=after[0], allocatable=after[1],
                        unhealthy=after[2], devices=[{"id": i, "health": h, "numa": list(n)}
                                                     for i, (h, n) in devices.items()],
                        changed=(before != after), duplicates=duplicates, update=res.updates)
            self._write_checkpoint()

    def _stream_end(self, ep, code, details):
        with self._cond:
            res = self._resources.get(ep.resource)
            current = not ep.stopped and res is not None and res.endpoint is ep
            self._event("stream-end", ep.resource, endpoint=os.path.basename(ep.socket),
                        code=code.name if code else None, details=details, current=current)
            if not current:
                ep.channel.close()
                return
            ep.stopped = True
            res.connected = False
            res.disconnected_at = time.monotonic()
            if self.grace_period is not None:
                res.grace_timer = threading.Timer(self.grace_period, self._grace_expired, args=(res, ep))
                res.grace_timer.daemon = True
                res.grace_timer.start()
            self._event("update", ep.resource, capacity=self._capacity(res), allocatable=0,
                        unhealthy=sorted(res.devices), devices=[], changed=True, disconnected=True,
                        update=res.updates)
        ep.channel.close()

    def _grace_expired(self, res, ep):
        with self._cond:
            if self._resources.get(res.name) is not res or res.endpoint is not ep or res.connected:
                return
            res.removed = True
            res.devices = {}
            self._event("grace-expired", res.name)
            self._write_checkpoint()

    # ---- state helpers (hold self._cond) ----------------------------------------------------------

    def _allocated_ids(self, resource):
        return {i for a in self._allocations if a.resource == resource for i in a.device_ids}

    @staticmethod
    def _capacity(res):
        return 0 if res.removed else len(res.devices)

    @staticmethod
    def _allocatable(res):
        if not res.connected or res.removed:
            return 0
        return sum(1 for h, _ in res.devices.values() if h == HEALTHY)

    @staticmethod
    def _unhealthy(res):
        if not res.connected:
            return sorted(res.devices)
        return [i for i, (h, _) in res.devices.items() if h != HEALTHY]

    def _event(self, kind, resource, **data):
        with self._cond:
            ev = Event(len(self._events), time.monotonic(), time.time(), kind, resource, data)
            self._events.append(ev)
            self._cond.notify_all()
        if self.on_event:
            try:
                self.on_event(ev)
            except Exception as e:  # a display problem must not break the emulator
                print(f"kubelet-emu: on_event: {e!r}", file=sys.stderr)
        return ev

    # ---- checkpoint (own format, §3.7) -----------------------------------------------------------

    def _write_checkpoint(self):
        if not self.use_checkpoint or not self._running:
            return
        entries = []
        for a in self._allocations:
            numa = {}
            res = self._resources.get(a.resource)
            for i in a.device_ids:
                nodes = res.devices.get(i, (None, ()))[1] if res else ()
                numa.setdefault(str(nodes[0]) if nodes else "-1", []).append(i)
            entries.append({"PodUID": a.pod, "ContainerName": a.container, "ResourceName": a.resource,
                            "DeviceIDs": numa, "AllocResp": base64.b64encode(a.response_bytes).decode(),
                            "Init": a.init})
        data = {"PodDeviceEntries": entries,
                "RegisteredDevices": {n: list(r.devices) for n, r in self._resources.items() if not r.removed}}
        tmp = self.checkpoint_path.with_name("." + CHECKPOINT + ".tmp")
        tmp.write_text(json.dumps({"Data": data, "Checksum": 0}, indent=1))
        os.replace(tmp, self.checkpoint_path)

    def _load_checkpoint(self):
        self._resources = {}
        self._allocations = []
        if not self.use_checkpoint or not self.checkpoint_path.exists():
            return
        try:
            data = json.loads(self.checkpoint_path.read_text())["Data"]
        except (ValueError, KeyError, OSError) as e:
            print(f"kubelet-emu: ignoring unreadable checkpoint: {e}", file=sys.stderr)
            return
        for name in data.get("RegisteredDevices", {}):
            self._resources[name] = _Resource(name)  # capacity 0 until the plugin re-registers
        for e in data.get("PodDeviceEntries", []):
            raw = base64.b64decode(e.get("AllocResp", ""))
            resp = pb.ContainerAllocateResponse.FromString(raw)
            ids = [i for group in e.get("DeviceIDs", {}).values() for i in group]
            self._allocations.append(Allocation(e["PodUID"], e["ContainerName"], e["ResourceName"], ids,
                                                init=e.get("Init", False), response=response_to_dict(resp),
                                                response_bytes=raw))

    # ---- observation API --------------------------------------------------------------------------

    def resources(self):
        """Names of every resource the emulator knows (registered, disconnected or checkpointed)."""
        with self._cond:
            return sorted(n for n, r in self._resources.items() if not r.removed)

    def registered(self, resource):
        """True while a plugin for `resource` is registered and its ListAndWatch stream is open."""
        with self._cond:
            res = self._resources.get(resource)
            return bool(res and res.connected)

    def registrations(self, resource):
        """Successful Register calls for `resource` since the emulator (re)started."""
        with self._cond:
            res = self._resources.get(resource)
            return res.registrations if res else 0

    def capacity(self, resource):
        with self._cond:
            res = self._resources.get(resource)
            return self._capacity(res) if res else 0

    def allocatable(self, resource):
        with self._cond:
            res = self._resources.get(resource)
            return self._allocatable(res) if res else 0

    def unhealthy(self, resource):
        """Ids counted in capacity but not in allocatable."""
        with self._cond:
            res = self._resources.get(resource)
            return self._unhealthy(res) if res else []

    def updates(self, resource):
        """Number of ListAndWatch snapshots received for `resource` (since (re)start)."""
        with self._cond:
            res = self._resources.get(resource)
            return res.updates if res else 0

    def options(self, resource):
        """GetDevicePluginOptions of the current plugin: {pre_start_required, get_preferred_allocation_available}."""
        with self._cond:
            res = self._resources.get(resource)
            return dict(res.endpoint.options) if res and res.endpoint else None

    def endpoint(self, resource):
        """Socket path of the current plugin of `resource`."""
        with self._cond:
            res = self._resources.get(resource)
            return res.endpoint.socket if res and res.endpoint else None

    def devices(self, resource):
        """[Device] of the last snapshot, in the plugin's order."""
        with self._cond:
            res = self._resources.get(resource)
            if not res or res.removed:
                return []
            allocated = self._allocated_ids(resource)
            return [Device(i, h if res.connected else UNHEALTHY, n, h, i in allocated)
                    for i, (h, n) in res.devices.items()]

    def allocations(self, pod=None, resource=None):
        with self._cond:
            return [a for a in self._allocations
                    if (pod is None or a.pod == pod) and (resource is None or a.resource == resource)]

    def allocated(self, resource):
        """Ids of `resource` allocated to some container."""
        with self._cond:
            return sorted(self._allocated_ids(resource))

    def last_allocate_response(self, resource=None):
        """The last ContainerAllocateResponse (as a dict) of an admission, optionally of one resource."""
        with self._cond:
            for a in reversed(self._allocations):
                if resource is None or a.resource == resource:
                    return a.response
        return None

    def events(self, kind=None, resource=None, since=0):
        """Event log entries with seq >= since, optionally filtered."""
        with self._cond:
            return [e for e in self._events[since:]
                    if (kind is None or e.kind == kind) and (resource is None or e.resource == resource)]

    def mark(self):
        """The seq the next event will get: pass as `since` to wait_event/events."""
        with self._cond:
            return len(self._events)

    def wait_for(self, predicate, timeout=10.0, what=None):
        """Blocks until predicate() is true (re-checked on every emulator event and every 50 ms);
        returns its value or raises TimeoutError after `timeout` seconds."""
        return wait_on(self._cond, predicate, timeout, what, "kubelet-emu")

    def wait_event(self, kind, resource=None, since=0, predicate=None, timeout=10.0):
        """First event of `kind` (and `resource`) with seq >= since for which predicate(event) holds."""
        def find():
            for e in self.events(kind, resource, since):
                if predicate is None or predicate(e):
                    return e
            return None
        return self.wait_for(find, timeout, what=f"event {kind} {resource or ''}".strip())

    def wait_registered(self, resource, timeout=10.0, registrations=None, snapshot=True):
        """Waits until `resource` is registered (at least `registrations` times since the emulator
        (re)started, default 1) and, with `snapshot`, a ListAndWatch snapshot of that registration
        arrived. Returns the number of registrations."""
        need = registrations or 1

        def done():
            res = self._resources.get(resource)
            return (res is not None and res.connected and res.registrations >= need
                    and (not snapshot or res.last_update is not None
                         and res.last_update >= self._register_time(resource)))
        self.wait_for(done, timeout, what=f"registration of {resource}")
        return self.registrations(resource)

    def _register_time(self, resource):
        for e in reversed(self._events):
            if e.kind == "register" and e.resource == resource:
                return e.t
        return 0.0

    # ---- admission --------------------------------------------------------------------------------

    def allocate(self, resource, count, container="main", pod=None, start=True):
        """Admits a one-container pod requesting `count` of `resource`. Returns the Allocation;
        raises AdmissionError with the kubelet's text on failure (nothing stays allocated)."""
        return self.allocate_pod([(container, {resource: count})], pod=pod, start=start)[0]

    def allocate_pod(self, containers, init_containers=(), pod=None, start=True):
        """Admits a pod: containers / init_containers = [(name, {resource: count})]. As the kubelet:
        init containers first, then per container and per resource GetPreferredAllocation (if offered)
        and one Allocate with exactly one ContainerAllocateRequest; devices of finished init containers
        are reused by app containers. With `start`, PreStartContainer is called where required."""
        pod = pod or f"pod-{next(self._pods)}"
        done = []
        try:
            for init, group in ((True, init_containers), (False, containers)):
                for container, requests in group:
                    for resource, count in requests.items():
                        if int(count) <= 0:  # the kubelet skips resources with nothing to allocate
                            continue
                        done.append(self._admit(pod, container, resource, int(count), init))
            if start:
                for a in done:
                    self._prestart(a)
        except AdmissionError as e:
            with self._cond:
                self._allocations = [a for a in self._allocations if a.pod != pod]
                self._event("admit-failed", "", pod=pod, message=e.message,
                            code=e.code.name if e.code else None)
                self._write_checkpoint()
            raise
        return done

    def _admit(self, pod, container, resource, needed, init):
        with self._cond:
            res = self._resources.get(resource)
            if res is None or res.removed:
                raise AdmissionError(f"cannot allocate unregistered device {resource}")
            healthy = [i for i, (h, _) in res.devices.items() if h == HEALTHY] if res.connected else []
            if not healthy:
                raise AdmissionError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
            ep = res.endpoint
            if ep is None:
                raise AdmissionError(f"unknown Device Plugin {resource}")
            # Devices of this pod's init containers not yet handed to an app container are reused
            # first (they stay counted as in use); the rest comes from healthy - in use.
            mine = [a for a in self._allocations if a.pod == pod and a.resource == resource]
            app = {i for a in mine if not a.init for i in a.device_ids}
            reusable = sorted({i for a in mine if a.init for i in a.device_ids} - app)
            chosen = reusable[:needed]
            available = sorted(set(healthy) - self._allocated_ids(resource))
            if len(available) < needed - len(chosen):
                raise AdmissionError(f"requested number of devices unavailable for {resource}. "
                                     f"Requested: {needed - len(chosen)}, Available: {len(available)}")
            alloc = Allocation(pod, container, resource, [], init=init)
        if len(chosen) < needed:
            if ep.options.get("get_preferred_allocation_available"):
                chosen = self._preferred(ep, alloc, sorted(set(available) | set(chosen)), chosen, needed)
            else:
                chosen = chosen + available[: needed - len(chosen)]
        alloc.device_ids = chosen
        with self._cond:
            self._allocations.append(alloc)  # the kubelet marks devices allocated before the RPC
        self._allocate_rpc(ep, alloc)
        return alloc

    def _preferred(self, ep, alloc, available, must_include, needed):
        req = pb.PreferredAllocationRequest(container_requests=[pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=needed)])
        alloc.preferred_request = {"available": list(available), "must_include": list(must_include),
                                   "size": needed}
        t0 = time.monotonic()
        try:
            resp = ep.stub.GetPreferredAllocation(req)
        except grpc.RpcError as e:
            self._event("preferred", alloc.resource, pod=alloc.pod, container=alloc.container,
                        request=alloc.preferred_request, error=f"{e.code().name}: {e.details()}")
            raise AdmissionError(f"device plugin GetPreferredAllocation rpc failed with err: rpc error: "
                                 f"code = {e.code().name} desc = {e.details()}", e.code())
        answer = list(resp.container_responses[0].deviceIDs) if resp.container_responses else []
        alloc.preferred_answer = answer
        issues = alloc.preferred_issues
        if len(resp.container_responses) != 1:
            issues.append(f"{len(resp.container_responses)} container_responses (expected 1)")
        # As the kubelet: must-include first, then the answer's ids that are candidates, then top up.
        chosen = list(must_include)
        for i in answer:
            if i not in available:
                issues.append(f"unknown id {i}")
            elif i in chosen:
                if i not in must_include:
                    issues.append(f"duplicate id {i}")
            elif len(chosen) < needed:
                chosen.append(i)
            else:
                issues.append(f"extra id {i}")
        missing = [i for i in must_include if i not in answer]
        if missing:
            issues.append(f"must-include ids missing from the answer: {missing}")
        if len(chosen) < needed:
            issues.append(f"short answer: {len(chosen)} of {needed}; topped up")
            chosen += [i for i in available if i not in chosen][: needed - len(chosen)]
        self._event("preferred", alloc.resource, pod=alloc.pod, container=alloc.container,
                    request=alloc.preferred_request, answer=answer, chosen=chosen, issues=list(issues),
                    seconds=time.monotonic() - t0)
        return chosen

    def _allocate_rpc(self, ep, alloc):
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=alloc.device_ids)])
        t0 = time.monotonic()
        try:
            resp = ep.stub.Allocate(req)
        except grpc.RpcError as e:
            self._event("allocate", alloc.resource, pod=alloc.pod, container=alloc.container,
                        device_ids=alloc.device_ids, error=f"{e.code().name}: {e.details()}")
            raise AdmissionError(f"Allocate failed due to rpc error: code = {e.code().name} desc = "
                                 f"{e.details()}, which is unexpected", e.code())
        if not resp.container_responses:
            self._event("allocate", alloc.resource, pod=alloc.pod, container=alloc.container,
                        device_ids=alloc.device_ids, error="empty container_responses")
            raise AdmissionError("Allocate failed due to no containers return in allocation response "
                                 f"{resp}, which is unexpected")
        first = resp.container_responses[0]
        alloc.response = response_to_dict(first)
        alloc.response_bytes = first.SerializeToString()
        with self._cond:
            self._event("allocate", alloc.resource, pod=alloc.pod, container=alloc.container,
                        device_ids=alloc.device_ids, response=alloc.response,
                        responses=len(resp.container_responses), seconds=time.monotonic() - t0)
            self._write_checkpoint()

    def _prestart(self, alloc):
        with self._cond:
            res = self._resources.get(alloc.resource)
            ep = res.endpoint if res else None
        if ep is None or not ep.options.get("pre_start_required"):
            return
        try:
            ep.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=alloc.device_ids),
                                      timeout=PRESTART_TIMEOUT)
        except grpc.RpcError as e:
            self._event("prestart", alloc.resource, pod=alloc.pod, container=alloc.container,
                        device_ids=alloc.device_ids, error=f"{e.code().name}: {e.details()}")
            raise AdmissionError(f"device plugin PreStartContainer rpc failed with err: rpc error: "
                                 f"code = {e.code().name} desc = {e.details()}", e.code())
        alloc.prestart = True
        self._event("prestart", alloc.resource, pod=alloc.pod, container=alloc.container,
                    device_ids=alloc.device_ids)

    def free(self, pod):
        """The pod is gone: its devices return to the pool (no RPC, as in the kubelet)."""
        with self._cond:
            freed = [a for a in self._allocations if a.pod == pod]
            self._allocations = [a for a in self._allocations if a.pod != pod]
            self._event("free", "", pod=pod, device_ids=sorted({i for a in freed for i in a.device_ids}))
            self._write_checkpoint()
        return freed


class _Registration(pb_grpc.RegistrationServicer):
    def __init__(self, kubelet):
        self.kubelet = kubelet

    def Register(self, request, context):
        return self.kubelet._register(request, context)


def _options_dict(options):
    return {"pre_start_required": bool(options.pre_start_required),
            "get_preferred_allocation_available": bool(options.get_preferred_allocation_available)}
