#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A fake Kubernetes API server for gpuplane's integration tests.

It speaks HTTPS with a CA it makes, authenticates bearer tokens and client certificates, keeps
objects in memory and serves the verbs gpuplane's API client uses the way kube-apiserver does: get,
list (label and field selectors, limit/continue, resourceVersion), create (generateName), update
(resourceVersion preconditions, 409 Conflict), JSON merge patch, delete, the status subresource, and
watches (chunked streams of events from a bounded history, bookmarks, 410 when too old).
resource.k8s.io objects are checked against the official OpenAPI document; each violation is
answered 422 and recorded, so a test can fail on any request gpuplane should not have made.

Tests drive it through hooks: objects() snapshots, put()/remove() behind the client's back,
inject() failures or hangs, the request log, expire_continues(), compact() and drop_watches().

As a script (`fakekube.py --port 0 --dir D`) it prints its URL, writes the kubeconfig variants into
D and serves until interrupted: for `make demo` and manual runs.
"""
import argparse
import base64
import copy
import datetime
import http.server
import ipaddress
import json
import os
import pathlib
import re
import secrets
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse
import uuid

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import openapi_schema  # noqa: E402
import yaml  # noqa: E402

RESOURCE_GROUP = "resource.k8s.io"
# A name the server certificate also holds and no resolver knows (.test is reserved): reached only
# through a proxy that maps it to 127.0.0.1 (the client's proxy tests).
TEST_NAME = "kube.gpuplane.test"

# (group/version, plural, kind, namespaced, has status subresource, selectable fields beyond
# metadata.name and metadata.namespace, as kube-apiserver registers them)
RESOURCES = [
    ("v1", "namespaces", "Namespace", False, True, ["status.phase"]),
    ("v1", "nodes", "Node", False, True, ["spec.unschedulable"]),
    ("v1", "pods", "Pod", True, True,
     ["spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
      "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"]),
    ("v1", "events", "Event", True, False,
     ["involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
      "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
      "reason", "reportingComponent", "source", "type"]),
    ("events.k8s.io/v1", "events", "Event", True, False, []),
    ("resource.k8s.io/v1", "deviceclasses", "DeviceClass", False, False, []),
    ("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", True, True, []),
    ("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, False, []),
    ("resource.k8s.io/v1", "resourceslices", "ResourceSlice", False, False,
     ["spec.nodeName", "spec.driver"]),
    ("nfd.k8s-sigs.io/v1alpha1", "nodefeatures", "NodeFeature", True, False, []),
]
NFD_GROUP = "nfd.k8s-sigs.io"

VERSION = {
    "major": "1", "minor": "34", "gitVersion": "v1.34.0", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z", "goVersion": "go1.24.6",
    "compiler": "gc", "platform": "linux/amd64",
}

REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"^{DNS_LABEL}(\.{DNS_LABEL})*$")
GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Resource:
    def __init__(self, gv, plural, kind, namespaced, status, fields):
        self.gv, self.plural, self.kind = gv, plural, kind
        self.namespaced, self.status = namespaced, status
        self.group = gv.split("/")[0] if "/" in gv else ""
        self.fields = ["metadata.name", "metadata.namespace"] + fields

    @property
    def qualified(self):
        """The name kube-apiserver's messages use: "resourceclaims.resource.k8s.io", "pods"."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self):
        return f"{self.kind}.{self.group}" if self.group else self.kind


class ApiError(Exception):
    """A request that ends in a Status; code, reason and message as kube-apiserver words them."""

    def __init__(self, code, message, reason=None, details=None):
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self):
        return status_object(self.code, self.message, self.reason, self.details)


def status_object(code, message, reason, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if details:
        st["details"] = details
    return st


def not_found(res, name):
    return ApiError(404, f'{res.qualified} "{name}" not found',
                    details={"name": name, "group": res.group, "kind": res.plural})


def conflict(res, name, why="the object has been modified; please apply your changes to the "
             "latest version and try again"):
    return ApiError(409, f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}',
                    details={"name": name, "group": res.group, "kind": res.plural})


def invalid(res, name, causes):
    """422 with the field causes; causes: [(field, message)]."""
    text = ", ".join(f"{f}: {m}" if f else m for f, m in causes)
    return ApiError(422, f'{res.group_kind} "{name}" is invalid: {text}',
                    details={"name": name, "group": res.group, "kind": res.kind,
                             "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f}
                                        for f, m in causes]})


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch: objects merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- selectors -------------------------------------------------------------------------------

LABEL_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[A-Za-z0-9_./-]+)")


def parse_label_selector(text):
    """A list of (key, op, values) from a labelSelector: k=v, k==v, k!=v, k in (a,b), k notin (a),
    k, !k. ApiError 400 when malformed."""
    toks, pos = [], 0
    while pos < len(text):
        m = LABEL_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ApiError(400, f"unable to parse requirement: invalid label selector: {text!r}")
        toks.append(m.group(1))
        pos = m.end()
    reqs, i = [], 0

    def bad():
        return ApiError(400, f"unable to parse requirement: invalid label selector: {text!r}")

    while i < len(toks):
        if toks[i] == "!":
            if i + 1 >= len(toks) or not re.match(r"^[A-Za-z0-9]", toks[i + 1]):
                raise bad()
            reqs.append((toks[i + 1], "!exists", []))
            i += 2
        else:
            key = toks[i]
            if not re.match(r"^[A-Za-z0-9]", key):
                raise bad()
            i += 1
            if i < len(toks) and toks[i] in ("=", "==", "!="):
                if i + 1 >= len(toks) or toks[i + 1] in (",", "(", ")", "!"):
                    # k= means "label k has the empty value"
                    reqs.append((key, "!=" if toks[i] == "!=" else "=", [""]))
                    i += 1
                else:
                    reqs.append((key, "!=" if toks[i] == "!=" else "=", [toks[i + 1]]))
                    i += 2
            elif i < len(toks) and toks[i] in ("in", "notin"):
                op = toks[i]
                i += 1
                if i >= len(toks) or toks[i] != "(":
                    raise bad()
                i += 1
                vals = []
                while i < len(toks) and toks[i] != ")":
                    if toks[i] != ",":
                        vals.append(toks[i])
                    i += 1
                if i >= len(toks):
                    raise bad()
                i += 1
                reqs.append((key, op, vals))
            else:
                reqs.append((key, "exists", []))
        if i < len(toks):
            if toks[i] != ",":
                raise bad()
            i += 1
    return reqs


def labels_match(reqs, labels):
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "exists" and not has:
            return False
        if op == "!exists" and has:
            return False
        if op == "=" and v != vals[0]:
            return False
        if op == "!=" and v == vals[0]:
            return False
        if op == "in" and (not has or v not in vals):
            return False
        if op == "notin" and has and v in vals:
            return False
    return True


def parse_field_selector(text, res):
    reqs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.match(r"^([^=!]+)(==|!=|=)(.*)$", part)
        if not m:
            raise ApiError(400, f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if field not in res.fields:
            raise ApiError(400, f'field label not supported: {field}')
        reqs.append((field, op != "!=", value))
    return reqs


def field_value(obj, field):
    cur = obj
    for part in field.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs, obj):
    return all((field_value(obj, f) == v) == eq for f, eq, v in reqs)


# --- certificates and kubeconfigs --------------------------------------------------------------

def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject_cn, key, issuer_cert, issuer_key, *, ca=False, sans=None, client=False, org=None):
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    name = x509.Name(attrs)
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(issuer_cert.subject if issuer_cert else name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else \
            x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            issuer_key.public_key()), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


class Certs:
    """A CA, a server certificate for 127.0.0.1/::1/localhost/TEST_NAME and a client certificate, as PEM files in
    dir: ca.crt, server.crt/.key, client.crt/.key (the CA key is never written)."""

    def __init__(self, directory):
        d = pathlib.Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        ca_key = _key()
        ca = _cert("gpuplane-test-ca", ca_key, None, None, ca=True)
        srv_key, cli_key = _key(), _key()
        srv = _cert("127.0.0.1", srv_key, ca, ca_key, sans=[
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1")),
            x509.DNSName("localhost"), x509.DNSName(TEST_NAME)])
        cli = _cert("gpuplane-test", cli_key, ca, ca_key, client=True, org="system:masters")
        pem = serialization.Encoding.PEM
        self.ca_pem = ca.public_bytes(pem)
        self.client_cert_pem, self.client_key_pem = cli.public_bytes(pem), _pem_key(cli_key)
        self.ca = d / "ca.crt"
        self.server_cert, self.server_key = d / "server.crt", d / "server.key"
        self.client_cert, self.client_key = d / "client.crt", d / "client.key"
        self.ca.write_bytes(self.ca_pem)
        self.server_cert.write_bytes(srv.public_bytes(pem))
        _write_private(self.server_key, _pem_key(srv_key))
        self.client_cert.write_bytes(self.client_cert_pem)
        _write_private(self.client_key, self.client_key_pem)


def _write_private(path, data):
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.replace(tmp, path)  # atomic, as a rotated projected token appears to its reader


def _kubeconfig(server, cluster, user, namespace):
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "fakekube", "cluster": dict(server=server, **cluster)}],
        "users": [{"name": "gpuplane", "user": user}],
        "contexts": [{"name": "fakekube", "context": {"cluster": "fakekube", "user": "gpuplane",
                                                      "namespace": namespace}}],
        "current-context": "fakekube",
    }


# --- the store ---------------------------------------------------------------------------------

class Store:
    """Objects by (gv, plural, namespace, name), the global resourceVersion counter and a bounded
    history of changes for watches. Every method runs under the lock (the condition's)."""

    def __init__(self, history):
        self.cond = threading.Condition(threading.RLock())
        self.objects = {}
        self.rv = 1
        self.history = []  # (rv, type, key, old, new)
        self.history_max = history
        self.compacted = 0  # events with rv <= compacted are gone

    def record(self, etype, key, old, new):
        self.history.append((self.rv, etype, key, copy.deepcopy(old), copy.deepcopy(new)))
        if len(self.history) > self.history_max:
            drop = len(self.history) - self.history_max
            self.compacted = self.history[drop - 1][0]
            del self.history[:drop]
        self.cond.notify_all()

    def next_rv(self):
        self.rv += 1
        return self.rv

    def compact(self, rv=None):
        rv = self.rv if rv is None else rv
        self.history = [h for h in self.history if h[0] > rv]
        self.compacted = max(self.compacted, rv)


class Injection:
    def __init__(self, method, path, status, count, hang, delay, message, headers, drop=False):
        self.method = re.compile(method)
        self.path = re.compile(path)
        self.status, self.count, self.hang, self.delay = status, count, hang, delay
        self.drop = drop
        self.message, self.headers = message, dict(headers or {})
        if status == 429:  # kube-apiserver's priority and fairness sends one with every 429
            self.headers.setdefault("Retry-After", "1")


class FakeKube:
    """The server. start() it (or use it as a context manager); url, the kubeconfig paths and the
    hooks are then ready. bookmark_interval: seconds between watch bookmarks; history: how many
    changes watches can resume from."""

    def __init__(self, directory, *, port=0, token=None, namespace="default", bookmark_interval=1.0,
                 history=1000, validate=True):
        self.dir = pathlib.Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port_wanted = port
        self.token = token or secrets.token_urlsafe(24)
        self.namespace = namespace
        self.bookmark_interval = bookmark_interval
        self.validate = validate
        # how a watch from a compacted resourceVersion fails: "event" (200, then an ERROR event with
        # a 410 Status, as the watch cache does) or "status" (an HTTP 410 answer, as etcd-direct)
        self.watch_expired = "event"
        self.store = Store(history)
        self.resources = [Resource(*r) for r in RESOURCES]
        self.log = []
        self.violations = []
        self._expecting = 0
        self._injections = []
        self._continues = {}
        self._watch_gen = 0
        self._stopping = False
        self._release = threading.Event()
        self._conns = set()
        self._conns_lock = threading.Lock()
        self._validators = {}
        self.server = None
        self.thread = None

    # --- lifecycle ---

    def start(self):
        self.certs = Certs(self.dir)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.certs.server_cert, self.certs.server_key)
        ctx.load_verify_locations(cafile=str(self.certs.ca))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        self.server = _Server(("127.0.0.1", self.port_wanted), _Handler, ctx, self)
        self.port = self.server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.write_configs()
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="fakekube", daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if not self.server:
            return
        with self.store.cond:
            self._stopping = True
            self.store.cond.notify_all()
        self._release.set()  # hung requests: wait no longer
        self.server.shutdown()
        self.server.server_close()
        self._close_connections()
        self.server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def write_configs(self):
        """Writes the token file, the kubeconfig variants and the service-account directory."""
        d, c = self.dir, self.certs
        self.token_file = d / "token"
        _write_private(self.token_file, self.token)
        ca_file = {"certificate-authority": str(c.ca)}
        ca_data = {"certificate-authority-data": base64.b64encode(c.ca_pem).decode()}
        variants = {
            "token": (ca_file, {"token": self.token}),
            "tokenfile": (ca_file, {"tokenFile": str(self.token_file)}),
            # relative paths: resolved against the kubeconfig's directory, as kubectl does
            "cert": ({"certificate-authority": c.ca.name},
                     {"client-certificate": c.client_cert.name, "client-key": c.client_key.name}),
            "embedded": (ca_data, {
                "client-certificate-data": base64.b64encode(c.client_cert_pem).decode(),
                "client-key-data": base64.b64encode(c.client_key_pem).decode()}),
            "embedded-token": (ca_data, {"token": self.token}),
        }
        self.kubeconfigs = {}
        for name, (cluster, user) in variants.items():
            p = d / f"kubeconfig-{name}.yaml"
            _write_private(p, yaml.safe_dump(_kubeconfig(self.url, cluster, user, self.namespace),
                                             default_flow_style=False, sort_keys=False))
            self.kubeconfigs[name] = p
        self.kubeconfig = d / "kubeconfig"
        _write_private(self.kubeconfig, self.kubeconfigs["token"].read_text())
        self.sa_dir = d / "serviceaccount"
        self.sa_dir.mkdir(exist_ok=True)
        (self.sa_dir / "ca.crt").write_bytes(c.ca_pem)
        (self.sa_dir / "namespace").write_text(self.namespace)
        _write_private(self.sa_dir / "token", self.token)

    def incluster_env(self):
        """The environment a process in a pod would see, pointing at this server."""
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port),
                "GPUPLANE_SERVICEACCOUNT_DIR": str(self.sa_dir)}

    def rotate_token(self, token=None):
        """A new accepted token (the old one stops working), written to the token file and the
        service-account token; returns it. kubeconfigs with an inline token keep the old one."""
        self.token = token or secrets.token_urlsafe(24)
        _write_private(self.token_file, self.token)
        _write_private(self.sa_dir / "token", self.token)
        return self.token

    # --- hooks ---

    def resource(self, name):
        """A Resource by plural ("resourceclaims") or plural.group ("events.events.k8s.io")."""
        for r in self.resources:
            if name in (r.plural, r.qualified):
                return r
        raise KeyError(name)

    def objects(self, resource, namespace=None):
        """A snapshot (deep copies) of the stored objects of a resource, sorted by namespace, name."""
        res = self.resource(resource)
        with self.store.cond:
            return [copy.deepcopy(o) for k, o in sorted(self.store.objects.items())
                    if k[:2] == (res.gv, res.plural) and (namespace is None or k[2] == namespace)]

    def _key(self, res, name, namespace):
        ns = (namespace or "default") if res.namespaced else ""
        return (res.gv, res.plural, ns, name)

    def get(self, resource, name, namespace=None):
        """A copy of one object (namespace None: "default" for namespaced resources), or None."""
        res = self.resource(resource)
        with self.store.cond:
            o = self.store.objects.get(self._key(res, name, namespace))
            return copy.deepcopy(o)

    def put(self, obj):
        """Creates or replaces obj behind the client's back (no validation, no preconditions): fills
        in apiVersion/kind defaults, uid, creationTimestamp, bumps resourceVersion. Returns the
        stored object."""
        obj = copy.deepcopy(obj)
        res = self._resource_of(obj)
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "") if res.namespaced else ""
        if res.namespaced and not ns:
            ns = meta["namespace"] = "default"
        key = self._key(res, meta["name"], ns)
        with self.store.cond:
            old = self.store.objects.get(key)
            if old:
                meta.setdefault("uid", old["metadata"]["uid"])
                meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
                meta.setdefault("generation", old["metadata"].get("generation", 1))
            self._stamp_new(meta)
            meta["resourceVersion"] = str(self.store.next_rv())
            self.store.objects[key] = obj
            self.store.record("MODIFIED" if old else "ADDED", key, old, obj)
            return copy.deepcopy(obj)

    def remove(self, resource, name, namespace=None):
        """Deletes an object behind the client's back (finalizers ignored); returns it or None."""
        res = self.resource(resource)
        with self.store.cond:
            key = self._key(res, name, namespace)
            old = self.store.objects.pop(key, None)
            if old:
                gone = copy.deepcopy(old)
                gone["metadata"]["resourceVersion"] = str(self.store.next_rv())
                self.store.record("DELETED", key, old, gone)
            return old

    delete = remove

    def inject(self, method=".*", path=".*", status=500, count=1, hang=False, delay=0.0, message=None,
               headers=None, drop=False):
        """The next count requests whose method and path (without query) match the regexes (full
        match) answer status with a Status body (status=None: served normally after delay seconds);
        hang=True holds them without an answer until release() or stop(), then closes the
        connection. drop=True closes the connection at once without an answer, as a server does that
        times out an idle keep-alive connection just as a request arrives on it. headers: extra
        response headers (e.g. {"Retry-After": "1"})."""
        inj = Injection(method, path, status, count, hang, delay, message, headers, drop)
        with self.store.cond:
            self._injections.append(inj)
        return inj

    def release(self):
        """Lets hung requests go (their connections close without an answer); later injected hangs
        hang again."""
        with self.store.cond:
            ev, self._release = self._release, threading.Event()
        ev.set()

    def requests(self, method=None, path=None):
        """The request log: dicts with method, path, query (dict of lists), status, headers (without
        Authorization), watch (bool); filtered by method and path regex (search)."""
        with self.store.cond:
            return [dict(r) for r in self.log if (method is None or r["method"] == method)
                    and (path is None or re.search(path, r["path"]))]

    def expire_continues(self):
        """Every continue token handed out so far now answers 410 Expired."""
        with self.store.cond:
            self._continues.clear()

    def compact(self, rv=None):
        """Forgets history up to rv (default: now): watches and lists from an older resourceVersion
        get 410, as after an etcd compaction."""
        with self.store.cond:
            self.store.compact(rv)
            for snap_id, snap in list(self._continues.items()):
                if snap[0] < self.store.compacted:
                    del self._continues[snap_id]

    def drop_watches(self, clean=False):
        """Cuts every open watch: clean=True ends the chunked stream properly, else the TCP
        connection is shut down mid-stream (an API server restart)."""
        with self.store.cond:
            self._watch_gen += 1
            self._drop_clean = clean
            self.store.cond.notify_all()

    def wait_for(self, predicate, timeout=10.0, what="the condition"):
        """Polls predicate() (without the store's lock held) until it returns something true, waking
        on every change and logged request; returns that value. AssertionError after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"fakekube: {what} did not happen within {timeout} s")
            with self.store.cond:
                self.store.cond.wait(min(left, 0.05))

    def watch_count(self):
        with self._conns_lock:
            return sum(1 for c in self._conns if c.watching)

    def expect_invalid(self):
        """Context manager: 422s inside it are expected (not reported at teardown); at least one
        must happen."""
        return _Expect(self)

    def unexpected_violations(self):
        with self.store.cond:
            return [v for v in self.violations if not v["expected"]]

    @property
    def resource_version(self):
        with self.store.cond:
            return self.store.rv

    # --- internals ---

    def _resource_of(self, obj):
        for r in self.resources:
            if r.gv == obj.get("apiVersion") and r.kind == obj.get("kind"):
                return r
        raise KeyError(f"{obj.get('apiVersion')} {obj.get('kind')} is not served")

    def _stamp_new(self, meta):
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        meta.setdefault("generation", 1)

    def _close_connections(self):
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            c.cut()

    def _validate(self, res, obj):
        """Checks obj: 422 when its name is malformed or the schema rejects it."""
        causes = []
        name = obj.get("metadata", {}).get("name", "")
        if name and (len(name) > 253 or not DNS_SUBDOMAIN.match(name)):
            causes.append(("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 subdomain '
                           "must consist of lower case alphanumeric characters, '-' or '.', and must "
                           "start and end with an alphanumeric character"))
        v = None
        if self.validate and res.group == RESOURCE_GROUP:
            v = self._validators.get(res.kind)
            if v is None:
                v = self._validators[res.kind] = openapi_schema.validator(
                    openapi_schema.load_components(), res.kind)
        elif self.validate and res.group == NFD_GROUP:
            v = openapi_schema.crd_validator(res.group, res.gv.split("/")[1], res.kind)
        if v is not None:
            errors = sorted(v.iter_errors(obj), key=lambda e: list(e.absolute_path))
            for e in errors:
                path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in e.absolute_path)
                causes.append((path.replace(".[", "["), e.message))
        if causes:
            raise invalid(res, name, causes)

    def _record_violation(self, method, path, err):
        with self.store.cond:
            self.violations.append({"method": method, "path": path, "message": err.message,
                                    "causes": (err.details or {}).get("causes", []),
                                    "expected": self._expecting > 0})

    def _take_injection(self, method, path):
        with self.store.cond:
            for inj in self._injections:
                if inj.count > 0 and inj.method.fullmatch(method) and inj.path.fullmatch(path):
                    inj.count -= 1
                    return inj
        return None


class _Expect:
    def __init__(self, fk):
        self.fk = fk

    def __enter__(self):
        with self.fk.store.cond:
            self.fk._expecting += 1
            self.before = len(self.fk.violations)
        return self

    def __exit__(self, exc_type, *rest):
        with self.fk.store.cond:
            self.fk._expecting -= 1
            got = len(self.fk.violations) - self.before
        if exc_type is None and got == 0:
            raise AssertionError("expected a 422 Invalid, none happened")


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops the SYNs of a burst of new connections (a client
    # opening 8 at once), which the client only retries after a second.
    request_queue_size = 128

    def __init__(self, addr, handler, ctx, fk):
        self.ctx, self.fk = ctx, fk
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, in the connection's thread, so a slow client stalls no other.
        try:
            request.settimeout(30)
            # headers and body go out in separate writes: without this, Nagle's algorithm and the
            # client's delayed ACK add 40 ms to every answer
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.ctx.wrap_socket(request, server_side=True)
            tls.settimeout(None)
        except (ssl.SSLError, OSError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass  # a client that went away is not a failure of the server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakekube"
    sys_version = ""
    watching = False

    def setup(self):
        super().setup()
        self.fk = self.server.fk
        with self.fk._conns_lock:
            self.fk._conns.add(self)

    def finish(self):
        with self.fk._conns_lock:
            self.fk._conns.discard(self)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, fmt, *args):
        pass

    def cut(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_PUT(self):
        self._serve("PUT")

    def do_PATCH(self):
        self._serve("PATCH")

    def do_DELETE(self):
        self._serve("DELETE")

    # --- plumbing ---

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, code, body, ctype="application/json", headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self._log(*self._req, code, False)  # before the answer: a test reading the log after it sees it
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _log(self, method, path, query, status, watch):
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        with self.fk.store.cond:
            self.fk.log.append({"method": method, "path": path, "query": query, "status": status,
                                "headers": headers, "watch": watch, "time": time.time(),
                                "peer": self.client_address[1]})
            self.fk.store.cond.notify_all()

    def _authenticated(self):
        auth = self.headers.get("Authorization")
        if auth is not None:
            m = re.match(r"^Bearer\s+(\S+)\s*$", auth)
            if m and secrets.compare_digest(m.group(1), self.fk.token):
                return True
        return bool(self.connection.getpeercert())

    def _serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query, keep_blank_values=True)
        self._req = (method, path, query)
        inj = None
        try:
            body = self._read_body()
            if path not in ("/healthz", "/livez", "/readyz", "/version") and not self._authenticated():
                raise ApiError(401, "Unauthorized")
            inj = self.fk._take_injection(method, path)
            if inj:
                if inj.drop:
                    self._log(method, path, query, None, False)
                    self.close_connection = True
                    self.cut()
                    return
                if inj.hang:
                    self._log(method, path, query, None, False)
                    with self.fk.store.cond:
                        ev = self.fk._release
                    if not self.fk._stopping:
                        ev.wait()
                    self.close_connection = True
                    self.cut()
                    return
                if inj.delay:
                    time.sleep(inj.delay)
                if inj.status is not None:
                    raise ApiError(inj.status, inj.message or f"injected {inj.status}",
                                   details={"retryAfterSeconds": 1} if inj.status == 429 else None)
            handled = self._route(method, path, query, body)
            if not handled:
                raise ApiError(404, "the server could not find the requested resource")
        except ApiError as e:
            if e.code == 422 and not inj:
                self.fk._record_violation(method, path, e)
            try:
                self._send(e.code, e.status(), headers=inj.headers if inj else None)
            except (OSError, ssl.SSLError):
                self.close_connection = True
                return
        except (OSError, ssl.SSLError):
            self.close_connection = True

    # --- routing ---

    def _route(self, method, path, query, body):
        fk = self.fk
        if path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return True
        if method == "GET" and path == "/version":
            self._send(200, VERSION)
            return True
        if method == "GET" and path in ("/api", "/api/"):
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{fk.port}"}]})
            return True
        groups = {}
        for r in fk.resources:
            if r.group:
                groups.setdefault(r.group, []).append(r.gv)
        if method == "GET" and path in ("/apis", "/apis/"):
            self._send(200, {"kind": "APIGroupList", "apiVersion": "v1",
                             "groups": [self._group(g, gvs) for g, gvs in groups.items()]})
            return True
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups and method == "GET":
            self._send(200, dict(kind="APIGroup", apiVersion="v1", **self._group(parts[1], groups[parts[1]])))
            return True
        if parts[:2] == ["api", "v1"]:
            gv, rest = "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return False
        served = [r for r in fk.resources if r.gv == gv]
        if not served:
            return False
        if not rest:
            if method != "GET":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            self._send(200, self._resource_list(gv, served))
            return True
        watch = query.get("watch", [""])[-1] in ("true", "1")
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces" and any(r.plural == rest[2] and r.namespaced
                                                             for r in served):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return False
        res = next((r for r in served if r.plural == rest[0]), None)
        if res is None or (ns is not None and not res.namespaced):
            return False
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub is not None and (sub != "status" or not res.status):
            return False
        if res.namespaced and ns is None and name is not None:
            return False
        ns_key = ns or ""
        if method == "GET" and watch:
            self._watch(res, ns, name, query)
            return True
        if name is None:
            if method == "GET":
                self._send(200, self._list(res, ns, query))
            elif method == "POST":
                if not res.namespaced or ns is not None:
                    self._send(201, self._create(res, ns_key, self._object(body)))
                else:
                    raise ApiError(405, "the server does not allow this method on the requested resource")
            elif method == "DELETE":
                self._send(200, self._delete_collection(res, ns, query))
            else:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            return True
        if method == "GET":
            with fk.store.cond:
                obj = fk.store.objects.get((res.gv, res.plural, ns_key, name))
                if obj is None:
                    raise not_found(res, name)
                self._send(200, obj)
        elif method == "PUT":
            self._send(200, self._update(res, ns_key, name, self._object(body), sub))
        elif method == "PATCH":
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
            if ctype != "application/merge-patch+json":
                raise ApiError(415, "the body of the request was in an unknown format - accepted media "
                               "types include: application/merge-patch+json")
            self._send(200, self._patch(res, ns_key, name, self._json(body), sub))
        elif method == "DELETE":
            self._send(200, self._delete(res, ns_key, name, self._json(body) if body else {}))
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        return True

    @staticmethod
    def _group(group, gvs):
        versions = [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in dict.fromkeys(gvs)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    @staticmethod
    def _resource_list(gv, served):
        out = []
        for r in served:
            out.append({"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": ["create", "delete", "deletecollection", "get", "list",
                                                  "patch", "update", "watch"]})
            if r.status:
                out.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                            "kind": r.kind, "verbs": ["get", "patch", "update"]})
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}

    def _object(self, body):
        """The body of a create or update: JSON (also when no Content-Type is given, as
        kube-apiserver assumes) or YAML; anything else is 415, as a client that forgot the header
        (curl then sends a form type) gets from the real server."""
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/yaml":
            try:
                obj = yaml.safe_load(body)
            except yaml.YAMLError as e:
                raise ApiError(400, f"couldn't get version/kind; yaml parse error: {e}")
            return self._json(json.dumps(obj).encode())
        if ctype not in ("", "application/json"):
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types "
                           "include: application/json, application/yaml, "
                           "application/vnd.kubernetes.protobuf")
        return self._json(body)

    @staticmethod
    def _json(body):
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise ApiError(400, f"couldn't get version/kind; json parse error: {e}")
        if not isinstance(obj, dict):
            raise ApiError(400, "the request body must be a JSON object")
        return obj

    # --- verbs ---

    def _matcher(self, res, ns, name, query):
        labels = parse_label_selector(query.get("labelSelector", [""])[-1])
        fields = parse_field_selector(query.get("fieldSelector", [""])[-1], res)
        if name is not None:
            fields.append(("metadata.name", True, name))

        def match(key, obj):
            if key[:2] != (res.gv, res.plural) or (ns is not None and key[2] != ns):
                return False
            return labels_match(labels, obj.get("metadata", {}).get("labels") or {}) and \
                fields_match(fields, obj)
        return match

    def _list_state(self, query, limit):
        """The resourceVersion and objects a list reads, after kube-apiserver's resourceVersion rules:
        unset or "0" the current state; N with resourceVersionMatch=Exact (or, as the legacy rule,
        with a limit and no match) the state at N, 410 once compacted; N with NotOlderThan the
        current state. N beyond the current version answers 504 (the real server waits 3 s first)."""
        store = self.fk.store
        rv = query.get("resourceVersion", [""])[-1]
        how = query.get("resourceVersionMatch", [""])[-1]
        if how not in ("", "Exact", "NotOlderThan"):
            raise ApiError(400, f'resourceVersionMatch: Unsupported value: "{how}"')
        if rv in ("", "0"):
            if how == "Exact" or (how and rv == ""):
                raise ApiError(400, "resourceVersionMatch is forbidden unless resourceVersion is provided"
                               if rv == "" else "resourceVersionMatch \"Exact\" is forbidden for "
                               "resourceVersion \"0\"")
            return store.rv, store.objects
        try:
            n = int(rv)
        except ValueError:
            raise ApiError(400, f'invalid resource version: "{rv}"')
        if n > store.rv:
            raise ApiError(504, f"Too large resource version: {n}, current: {store.rv}", reason="Timeout",
                           details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                "message": "Too large resource version"}],
                                    "retryAfterSeconds": 1})
        if not (how == "Exact" or (how == "" and limit > 0)):
            return store.rv, store.objects
        if n < store.compacted:
            raise ApiError(410, "The resourceVersion for the provided list is too old.", reason="Expired")
        objs = dict(store.objects)
        for hrv, _, key, old, _ in reversed(store.history):  # undo what happened after n
            if hrv <= n:
                break
            if old is None:
                objs.pop(key, None)
            else:
                objs[key] = old
        return n, objs

    def _list(self, res, ns, query):
        fk = self.fk
        try:
            limit = int(query.get("limit", ["0"])[-1] or 0)
        except ValueError:
            raise ApiError(400, "invalid limit")
        cont = query.get("continue", [""])[-1]
        # A paged list reads one snapshot, taken by its first page; a continue token names the
        # snapshot and an offset into it, so the same token (a retry) gives the same page.
        with fk.store.cond:
            if cont:
                try:
                    pos = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
                    snap_id, start = pos["id"], int(pos["start"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "continue key is not valid: incorrect encoded start "
                                   "resourceVersion (version meta.k8s.io/v1)")
                snap = fk._continues.get(snap_id)
                if snap is None:
                    raise ApiError(410, "The provided continue parameter is too old to display a consistent "
                                   "list result. You can start a new list without the continue "
                                   "parameter.", reason="Expired")
                rv, everything = snap
            else:
                match = self._matcher(res, ns, None, query)
                rv, objs = self._list_state(query, limit)
                everything = [o for k, o in sorted(objs.items()) if match(k, o)]
                snap_id, start = secrets.token_hex(8), 0
            end = start + limit if limit > 0 else len(everything)
            items = [copy.deepcopy(o) for o in everything[start:end]]
            meta = {"resourceVersion": str(rv)}
            if end < len(everything):
                fk._continues[snap_id] = (rv, everything)  # stored objects are never changed in place
                meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                    {"rv": rv, "id": snap_id, "start": end}).encode()).decode().rstrip("=")
                meta["remainingItemCount"] = len(everything) - end
        for o in items:
            o.pop("apiVersion", None)
            o.pop("kind", None)
        return {"kind": f"{res.kind}List", "apiVersion": res.gv, "metadata": meta, "items": items}

    def _check_kind(self, res, obj):
        if obj.get("apiVersion") not in (None, res.gv) or obj.get("kind") not in (None, res.kind):
            raise ApiError(400, f"the API version in the data ({obj.get('apiVersion')}) does not match "
                           f"the expected API version ({res.gv})" if obj.get("apiVersion") != res.gv else
                           f"the kind in the data ({obj.get('kind')}) does not match {res.kind}")
        obj["apiVersion"], obj["kind"] = res.gv, res.kind

    def _create(self, res, ns, obj):
        fk = self.fk
        self._check_kind(res, obj)
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise ApiError(400, "the namespace of the provided object does not match the namespace "
                               "sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        for k in ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp"):
            meta.pop(k, None)
        if res.status:
            obj.pop("status", None)  # status is written through the subresource only
        with fk.store.cond:
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise invalid(res, "", [("metadata.name",
                                             "Required value: name or generateName is required")])
                for _ in range(100):
                    name = meta["generateName"] + "".join(secrets.choice(GENERATE_ALPHABET)
                                                          for _ in range(5))
                    if (res.gv, res.plural, ns, name) not in fk.store.objects:
                        break
                meta["name"] = name
            key = (res.gv, res.plural, ns, meta["name"])
            fk._stamp_new(meta)
            fk._validate(res, obj)
            if key in fk.store.objects:
                raise ApiError(409, f'{res.qualified} "{meta["name"]}" already exists',
                               reason="AlreadyExists",
                               details={"name": meta["name"], "group": res.group, "kind": res.plural})
            meta["resourceVersion"] = str(fk.store.next_rv())
            fk.store.objects[key] = obj
            fk.store.record("ADDED", key, None, obj)
            return obj

    def _store_update(self, res, key, old, new, sub):
        """Applies an update (PUT or the result of a PATCH) of old to new, kube-apiserver's way."""
        fk = self.fk
        self._check_kind(res, new)
        meta = new.setdefault("metadata", {})
        name = key[3]
        if meta.get("name", name) != name:
            raise ApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on "
                           f"the URL ({name})")
        meta["name"] = name
        if res.namespaced:
            if meta.get("namespace") not in (None, "", key[2]):
                raise ApiError(400, "the namespace of the provided object does not match the namespace "
                               "sent on the request")
            meta["namespace"] = key[2]
        if meta.get("uid") not in (None, old["metadata"]["uid"]):
            raise conflict(res, name, f"Precondition failed: UID in precondition: {meta['uid']}, UID in "
                           f"object meta: {old['metadata']['uid']}")
        for k in ("uid", "creationTimestamp", "deletionTimestamp"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
            else:
                meta.pop(k, None)
        if res.status:
            if sub == "status":
                # the status subresource changes status only (and nothing of metadata but the version)
                keep = {k: v for k, v in new.items() if k == "status"}
                rv = meta.get("resourceVersion")
                new = copy.deepcopy(old)
                new.pop("status", None)
                new.update(keep)
                meta = new["metadata"]
                if rv is None:
                    meta.pop("resourceVersion", None)
                else:
                    meta["resourceVersion"] = rv
            elif "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        spec_changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != \
            {k: v for k, v in old.items() if k not in ("metadata", "status")}
        meta["generation"] = old["metadata"].get("generation", 1) + (1 if spec_changed else 0)
        fk._validate(res, new)
        meta["resourceVersion"] = str(fk.store.next_rv())
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            fk.store.objects.pop(key)
            fk.store.record("DELETED", key, old, new)
        else:
            fk.store.objects[key] = new
            fk.store.record("MODIFIED", key, old, new)
        return new

    def _update(self, res, ns, name, obj, sub):
        fk = self.fk
        with fk.store.cond:
            key = (res.gv, res.plural, ns, name)
            old = fk.store.objects.get(key)
            if old is None:
                raise not_found(res, name)
            rv = obj.get("metadata", {}).get("resourceVersion")
            if not rv:
                raise invalid(res, name, [("metadata.resourceVersion",
                                           "Invalid value: 0x0: must be specified for an update")])
            if rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            return self._store_update(res, key, old, obj, sub)

    def _patch(self, res, ns, name, patch, sub):
        fk = self.fk
        with fk.store.cond:
            key = (res.gv, res.plural, ns, name)
            old = fk.store.objects.get(key)
            if old is None:
                raise not_found(res, name)
            rv = (patch.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            new = merge_patch(old, patch)
            if not isinstance(new.get("metadata"), dict):
                raise ApiError(400, "metadata must be an object")
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return self._store_update(res, key, old, new, sub)

    def _delete(self, res, ns, name, opts):
        fk = self.fk
        with fk.store.cond:
            key = (res.gv, res.plural, ns, name)
            old = fk.store.objects.get(key)
            if old is None:
                raise not_found(res, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(res, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID "
                               f"in object meta: {old['metadata']['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(res, name, "Precondition failed: ResourceVersion in precondition: "
                               f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                               f"{old['metadata']['resourceVersion']}")
            if old["metadata"].get("finalizers") and old["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(old)  # being deleted already: waits for its finalizers
            new = copy.deepcopy(old)
            new["metadata"]["resourceVersion"] = str(fk.store.next_rv())
            if old["metadata"].get("finalizers"):
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                fk.store.objects[key] = new
                fk.store.record("MODIFIED", key, old, new)
                return new
            del fk.store.objects[key]
            fk.store.record("DELETED", key, old, new)
            return new

    def _delete_collection(self, res, ns, query):
        fk = self.fk
        with fk.store.cond:
            match = self._matcher(res, ns, None, query)
            gone = []
            for key, obj in sorted(fk.store.objects.items()):
                if match(key, obj):
                    gone.append(self._delete(res, key[2], key[3], {}))
        return {"kind": f"{res.kind}List", "apiVersion": res.gv,
                "metadata": {"resourceVersion": str(fk.store.rv)}, "items": gone}

    # --- watch ---

    def _chunk(self, event):
        data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, res, ns, name, query):
        fk, store = self.fk, self.fk.store
        match = self._matcher(res, ns, name, query)
        bookmarks = query.get("allowWatchBookmarks", [""])[-1] in ("true", "1")
        try:
            timeout = float(query.get("timeoutSeconds", ["0"])[-1] or 0)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds")
        rv_param = query.get("resourceVersion", [""])[-1]
        with store.cond:
            gen = fk._watch_gen
            initial = []
            too_old = None
            if rv_param in ("", "0"):
                cursor = store.rv
                initial = [copy.deepcopy(o) for k, o in sorted(store.objects.items()) if match(k, o)]
            else:
                try:
                    cursor = int(rv_param)
                except ValueError:
                    raise ApiError(400, f'invalid resource version: "{rv_param}"')
                if cursor < store.compacted:
                    too_old = f"too old resource version: {cursor} ({store.compacted + 1})"
                    if fk.watch_expired == "status":
                        raise ApiError(410, too_old, reason="Expired")
        self._log(*self._req, 200, True)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.watching = True
        try:
            if too_old:
                self._chunk({"type": "ERROR", "object": status_object(410, too_old, "Expired")})
                self._end_chunks()
                return
            for o in initial:
                self._chunk({"type": "ADDED", "object": o})
            start = time.monotonic()
            last_bookmark = start
            while True:
                with store.cond:
                    events, cursor, err = self._pending(res, match, cursor)
                    if not events and not err:
                        waits = [0.5]
                        if bookmarks:
                            waits.append(last_bookmark + fk.bookmark_interval - time.monotonic())
                        if timeout:
                            waits.append(start + timeout - time.monotonic())
                        if fk._watch_gen == gen and not fk._stopping:
                            store.cond.wait(max(0.0, min(waits)))
                        events, cursor, err = self._pending(res, match, cursor)
                    dropped = fk._watch_gen != gen or fk._stopping
                    clean = getattr(fk, "_drop_clean", False) and not fk._stopping
                    current = store.rv
                for e in events:
                    self._chunk(e)
                if err:
                    self._chunk({"type": "ERROR", "object": status_object(410, err, "Expired")})
                    self._end_chunks()
                    return
                if dropped:
                    if clean:
                        self._end_chunks()
                    else:
                        self.close_connection = True
                        self.cut()
                    return
                now = time.monotonic()
                if timeout and now >= start + timeout:
                    self._end_chunks()
                    return
                if bookmarks and now >= last_bookmark + fk.bookmark_interval:
                    self._chunk({"type": "BOOKMARK", "object": {
                        "kind": res.kind, "apiVersion": res.gv,
                        "metadata": {"resourceVersion": str(max(current, cursor))}}})
                    last_bookmark = now
        except (OSError, ssl.SSLError):
            self.close_connection = True
        finally:
            self.watching = False

    def _end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True  # one watch per connection, as a client expects

    def _pending(self, res, match, cursor):
        """The events after cursor for this watch, the new cursor, and an error when history no
        longer reaches back to cursor."""
        store = self.fk.store
        if cursor < store.compacted:
            return [], cursor, f"too old resource version: {cursor} ({store.compacted + 1})"
        out = []
        for rv, etype, key, old, new in store.history:
            if rv <= cursor:
                continue
            cursor = rv
            was = old is not None and match(key, old)
            now = new is not None and etype != "DELETED" and match(key, new)
            if etype == "DELETED":
                if match(key, old):
                    out.append({"type": "DELETED", "object": new})
            elif was and now:
                out.append({"type": "MODIFIED", "object": new})
            elif now:
                out.append({"type": "ADDED", "object": new})
            elif was:
                gone = copy.deepcopy(old)
                gone["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"]
                out.append({"type": "DELETED", "object": gone})
        return out, max(cursor, store.rv), None


def main(argv=None):
    ap = argparse.ArgumentParser(description="A fake Kubernetes API server for gpuplane's tests.")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    ap.add_argument("--dir", required=True, help="where certificates and kubeconfigs are written")
    ap.add_argument("--token", help="the bearer token to accept (default: a random one)")
    ap.add_argument("--namespace", default="default", help="the kubeconfig's and service account's namespace")
    ap.add_argument("--bookmark-interval", type=float, default=10.0, help="seconds between watch bookmarks")
    ap.add_argument("--load", action="append", default=[], help="YAML or JSON file of objects to store")
    ap.add_argument("--no-validate", action="store_true",
                    help="accept resource.k8s.io objects the schema rejects")
    args = ap.parse_args(argv)
    fk = FakeKube(args.dir, port=args.port, token=args.token, namespace=args.namespace,
                  bookmark_interval=args.bookmark_interval, validate=not args.no_validate)
    fk.start()
    for f in args.load:
        for obj in yaml.safe_load_all(pathlib.Path(f).read_text()):
            if obj:
                fk.put(obj)
    print(fk.url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    fk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
