# SPDX-License-Identifier: Apache-2.0
"""A kubelet stand-in for DRA drivers: the plugin watcher and the DRA client, for tests and the demo.

It plays the two parts of the kubelet a DRA driver talks to (shared/reference/kubelet-apis.md §4-5):

* The plugin watcher. The registrar directory (the kubelet's ``plugins_registry/``) is scanned every
  100 ms, recursively; names starting with ``.`` and files that are not sockets are ignored. A new
  socket is dialed (10 s), ``pluginregistration.Registration/GetInfo`` is called (1 s deadline), the
  answer is validated as the kubelet's DRA handler does (type, name, endpoint, supported versions)
  and ``NotifyRegistrationStatus`` tells the plugin the outcome (5 s deadline), with the kubelet's
  error texts on failure. A failed attempt is retried with exponential back-off while the socket
  stays. A socket that disappears deregisters its plugin; a re-created one registers again.
* The DRA client. ``NodePrepareResources`` / ``NodeUnprepareResources`` are called over the service
  version chosen at registration (or a forced one), with the kubelet's 45 s deadline, and the
  response is checked as the kubelet checks it (results for unknown UIDs, per-claim errors, claims
  left out). The outcome is returned as a `CallResult`, never raised.

Everything observable is recorded (registration history, events with monotonic timestamps);
`wait_for` blocks on state changes with a deadline.

    with DraKubelet(registrar_dir) as kubelet:
        ...start the driver with --kubelet-registrar-directory-path registrar_dir...
        kubelet.wait_registered("gpu.nvidia.com", timeout=10)
        r = kubelet.prepare("gpu.nvidia.com", [("default", "claim-a", uid)])
        r.ok, r.error, r.claims[uid].devices
"""
import concurrent.futures
import dataclasses
import importlib.util
import os
import pathlib
import shutil
import stat
import sys
import tempfile
import threading
import time

import grpc

from emu_wait import wait_on

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

REGISTRATION_PROTO = "pluginregistration/v1/api.proto"
DRA_PROTOS = {"v1": "dra/v1/api.proto", "v1beta1": "dra/v1beta1/api.proto"}

DRA_PLUGIN_TYPE = "DRAPlugin"
# What kubelet 1.36 speaks, newest first; an older kubelet (1.32, 1.33) speaks only v1beta1.
KUBELET_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
OLD_KUBELET_SERVICES = ("v1beta1.DRAPlugin",)
DEFAULT_REGISTRAR_DIR = "/var/lib/kubelet/plugins_registry"

POLL_INTERVAL = 0.1
DIAL_TIMEOUT = 10.0
GET_INFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0
CALL_TIMEOUT = 45.0
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 120.0
# Each channel gets its own connections: grpc's process-wide subchannel pool would hand a new
# channel a connection to a socket file that has since been replaced by another server's.
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]


# ---------------------------------------------------------------------------------------------------
# Generated protobuf modules


def _kubeproto():
    """tests/integration/kubeproto.py, which generates (and caches) the modules of proto/."""
    helper = ROOT / "tests" / "integration" / "kubeproto.py"
    mod = sys.modules.get("kubeproto")
    if mod is not None and getattr(mod, "__file__", None) == str(helper):
        return mod
    spec = importlib.util.spec_from_file_location("kubeproto", helper)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules.setdefault("kubeproto", mod)
    return mod


def load_protos(cache=None):
    """(registration (pb, pb_grpc), {"v1": (pb, pb_grpc), "v1beta1": (pb, pb_grpc)})."""
    kp = _kubeproto()
    return (kp.load(REGISTRATION_PROTO, cache),
            {v: kp.load(name, cache) for v, name in DRA_PROTOS.items()})


(reg_pb, reg_grpc), dra_pb = load_protos()


def service_version(service):
    """"v1.DRAPlugin" -> "v1" (the proto package's last element), or None for another service."""
    version, dot, name = service.partition(".")
    return version if dot and name == "DRAPlugin" and version in DRA_PROTOS else None


def _go_list(items):
    """A []string as Go's %v prints it."""
    return "[" + " ".join(items) + "]"


def rpc_error_text(e):
    """A grpc.RpcError the way grpc-go's error prints it."""
    return f"rpc error: code = {_code_name(e.code())} desc = {e.details()}"


def _code_name(code):
    """grpc-go's names of status codes: DeadlineExceeded, not DEADLINE_EXCEEDED."""
    return "".join(w.capitalize() for w in code.name.split("_")) if code else "Unknown"


# ---------------------------------------------------------------------------------------------------
# Claims and records


@dataclasses.dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, value):
        """A Claim from a Claim, a (namespace, name, uid) tuple, a dict or "namespace/name/uid"."""
        if isinstance(value, Claim):
            return value
        if isinstance(value, dict):
            return cls(value.get("namespace", ""), value.get("name", ""), value.get("uid", ""))
        if isinstance(value, str):
            parts = value.split("/")
            if len(parts) != 3:
                raise ValueError(f"claim {value!r}: want namespace/name/uid")
            return cls(*parts)
        namespace, name, uid = value
        return cls(namespace, name, uid)


def parse_claims(text):
    """"ns/name/uid,ns/name/uid" -> [Claim]."""
    return [Claim.of(c) for c in text.split(",") if c]


@dataclasses.dataclass
class Registration:
    """One registration attempt of one socket, as the plugin watcher saw it."""

    seq: int
    t: float  # time.monotonic() when the attempt started
    socket: str
    info: dict = None  # GetInfo's answer {type, name, endpoint, supported_versions}; None if it failed
    accepted: bool = False
    error: str = None  # the kubelet's text for a failed attempt
    notified: bool = None  # NotifyRegistrationStatus sent: True delivered, False failed, None not sent
    notify_error: str = None
    service: str = None  # the chosen service, "v1.DRAPlugin" / "v1beta1.DRAPlugin"
    endpoint: str = None  # the DRA socket (GetInfo's endpoint, or the registration socket when empty)
    deregistered: float = None  # time.monotonic() of the deregistration, for accepted ones
    finished: bool = False  # the attempt is over (notification sent or not)
    file_key: tuple = None  # (inode, ctime in ns) of the socket file this attempt dialed

    @property
    def driver(self):
        return self.info["name"] if self.info else None

    @property
    def version(self):
        return service_version(self.service) if self.service else None

    @property
    def current(self):
        return self.accepted and self.deregistered is None

    def to_dict(self):
        return {"socket": self.socket, "info": self.info, "accepted": self.accepted, "error": self.error,
                "notified": self.notified, "notify_error": self.notify_error, "service": self.service,
                "endpoint": self.endpoint, "deregistered": self.deregistered is not None}


@dataclasses.dataclass(frozen=True)
class Event:
    seq: int
    t: float  # time.monotonic()
    kind: str  # attempt, register, reject, deregister, prepare, unprepare, start, stop
    driver: str
    data: dict


@dataclasses.dataclass
class ClaimResult:
    uid: str
    namespace: str = None  # None: a UID the driver answered that was not requested
    name: str = None
    requested: bool = True
    answered: bool = False
    error: str = ""  # the driver's per-claim error
    devices: list = None  # prepare: the answered devices (dicts, see device_dict); unprepare: None

    def to_dict(self):
        d = {"namespace": self.namespace, "name": self.name, "requested": self.requested,
             "answered": self.answered, "error": self.error}
        if self.devices is not None:
            d["devices"] = self.devices
        return d


@dataclasses.dataclass
class CallResult:
    """The outcome of one NodePrepareResources / NodeUnprepareResources call as the kubelet judges it.

    `errors` holds the kubelet's texts (first the gRPC failure, else per answered claim in request
    order then unknown UIDs, then the left-out count); `error` is the first, the one the kubelet
    would report (it stops at the first); `ok` means the kubelet accepts the call."""

    method: str
    driver: str
    version: str
    endpoint: str
    claims: dict  # uid -> ClaimResult, requested ones in request order, then unknown ones
    errors: list
    code: str = None  # grpc-go name of the status of a failed call, "OK" otherwise
    seconds: float = 0.0

    @property
    def ok(self):
        return not self.errors

    @property
    def error(self):
        return self.errors[0] if self.errors else None

    def devices(self, uid):
        return self.claims[uid].devices

    def cdi_ids(self, uid):
        return [i for d in self.claims[uid].devices for i in d["cdi_device_ids"]]

    def to_dict(self):
        return {"method": self.method, "driver": self.driver, "version": self.version,
                "endpoint": self.endpoint, "ok": self.ok, "error": self.error, "errors": self.errors,
                "code": self.code, "seconds": round(self.seconds, 6),
                "claims": {u: c.to_dict() for u, c in self.claims.items()}}


def device_dict(dev, version):
    d = {"request_names": list(dev.request_names), "pool_name": dev.pool_name,
         "device_name": dev.device_name, "cdi_device_ids": list(dev.cdi_device_ids)}
    if version == "v1" and dev.HasField("share_id"):
        d["share_id"] = dev.share_id
    return d


# ---------------------------------------------------------------------------------------------------
# The emulator


class _Socket:
    """Watcher state of one registration socket path."""

    def __init__(self, path, key):
        self.path = path
        self.key = key  # (inode, ctime): a re-created socket is a new one
        self.busy = False
        self.gone = False
        self.registration = None  # the accepted Registration while registered
        self.failures = 0
        self.next_try = 0.0


class _Instance:
    """A registered plugin instance and its connection."""

    def __init__(self, registration):
        self.registration = registration
        self.channel = grpc.insecure_channel("unix:" + registration.endpoint,
                                              options=CHANNEL_OPTIONS)
        self.stubs = {v: grpc_mod.DRAPluginStub(self.channel) for v, (_, grpc_mod) in dra_pb.items()}


class DraKubelet:
    """The kubelet's plugin watcher (for DRAPlugin) and DRA client.

    services: the DRA services this kubelet speaks (KUBELET_SERVICES for 1.36; OLD_KUBELET_SERVICES
    for a kubelet that only knows v1beta1). retry: retry failed registration attempts with back-off
    (BACKOFF_INITIAL doubling up to backoff_max) while the socket stays. directory None: a temp dir
    (removed by stop())."""

    def __init__(self, registrar_dir=None, services=KUBELET_SERVICES, poll_interval=POLL_INTERVAL,
                 dial_timeout=DIAL_TIMEOUT, call_timeout=CALL_TIMEOUT, retry=True,
                 backoff_max=BACKOFF_MAX, on_event=None, start=True):
        self._own_dir = registrar_dir is None
        if self._own_dir:
            registrar_dir = tempfile.mkdtemp(prefix="dra-reg-")
        self.dir = os.path.abspath(str(registrar_dir))
        self.services = tuple(services)
        for s in self.services:
            if not service_version(s):
                raise ValueError(f"unknown DRA service {s!r} (known: {', '.join(KUBELET_SERVICES)})")
        self.poll_interval = poll_interval
        self.dial_timeout = dial_timeout
        self.call_timeout = call_timeout
        self.retry = retry
        self.backoff_max = backoff_max
        self.on_event = on_event
        self._cond = threading.Condition()
        self._events = []
        self._registrations = []
        self._sockets = {}  # path -> _Socket
        self._instances = []  # _Instance, in registration order
        self._prepared = {}  # (driver, uid) -> devices of the last successful prepare
        self._scans = 0
        self._stop = threading.Event()
        self._thread = None
        self._pool = None
        if start:
            self.start()

    # ---- lifecycle --------------------------------------------------------------------------------

    def start(self):
        if self._thread:
            return
        os.makedirs(self.dir, exist_ok=True)
        self._stop.clear()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="dra-reg")
        self._thread = threading.Thread(target=self._watch, name="dra-watcher", daemon=True)
        with self._cond:
            self._event("start", "", directory=self.dir, services=list(self.services))
        self._thread.start()

    def stop(self):
        """Stops watching and closes every connection; sockets in the directory are left alone (the
        kubelet never deletes plugins_registry sockets), a temp directory of its own is removed."""
        self._halt()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _halt(self):
        if self._thread:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._cond:
            now = time.monotonic()
            for inst in self._instances:
                inst.channel.close()
                inst.registration.deregistered = now
            self._instances = []
            self._sockets = {}
            self._event("stop", "")

    def restart(self):
        """A kubelet restart: registrations and connections are forgotten and every socket still in
        the directory is registered again (the plugin sees GetInfo and a notification again)."""
        self._halt()
        self.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ---- watcher ----------------------------------------------------------------------------------

    @staticmethod
    def file_key(path):
        """(inode, ctime in ns) of path, as Registration.file_key: tells a re-created socket file
        from the one a registration was made for. None when there is no file."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return (st.st_ino, st.st_ctime_ns)

    def _scan(self):
        """{path: (inode, ctime)} of the sockets under the directory, dot names skipped."""
        found = {}
        for top, dirs, files in os.walk(self.dir):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if name.startswith("."):
                    continue
                path = os.path.join(top, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISSOCK(st.st_mode):
                    found[path] = (st.st_ino, st.st_ctime_ns)
        return found

    def _watch(self):
        while not self._stop.is_set():
            found = self._scan()
            now = time.monotonic()
            with self._cond:
                for path, sock in list(self._sockets.items()):
                    if found.get(path) != sock.key:
                        sock.gone = True
                        del self._sockets[path]
                        self._deregister(sock)
                for path, key in found.items():
                    sock = self._sockets.get(path)
                    if sock is None:
                        sock = self._sockets[path] = _Socket(path, key)
                    if (not sock.busy and sock.registration is None and now >= sock.next_try
                            and (sock.failures == 0 or self.retry)):
                        sock.busy = True
                        self._pool.submit(self._register, sock)
                self._scans += 1
                self._cond.notify_all()
            self._stop.wait(self.poll_interval)

    def _deregister(self, sock):
        reg = sock.registration
        if reg is None:
            return
        reg.deregistered = time.monotonic()
        sock.registration = None
        for inst in [i for i in self._instances if i.registration is reg]:
            inst.channel.close()
            self._instances.remove(inst)
        self._event("deregister", reg.driver, socket=sock.path, endpoint=reg.endpoint)

    def _register(self, sock):
        try:
            self._attempt(sock)
        except Exception as e:  # a bug here must not kill the worker silently
            with self._cond:
                self._event("internal-error", "", socket=sock.path, error=repr(e))
        finally:
            with self._cond:
                sock.busy = False
                self._cond.notify_all()

    def _attempt(self, sock):
        with self._cond:
            reg = Registration(len(self._registrations), time.monotonic(), sock.path,
                               file_key=sock.key)
            self._registrations.append(reg)
        channel = grpc.insecure_channel("unix:" + sock.path, options=CHANNEL_OPTIONS)
        try:
            try:
                grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
            except grpc.FutureTimeoutError:
                return self._failed(sock, reg, f"RegisterPlugin error -- dial failed at socket "
                                                f"{sock.path}, err: context deadline exceeded")
            stub = reg_grpc.RegistrationStub(channel)
            try:
                info = stub.GetInfo(reg_pb.InfoRequest(), timeout=GET_INFO_TIMEOUT)
            except grpc.RpcError as e:
                return self._failed(sock, reg, f"RegisterPlugin error -- failed to get plugin info "
                                                f"using RPC GetInfo at socket {sock.path}, err: "
                                                f"{rpc_error_text(e)}")
            reg.info = {"type": info.type, "name": info.name, "endpoint": info.endpoint,
                        "supported_versions": list(info.supported_versions)}
            reg.endpoint = info.endpoint or sock.path
            if info.type != DRA_PLUGIN_TYPE:
                return self._failed(sock, reg, "RegisterPlugin error -- no handler registered for "
                                                f"plugin type: {info.type}", stub)
            why = self._validate(info, reg)
            if why:
                return self._failed(sock, reg, "RegisterPlugin error -- plugin validation failed "
                                                f"with err: {why}", stub)
            with self._cond:
                if sock.gone:  # deleted while we talked to it: nothing to register
                    return self._failed(sock, reg, "socket removed during registration")
                clash = [i for i in self._instances if i.registration.driver == info.name
                         and i.registration.endpoint == reg.endpoint]
                if clash:
                    why = f"endpoint {reg.endpoint} already registered for DRA driver plugin {info.name}"
                    reg.error = f"RegisterPlugin error -- plugin registration failed with err: {why}"
                else:
                    reg.accepted = True
                    sock.registration = reg
                    sock.failures = 0
                    self._instances.append(_Instance(reg))
            if not reg.accepted:
                return self._failed(sock, reg, reg.error, stub)
            self._notify(stub, reg, True, "")
            with self._cond:
                reg.finished = True
                self._event("register", info.name, socket=sock.path, endpoint=reg.endpoint,
                            service=reg.service, notified=reg.notified)
        finally:
            channel.close()

    def _validate(self, info, reg):
        """The DRA handler's ValidatePlugin; also picks the service: the first of the plugin's list
        that this kubelet speaks. Returns the error text or None."""
        if not info.supported_versions:
            return "empty list of supported gRPC services (aka supported versions)"
        chosen = next((s for s in info.supported_versions if s in self.services), None)
        if chosen is None:
            return (f"none of services supported by the plugin ({_go_list(info.supported_versions)}) "
                    f"are supported by the kubelet ({_go_list(self.services)})")
        # Stricter than the kubelet, which takes any name and dials whatever endpoint it got: a
        # driver that sends these is broken either way, and saying so here is clearer.
        if not info.name:
            return "DRA driver name is empty"
        if not os.path.isabs(reg.endpoint):
            return f"endpoint {reg.endpoint!r} is not an absolute path"
        reg.service = chosen
        return None

    def _failed(self, sock, reg, text, stub=None):
        reg.error = text
        if stub is not None:
            self._notify(stub, reg, False, text)
        with self._cond:
            sock.failures += 1
            sock.next_try = time.monotonic() + min(BACKOFF_INITIAL * 2 ** (sock.failures - 1),
                                                   self.backoff_max)
            reg.finished = True
            self._event("reject", reg.driver or "", socket=sock.path, error=text, notified=reg.notified)

    def _notify(self, stub, reg, registered, error):
        try:
            stub.NotifyRegistrationStatus(reg_pb.RegistrationStatus(plugin_registered=registered,
                                                                    error=error),
                                          timeout=NOTIFY_TIMEOUT)
            reg.notified = True
        except grpc.RpcError as e:
            reg.notified = False
            reg.notify_error = rpc_error_text(e)

    # ---- state ------------------------------------------------------------------------------------

    def _event(self, kind, driver, **data):
        ev = Event(len(self._events), time.monotonic(), kind, driver or "", data)
        self._events.append(ev)
        self._cond.notify_all()
        if self.on_event:
            try:
                self.on_event(ev)
            except Exception:
                pass
        return ev

    def registrations(self, driver=None, socket=None):
        """The registration history (every attempt), optionally of one driver or socket."""
        with self._cond:
            return [r for r in self._registrations
                    if (driver is None or r.driver == driver) and (socket is None or r.socket == socket)]

    def registered(self, driver):
        """The current registration of driver (the most recent one), or None."""
        inst = self._instance(driver)
        return inst.registration if inst else None

    def drivers(self):
        with self._cond:
            return sorted({i.registration.driver for i in self._instances})

    def _instance(self, driver):
        # The kubelet prefers the most recent connected instance; connection state is not tracked
        # here, so the most recent one it is.
        with self._cond:
            mine = [i for i in self._instances if i.registration.driver == driver]
            return mine[-1] if mine else None

    def events(self, kind=None, driver=None, since=0):
        with self._cond:
            return [e for e in self._events[since:]
                    if (kind is None or e.kind == kind) and (driver is None or e.driver == driver)]

    def scans(self):
        """How many times the directory was scanned so far."""
        with self._cond:
            return self._scans

    def mark(self):
        """The seq the next event will get (for events(since=...))."""
        with self._cond:
            return len(self._events)

    def prepared(self, driver=None):
        """{uid: devices} of the claims the last successful calls left prepared (as the kubelet's
        claim cache)."""
        with self._cond:
            return {u: list(d) for (drv, u), d in self._prepared.items() if driver in (None, drv)}

    def wait_for(self, predicate, timeout=10.0, what=None):
        """Blocks until predicate() is true (re-checked on every event and every 50 ms); returns its
        value or raises TimeoutError."""
        return wait_on(self._cond, predicate, timeout, what, "dra-kubelet-emu")

    def wait_registered(self, driver=None, timeout=10.0, since=0):
        """The current registration of driver (any driver when None) whose attempt has seq >= since
        (pass len(registrations()) taken before a restart to wait for a new one)."""
        def find():
            for r in reversed(self._registrations):
                if r.current and r.seq >= since and (driver is None or r.driver == driver):
                    return r
            return None
        return self.wait_for(find, timeout, what=f"registration of {driver or 'a DRA driver'}")

    def wait_attempt(self, socket=None, since=0, timeout=10.0):
        """The first finished registration attempt (of socket) with seq >= since."""
        def find():
            for r in self._registrations[since:]:
                if r.finished and (socket is None or r.socket == str(socket)):
                    return r
            return None
        return self.wait_for(find, timeout, what=f"a registration attempt of {socket or 'a socket'}")

    def wait_deregistered(self, driver, timeout=10.0):
        return self.wait_for(lambda: self.registered(driver) is None, timeout,
                             what=f"deregistration of {driver}")

    # ---- DRA client -------------------------------------------------------------------------------

    def prepare(self, driver, claims, version=None, timeout=None):
        """NodePrepareResources for claims (see Claim.of) on driver's current registration, over
        `version` ("v1" / "v1beta1"; None: the one chosen at registration). Returns a CallResult."""
        return self._call("NodePrepareResources", driver, claims, version, timeout)

    def unprepare(self, driver, claims, version=None, timeout=None):
        """NodeUnprepareResources, as prepare."""
        return self._call("NodeUnprepareResources", driver, claims, version, timeout)

    def _call(self, method, driver, claims, version, timeout):
        claims = [Claim.of(c) for c in claims]
        inst = self._instance(driver)
        if inst is None:
            return CallResult(method, driver, version, None, self._claim_results(claims, method), [
                f"DRA driver {driver} is not registered"], code=None)
        reg = inst.registration
        version = version or reg.version
        if version not in DRA_PROTOS:
            raise ValueError(f"version {version!r}: want one of {', '.join(DRA_PROTOS)}")
        pb = dra_pb[version][0]
        wire = [pb.Claim(namespace=c.namespace, name=c.name, uid=c.uid) for c in claims]
        request_type = pb.NodePrepareResourcesRequest if method == "NodePrepareResources" \
            else pb.NodeUnprepareResourcesRequest
        result = CallResult(method, driver, version, reg.endpoint,
                            self._claim_results(claims, method), [])
        t0 = time.monotonic()
        try:
            resp = getattr(inst.stubs[version], method)(request_type(claims=wire),
                                                       timeout=timeout or self.call_timeout)
        except grpc.RpcError as e:
            result.seconds = time.monotonic() - t0
            result.code = _code_name(e.code())
            result.errors.append(f"{method}: {rpc_error_text(e)}")
            self._record(result)
            return result
        result.seconds = time.monotonic() - t0
        result.code = "OK"
        self._judge(method, version, claims, resp, result)
        self._record(result)
        return result

    @staticmethod
    def _claim_results(claims, method):
        devices = (lambda: []) if method == "NodePrepareResources" else (lambda: None)
        return {c.uid: ClaimResult(c.uid, c.namespace, c.name, devices=devices()) for c in claims}

    @staticmethod
    def _judge(method, version, claims, resp, result):
        """The kubelet's checks of a response, all of them (the kubelet stops at the first)."""
        by_uid = {c.uid: c for c in claims}
        for c in claims:
            if c.uid not in resp.claims:
                continue
            answer = resp.claims[c.uid]
            cr = result.claims[c.uid]
            cr.answered = True
            cr.error = answer.error
            if method == "NodePrepareResources":
                cr.devices = [device_dict(d, version) for d in answer.devices]
            if answer.error:
                result.errors.append(f"{method} failed for ResourceClaim {c.name}: {answer.error}")
        for uid in sorted(set(resp.claims) - set(by_uid)):
            answer = resp.claims[uid]
            cr = result.claims[uid] = ClaimResult(uid, requested=False, answered=True, error=answer.error)
            if method == "NodePrepareResources":
                cr.devices = [device_dict(d, version) for d in answer.devices]
            result.errors.append(f"{method} returned result for unknown claim UID {uid}")
        left = sum(1 for c in by_uid if c not in resp.claims)
        if left:
            result.errors.append(f"{method} left out {left} claims")

    def _record(self, result):
        kind = "prepare" if result.method == "NodePrepareResources" else "unprepare"
        with self._cond:
            for uid, cr in result.claims.items():
                if not cr.requested or not cr.answered or cr.error:
                    continue
                if kind == "prepare":
                    self._prepared[(result.driver, uid)] = cr.devices
                else:
                    self._prepared.pop((result.driver, uid), None)
            self._event(kind, result.driver, version=result.version, ok=result.ok, error=result.error,
                        claims=list(result.claims), seconds=result.seconds)
