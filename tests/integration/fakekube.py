#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A fake Kubernetes API server for gpuplane's integration tests.

It speaks HTTPS with a CA it makes, authenticates bearer tokens and client certificates (and, for
service-account tokens it hands out, authorizes requests with the stored RBAC objects), keeps
objects in memory and serves the verbs gpuplane's API client uses the way kube-apiserver does: get,
list (label and field selectors, limit/continue, resourceVersion), create (generateName), update
(resourceVersion preconditions, 409 Conflict), JSON merge patch, strategic merge patch (built-in
kinds), delete (finalizers, preconditions, propagationPolicy), the status subresource, and watches
(chunked streams of events from a bounded history, bookmarks, 410 when too old). A write that
changes nothing stores nothing (no new resourceVersion, no event), as etcd's guaranteed update.

Served: core/v1 namespaces, nodes, pods, events, serviceaccounts, configmaps, services;
events.k8s.io/v1 events; apps/v1 daemonsets, deployments (stored, not run);
rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles, clusterrolebindings;
node.k8s.io/v1 runtimeclasses; coordination.k8s.io/v1 leases;
apiextensions.k8s.io/v1 customresourcedefinitions; resource.k8s.io/v1; nfd.k8s-sigs.io NodeFeatures;
and every custom resource a stored CRD defines (served as soon as it is created). Built-in objects
are checked against the official OpenAPI documents (strictly: an unknown field is an error) plus
kube-apiserver's own rules that matter to a controller (names, labels, immutable fields, a
DaemonSet's selector); custom resources are pruned, defaulted and validated with their CRD's
structural schema (crdschema.py). Each rejection is answered 422 and recorded, so a test can fail on
any request gpuplane should not have made. A subset of the built-in defaults is applied (DaemonSet
update strategy and pod template, Service ports and cluster IP, Namespace finalizer and label).
docs/testing.md describes all of it, and what differs from the real server.

Controllers, run in a background thread as kube-controller-manager would: the garbage collector
(owner references: a dependent whose every owner is gone is deleted, with finalizers honoured;
propagationPolicy Orphan strips the references instead), namespace and CRD termination, and a
DaemonSet controller emulator that schedules a DaemonSet's pods onto the nodes its node selector,
required node affinity and tolerations admit and keeps its status as the real controller does, with
pods becoming available when the test says.

Test hooks (a FakeKube instance `fk`):
  objects(), get(), put(), remove(), create(), apply(), patch() — read and change the store (put and
      remove bypass validation; create, apply and patch go through it, as a client would);
  apply_crd(path_or_obj) — create CRDs (YAML file, list or dict); their resources are served at once;
  add_node(name, labels, allocatable, taints=...), label_node(), taint_node(), remove_node();
  daemonset_available(daemonset, after=0.0 | NEVER, nodes=None) — when pods become available;
  pause_daemonsets(), resume_daemonsets(), delete_daemonset_pods(); daemonset_pods (emulate Pods);
  writes(since=t, verb=, resource=), write_counts(since=t) — the client's write requests, timestamped;
  changes(since=rv, type=, resource=) — every change of the store, in order (creation order);
  events_for(kind, name) — the Events about an object;
  service_account(name, namespace) — a token held to the stored RBAC objects (403, escalation checks);
  restart(keep_state=True, down=0.0), expire_watches(), drop_watches(), compact(), expire_continues();
  inject(method, path, status, count (None: until cleared), hang, delay, drop), clear_injections();
  requests(), wait_for(), watch_count(), expect_invalid(), violations, warnings.

As a script (`fakekube.py --port 0 --dir D`) it prints its URL, writes the kubeconfig variants into
D and serves until interrupted: for `make demo` and manual runs (--apply, --load, --node,
--daemonsets-available-after).
"""
import argparse
import base64
import copy
import datetime
import fnmatch
import hashlib
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
import crdschema  # noqa: E402
import jsonschema  # noqa: E402
import openapi_schema  # noqa: E402
import yaml  # noqa: E402

RESOURCE_GROUP = "resource.k8s.io"
# A name the server certificate also holds and no resolver knows (.test is reserved): reached only
# through a proxy that maps it to 127.0.0.1 (the client's proxy tests).
TEST_NAME = "kube.gpuplane.test"
# daemonset_available(after=NEVER): the pods never become available
NEVER = None

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
    ("v1", "serviceaccounts", "ServiceAccount", True, False, []),
    ("v1", "configmaps", "ConfigMap", True, False, []),
    ("v1", "services", "Service", True, True, ["spec.clusterIP", "spec.type"]),
    ("events.k8s.io/v1", "events", "Event", True, False, []),
    ("apps/v1", "daemonsets", "DaemonSet", True, True, []),
    ("apps/v1", "deployments", "Deployment", True, True, []),
    ("rbac.authorization.k8s.io/v1", "roles", "Role", True, False, []),
    ("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True, False, []),
    ("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False, False, []),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False, False, []),
    ("node.k8s.io/v1", "runtimeclasses", "RuntimeClass", False, False, []),
    ("coordination.k8s.io/v1", "leases", "Lease", True, False, []),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False, True,
     []),
    ("resource.k8s.io/v1", "deviceclasses", "DeviceClass", False, False, []),
    ("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", True, True, []),
    ("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, False, []),
    ("resource.k8s.io/v1", "resourceslices", "ResourceSlice", False, False,
     ["spec.nodeName", "spec.driver"]),
    ("nfd.k8s-sigs.io/v1alpha1", "nodefeatures", "NodeFeature", True, False, []),
]
NFD_GROUP = "nfd.k8s-sigs.io"
CRD_GV = "apiextensions.k8s.io/v1"
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
# Built-in kinds checked against the reference OpenAPI documents (openapi_schema.api_validator).
# events.k8s.io/v1 has no document there and is not checked.
API_VALIDATED = ("v1", "apps/v1", "rbac.authorization.k8s.io/v1", "node.k8s.io/v1",
                 "coordination.k8s.io/v1", CRD_GV)
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
# metav1.MicroTime fields: Go parses them with exactly six fractional digits, and the request fails
# to decode (400) otherwise
MICRO_TIMES = {
    ("coordination.k8s.io/v1", "leases"): (("spec", "acquireTime"), ("spec", "renewTime")),
    ("v1", "events"): (("eventTime",), ("series", "lastObservedTime")),
    ("events.k8s.io/v1", "events"): (("eventTime",), ("series", "lastObservedTime")),
}
MICRO_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")

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
DNS_LABEL_RE = re.compile(rf"^{DNS_LABEL}$")
DNS1035_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# how each resource's names are checked (kube-apiserver's ValidateObjectMeta name functions)
NAME_RULES = {"namespaces": "label", "services": "label1035", "roles": "path", "rolebindings": "path",
              "clusterroles": "path", "clusterrolebindings": "path"}


class Resource:
    def __init__(self, gv, plural, kind, namespaced, status, fields):
        self.gv, self.plural, self.kind = gv, plural, kind
        self.namespaced, self.status = namespaced, status
        self.group = gv.split("/")[0] if "/" in gv else ""
        self.version = gv.split("/")[-1]
        self.fields = ["metadata.name", "metadata.namespace"] + fields
        # custom resources: the CRD's name, the version's schema, the storage version objects are
        # kept under (all served versions share it: conversion strategy None)
        self.crd = None
        self.schema = None
        self.store_gv = gv
        self.short_names, self.categories = [], []
        self.singular = kind.lower()

    @property
    def custom(self):
        return self.crd is not None

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
    if len(causes) > 1:
        text = f"[{text}]"  # as an aggregate of field errors prints
    return ApiError(422, f'{res.group_kind} "{name}" is invalid: {text}',
                    details={"name": name, "group": res.group, "kind": res.kind,
                             "causes": [{"reason": _cause_reason(m), "message": m, "field": f}
                                        for f, m in causes]})


DATE_TIME_CHECKER = jsonschema.FormatChecker(formats=())


@DATE_TIME_CHECKER.checks("date-time")
def _is_date_time(v):
    """metav1.Time and MicroTime: RFC 3339 (what Go's time.Parse(time.RFC3339) accepts)."""
    return not isinstance(v, str) or crdschema.is_date_time(v)


def _cause_reason(message):
    for prefix, reason in (("Required value", "FieldValueRequired"),
                           ("Unsupported value", "FieldValueNotSupported"),
                           ("Duplicate value", "FieldValueDuplicate"),
                           ("Forbidden", "FieldValueForbidden"), ("Too long", "FieldValueTooLong"),
                           ("Too many", "FieldValueTooMany")):
        if message.startswith(prefix):
            return reason
    return "FieldValueInvalid"


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


# The merge keys of the built-in lists a strategic merge patch merges rather than replaces
# (patchMergeKey in the Go types); other lists are replaced, as there.
SMP_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
            "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
            "imagePullSecrets": "name", "ownerReferences": "uid", "conditions": "type",
            "hostAliases": "ip", "addresses": "type", "topologySpreadConstraints": "topologyKey",
            "ports": "containerPort", "resourceClaims": "name"}
SMP_PRIMITIVE_MERGE = ("finalizers",)


def strategic_merge_patch(target, patch, path=()):
    """kube-apiserver's strategic merge patch for built-in kinds, the common part: maps merge as in
    a merge patch; the lists of SMP_KEYS merge by their key (an item {"$patch": "delete", key: v}
    removes one, {"$patch": "replace"} replaces the list); finalizers merge as a set;
    $deleteFromPrimitiveList/<field>, $retainKeys, $patch: replace|delete on maps, and
    $setElementOrder (ignored) are understood."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "delete":
        return None
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(out.get(field), list):
                out[field] = [e for e in out[field] if e not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, list):
            key = SMP_KEYS.get(k)
            if k == "ports" and path[-1:] == ("spec",) and len(path) == 1:
                key = "port"  # a Service's ports merge by port
            if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in v):
                out[k] = [copy.deepcopy(e) for e in v if not (isinstance(e, dict) and "$patch" in e)]
            elif k in SMP_PRIMITIVE_MERGE and isinstance(cur, list):
                out[k] = cur + [e for e in v if e not in cur]
            elif key and isinstance(cur, list):
                merged = [copy.deepcopy(e) for e in cur]
                for item in v:
                    if not isinstance(item, dict):
                        continue
                    idx = next((i for i, e in enumerate(merged)
                                if isinstance(e, dict) and e.get(key) == item.get(key)), None)
                    if item.get("$patch") == "delete":
                        if idx is not None:
                            del merged[idx]
                    elif idx is None:
                        merged.append(strategic_merge_patch({}, item, path + (k,)))
                    else:
                        merged[idx] = strategic_merge_patch(merged[idx], item, path + (k,))
                out[k] = merged
            else:
                out[k] = [strategic_merge_patch({}, e, path + (k,)) if isinstance(e, dict) else e
                          for e in v if not (isinstance(e, dict) and e.get("$patch") == "delete")]
        elif isinstance(v, dict):
            got = strategic_merge_patch(cur, v, path + (k,))
            if got is None:
                out.pop(k, None)
            else:
                out[k] = got
        else:
            out[k] = v
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_GV = RBAC_GROUP + "/v1"


def rbac_rule_allows(rule, verb, group, resource, sub, name):
    """Whether one PolicyRule allows a request (verb, API group, resource, subresource, name).
    A "*" given as a request value is only allowed by a "*" in the rule (what coverage checks
    need)."""
    def has(values, v):
        return "*" in values or v in values
    if not has(rule.get("verbs") or [], verb) or not has(rule.get("apiGroups") or [], group):
        return False
    res = rule.get("resources") or []
    combined = f"{resource}/{sub}" if sub else resource
    if not ("*" in res or combined in res or
            (sub and (f"*/{sub}" in res or f"{resource}/*" in res))):
        return False
    names = rule.get("resourceNames") or []
    return not names or name in names


def _url_allowed(rule, url):
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == url or (u.endswith("*") and url.startswith(u[:-1])):
            if "*" in (rule.get("verbs") or []) or "get" in (rule.get("verbs") or []):
                return True
    return False


def template_hash(template):
    """A short stable hash of a pod template (the DaemonSet controller's controller-revision-hash
    role)."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


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



# --- scheduling: the DaemonSet controller's node filter ----------------------------------------

# the tolerations the DaemonSet controller adds to every daemon pod
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                           "effect": "NoSchedule"}


def toleration_matches(tol, taint):
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    op = tol.get("operator") or "Equal"
    if not tol.get("key"):
        return op == "Exists"  # an empty key with Exists tolerates every taint
    if tol["key"] != taint.get("key"):
        return False
    return op == "Exists" or (tol.get("value") or "") == (taint.get("value") or "")


def tolerates(tolerations, taints):
    """Whether tolerations admit every NoSchedule and NoExecute taint (PreferNoSchedule is only a
    preference)."""
    return all(any(toleration_matches(tol, t) for tol in tolerations) for t in taints
               if t.get("effect") in ("NoSchedule", "NoExecute"))


def _requirement(expr, labels):
    key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
    has, v = key in labels, labels.get(key)
    if op == "In":
        return has and v in vals
    if op == "NotIn":
        return not has or v not in vals
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt") and has and vals:
        try:
            a, b = int(v), int(vals[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_selector_term_matches(term, node):
    """A nodeSelectorTerm: its matchExpressions and matchFields all hold; an empty term matches
    nothing."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    name = {"metadata.name": (node.get("metadata") or {}).get("name")}
    return all(_requirement(e, labels) for e in exprs) and \
        all(f.get("key") == "metadata.name" and _requirement(f, name) for f in fields)


def pod_fits_node(pod_spec, node):
    """Whether the scheduler would place a pod with pod_spec on node, as far as a DaemonSet's pods
    go: nodeName, nodeSelector, required node affinity, and taints against the pod's tolerations
    plus those the DaemonSet controller adds."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if pod_spec.get("nodeName") and pod_spec["nodeName"] != meta.get("name"):
        return False
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    req = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if req is not None and not any(node_selector_term_matches(t, node)
                                   for t in req.get("nodeSelectorTerms") or []):
        return False
    tols = list(pod_spec.get("tolerations") or []) + DAEMON_TOLERATIONS
    if pod_spec.get("hostNetwork"):
        tols.append(HOST_NETWORK_TOLERATION)
    return tolerates(tols, (node.get("spec") or {}).get("taints") or [])


def scaled_value(v, total, round_up):
    """An intOrString's value: an int, or a percentage of total ("25%")."""
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.endswith("%"):
        try:
            pct = int(v[:-1])
        except ValueError:
            return 1
        q, r = divmod(pct * total, 100)
        return q + (1 if round_up and r else 0)
    try:
        return int(v)
    except (TypeError, ValueError):
        return 1


# --- metadata rules ----------------------------------------------------------------------------

_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                  "'-' or '.', and must start and end with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                    "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',"
                    "  or 'my_value',  or '12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_NAME_PART_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                  "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                  "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def name_causes(rule, name):
    """kube-apiserver's check of metadata.name for a resource's name rule (NAME_RULES)."""
    if rule == "path":
        for bad in ("/", "%"):
            if bad in name:
                return [("metadata.name", f"Invalid value: \"{name}\": may not contain '{bad}'")]
        if name in (".", ".."):
            return [("metadata.name", f'Invalid value: "{name}": may not be \'{name}\'')]
        return []
    if rule == "label" and (len(name) > 63 or not DNS_LABEL_RE.match(name)):
        return [("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of '
                 "lower case alphanumeric characters or '-', and must start and end with an "
                 "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")]
    if rule == "label1035" and (len(name) > 63 or not DNS1035_LABEL_RE.match(name)):
        return [("metadata.name", f'Invalid value: "{name}": a DNS-1035 label must consist of lower case '
                 "alphanumeric characters or '-', start with an alphabetic character, and end with an "
                 "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
                 "'[a-z]([-a-z0-9]*[a-z0-9])?')")]
    if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        return [("metadata.name", f'Invalid value: "{name}": {_SUBDOMAIN_MSG}')]
    return []


def qualified_name_causes(field, key):
    """A label or annotation key: [prefix/]name."""
    prefix, slash, name = key.rpartition("/")
    msgs = []
    if not name:
        msgs.append("name part must be non-empty")
    elif len(name) > 63:
        msgs.append("name part must be no more than 63 characters")
    elif not QUALIFIED_NAME_RE.match(name):
        msgs.append(_NAME_PART_MSG)
    if slash:
        if not prefix:
            msgs.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix):
            msgs.append(f"prefix part {_SUBDOMAIN_MSG}")
    return [(field, f'Invalid value: "{key}": {m}') for m in msgs]


def label_causes(field, labels):
    out = []
    if not isinstance(labels, dict):
        return out
    for k, v in labels.items():
        out += qualified_name_causes(field, k)
        if isinstance(v, str) and len(v) > 63:
            out.append((field, f'Invalid value: "{v}": must be no more than 63 characters'))
        elif isinstance(v, str) and not LABEL_VALUE_RE.match(v):
            out.append((field, f'Invalid value: "{v}": {_LABEL_VALUE_MSG}'))
    return out


def meta_causes(meta, rule):
    out = []
    name = meta.get("name") or ""
    if name:
        out += name_causes(rule, name)
    out += label_causes("metadata.labels", meta.get("labels"))
    ann = meta.get("annotations")
    if isinstance(ann, dict):
        for k in ann:
            out += qualified_name_causes("metadata.annotations", k)
        size = sum(len(k) + len(v) for k, v in ann.items() if isinstance(v, str))
        if size > 262144:
            out.append(("metadata.annotations", "Too long: must have at most 262144 bytes"))
    return out


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
        self.changes = []  # (rv, type, key, time): every change, never compacted

    def record(self, etype, key, old, new):
        self.history.append((self.rv, etype, key, copy.deepcopy(old), copy.deepcopy(new)))
        self.changes.append((self.rv, etype, key, time.time()))
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

    def live(self):
        return self.count is None or self.count > 0


class _Pod:
    """A daemon pod the DaemonSet emulator keeps: the template it was made from, when, and the Pod
    object's name when Pods are emulated."""

    def __init__(self, template, generation, now):
        self.hash, self.generation, self.created = template, generation, now
        self.name = None
        self.reported = None  # the readiness last written to the Pod object


class _DsState:
    """What the DaemonSet emulator knows of one DaemonSet between passes: the nodes its pods fit,
    its pods by node, each node's availability delay (from the rules), the next readiness change."""

    def __init__(self):
        self.eligible = set()
        self.pods = {}
        self.after = {}
        self.deadline = None


def _owner_refs(obj):
    return (obj.get("metadata") or {}).get("ownerReferences") or []


class FakeKube:
    """The server. start() it (or use it as a context manager); url, the kubeconfig paths and the
    hooks are then ready. bookmark_interval: seconds between watch bookmarks; history: how many
    changes watches can resume from."""

    NEVER = NEVER

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
        # namespaced creates in a namespace that does not exist answer 404 (as the real server's
        # NamespaceLifecycle admission); off by default, as most tests never create namespaces
        self.strict_namespaces = False
        # the garbage collector deletes dependents whose owners are gone
        self.gc_enabled = True
        # the DaemonSet emulator also keeps Pod objects for the pods it schedules
        self.daemonset_pods = False
        # seconds until a daemon pod becomes available when no daemonset_available() rule matches
        self.daemonset_default_after = 0.0
        self.store = Store(history)
        self.resources = [Resource(*r) for r in RESOURCES]
        self.log = []
        self.violations = []
        self.warnings = []  # (method, path, warning) answered in Warning headers (pruned fields)
        self.controller_errors = []
        self.restarts = 0
        self._expecting = 0
        self._injections = []
        self._continues = {}
        self._watch_gen = 0
        self._expire_gen = 0
        self._drop_clean = False
        self._stopping = False
        self._release = threading.Event()
        self._conns = set()
        self._conns_lock = threading.Lock()
        self._validators = {}
        self._ds_policies = []  # (daemonset match, namespace, node match, after)
        self._ds_state = {}  # DaemonSet uid -> _DsState
        self._seen_uids = set()  # every uid an object stored here had
        self._sa_tokens = {}  # token -> (user, groups): identities the RBAC authorizer governs
        self._local = threading.local()  # the identity of the request a handler thread serves
        self._ds_paused = False
        self._ctl_thread = None
        self._ctl_stop = False
        self._ctl_kick = False
        self.certs = None
        self.server = None
        self.thread = None
        self.port = None

    # --- lifecycle ---

    def start(self):
        if self.certs is None:
            self.certs = Certs(self.dir)
            self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ctx.load_cert_chain(self.certs.server_cert, self.certs.server_key)
            self._ctx.load_verify_locations(cafile=str(self.certs.ca))
            self._ctx.verify_mode = ssl.CERT_OPTIONAL
        self._listen(self.port if self.port is not None else self.port_wanted)
        self.write_configs()
        self._start_controllers()
        return self

    def _listen(self, port):
        self.server = _Server(("127.0.0.1", port), _Handler, self._ctx, self)
        self.port = self.server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="fakekube", daemon=True)
        self.thread.start()

    def stop(self):
        if not self.server:
            return
        with self.store.cond:
            self._stopping = True
            self._ctl_stop = True
            self.store.cond.notify_all()
        self._release.set()  # hung requests: wait no longer
        self.server.shutdown()
        self.server.server_close()
        self._close_connections()
        self.server = None
        if self._ctl_thread:
            self._ctl_thread.join(5)
            self._ctl_thread = None

    def restart(self, keep_state=True, down=0.0):
        """An API server restart: every connection and watch is cut (mid-stream, as a crash does),
        nothing answers for `down` seconds (connections are refused), then the server listens on
        the same port with the same certificates. keep_state=False loses every object (as with a
        new etcd): the history is gone too, so a watch that resumes gets 410 and must list again;
        CRDs are forgotten and their resources no longer served."""
        if not self.server:
            raise RuntimeError("fakekube is not running")
        with self.store.cond:
            self._watch_gen += 1
            self._drop_clean = False
            self.store.cond.notify_all()
        self.release()
        self.server.shutdown()
        self.server.server_close()
        self._close_connections()
        if not keep_state:
            with self.store.cond:
                self.store.objects.clear()
                self.store.history.clear()
                self.store.changes.clear()
                self.store.compacted = self.store.rv
                self._continues.clear()
                self.resources = [Resource(*r) for r in RESOURCES]
                self._ds_state.clear()
        if down:
            time.sleep(down)
        self._listen(self.port)
        with self.store.cond:
            self.restarts += 1
            self.store.cond.notify_all()

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

    # --- hooks: the store ---

    def resource(self, name):
        """A Resource by plural ("resourceclaims") or plural.group ("events.events.k8s.io"); for a
        custom resource served in several versions, the storage version's."""
        found = [r for r in self.resources if name in (r.plural, r.qualified)]
        if not found:
            raise KeyError(name)
        return next((r for r in found if r.gv == r.store_gv), found[0])

    def objects(self, resource, namespace=None):
        """A snapshot (deep copies) of the stored objects of a resource, sorted by namespace, name."""
        res = self.resource(resource)
        with self.store.cond:
            return [copy.deepcopy(self._present(res, o)) for k, o in sorted(self.store.objects.items())
                    if k[:2] == (res.store_gv, res.plural) and (namespace is None or k[2] == namespace)]

    def _key(self, res, name, namespace):
        ns = (namespace or "default") if res.namespaced else ""
        return (res.store_gv, res.plural, ns, name)

    def get(self, resource, name, namespace=None):
        """A copy of one object (namespace None: "default" for namespaced resources), or None."""
        res = self.resource(resource)
        with self.store.cond:
            o = self.store.objects.get(self._key(res, name, namespace))
            return copy.deepcopy(self._present(res, o)) if o is not None else None

    def put(self, obj):
        """Creates or replaces obj behind the client's back (no validation, no preconditions): fills
        in apiVersion/kind defaults, uid, creationTimestamp, bumps resourceVersion. Returns the
        stored object. A CustomResourceDefinition put this way is served at once."""
        obj = copy.deepcopy(obj)
        res = self._resource_of(obj)
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "") if res.namespaced else ""
        if res.namespaced and not ns:
            ns = meta["namespace"] = "default"
        key = self._key(res, meta["name"], ns)
        obj["apiVersion"] = res.store_gv
        with self.store.cond:
            old = self.store.objects.get(key)
            if old:
                meta.setdefault("uid", old["metadata"]["uid"])
                meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
                meta.setdefault("generation", old["metadata"].get("generation", 1))
            self._stamp_new(meta)
            stored = self._commit(key, old, obj)
            return copy.deepcopy(self._present(res, stored))

    def remove(self, resource, name, namespace=None):
        """Deletes an object behind the client's back (finalizers ignored); returns it or None."""
        res = self.resource(resource)
        with self.store.cond:
            key = self._key(res, name, namespace)
            old = self.store.objects.get(key)
            if old is None:
                return None
            self._drop(key, old)
            return copy.deepcopy(self._present(res, old))

    delete = remove

    def create(self, obj, namespace=None, field_validation=None):
        """Creates obj as a client's POST would: validated (ApiError on a rejection), defaulted,
        pruned; CRDs served at once. Not counted as a client request. Returns the stored object."""
        res = self._resource_of(obj)
        ns = (namespace or (obj.get("metadata") or {}).get("namespace") or "default") \
            if res.namespaced else ""
        query = {"fieldValidation": [field_validation]} if field_validation else {}
        with self.store.cond:
            stored, _ = self._op_create(res, ns, copy.deepcopy(obj), query)
            return copy.deepcopy(self._present(res, stored))

    def apply(self, src, namespace=None):
        """Creates, or updates in place (keeping status), each object of src: a dict, a list of
        them, or a YAML/JSON file or text of one or more documents (kind: List is unpacked). Goes
        through validation as create() does. Returns the stored objects."""
        out = []
        for obj in _documents(src):
            res = self._resource_of(obj)
            ns = (namespace or (obj.get("metadata") or {}).get("namespace") or "default") \
                if res.namespaced else ""
            with self.store.cond:
                key = self._key(res, (obj.get("metadata") or {}).get("name"), ns)
                old = self.store.objects.get(key)
                if old is None:
                    stored, _ = self._op_create(res, ns, copy.deepcopy(obj), {})
                else:
                    new = copy.deepcopy(obj)
                    new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
                    stored, _ = self._store_update(res, key, old, new, None, {})
                out.append(copy.deepcopy(self._present(res, stored)))
        return out

    def patch(self, resource, name, patch, namespace=None, subresource=None, kind="merge"):
        """Patches one object as a client would (kind "merge" or "strategic"), validated. Returns
        the stored object."""
        res = self.resource(resource)
        with self.store.cond:
            key = self._key(res, name, namespace)
            stored, _ = self._op_patch(res, key[2], name, patch, kind, subresource, {})
            return copy.deepcopy(self._present(res, stored))

    def apply_crd(self, src):
        """Creates (or updates) the CustomResourceDefinitions in src (a path, YAML text, a dict or a
        list); each is validated as kube-apiserver would, marked Established and served at once.
        Returns their names."""
        docs = list(_documents(src))
        for d in docs:
            if d.get("kind") != "CustomResourceDefinition":
                raise ValueError(f"not a CustomResourceDefinition: {d.get('kind')}")
        return [o["metadata"]["name"] for o in self.apply(docs)]

    # --- hooks: nodes ---

    def add_node(self, name, labels=None, allocatable=None, capacity=None, taints=None,
                 unschedulable=False, annotations=None, ready=True,
                 runtime="containerd://1.7.24", os_image="Ubuntu 22.04.5 LTS",
                 kernel="5.15.0-131-generic"):
        """Stores a Node as a kubelet registers it: the well-known labels (hostname, os, arch) plus
        labels, status.capacity/allocatable (cpu, memory, pods plus what is given, e.g.
        {"nvidia.com/gpu": "8"}), a Ready condition, nodeInfo with the container runtime, taints.
        Checked against the Node schema. Returns the stored Node."""
        all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                      "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                      "beta.kubernetes.io/arch": "amd64"}
        all_labels.update(labels or {})
        alloc = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        alloc.update({k: str(v) for k, v in (allocatable or {}).items()})
        cap = dict(alloc)
        cap.update({k: str(v) for k, v in (capacity or {}).items()})
        now = now_rfc3339()
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": all_labels, "annotations": dict(annotations or {})},
            "spec": {"podCIDR": "10.244.0.0/24"},
            "status": {
                "capacity": cap, "allocatable": alloc,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "reason": "KubeletReady" if ready else "KubeletNotReady",
                                "message": "kubelet is posting ready status" if ready else
                                "container runtime network not ready",
                                "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.%d" % (1 + len(name) % 250)},
                              {"type": "Hostname", "address": name}],
                "nodeInfo": {"architecture": "amd64", "bootID": str(uuid.uuid4()),
                             "containerRuntimeVersion": runtime, "kernelVersion": kernel,
                             "kubeProxyVersion": "", "kubeletVersion": VERSION["gitVersion"],
                             "machineID": uuid.uuid4().hex, "operatingSystem": "linux",
                             "osImage": os_image, "systemUUID": str(uuid.uuid4())},
            },
        }
        if taints:
            node["spec"]["taints"] = [dict(t) for t in taints]
        if unschedulable:
            node["spec"]["unschedulable"] = True
        res = self.resource("nodes")
        with self.store.cond:
            causes = meta_causes(node["metadata"], "subdomain") + self._schema_causes(res, node)
            if causes:
                raise invalid(res, name, causes)
        return self.put(node)

    def label_node(self, name, labels):
        """Merges labels into a node's (a None value removes the label), behind the client's back;
        returns the node."""
        with self.store.cond:
            node = self.get("nodes", name)
            if node is None:
                raise KeyError(f"node {name} is not stored")
            cur = node["metadata"].setdefault("labels", {})
            for k, v in labels.items():
                if v is None:
                    cur.pop(k, None)
                else:
                    cur[k] = v
            return self.put(node)

    def taint_node(self, name, taints):
        """Replaces a node's taints (a list of {key, value, effect}); returns the node."""
        with self.store.cond:
            node = self.get("nodes", name)
            if node is None:
                raise KeyError(f"node {name} is not stored")
            node.setdefault("spec", {})["taints"] = [dict(t) for t in taints]
            if not taints:
                node["spec"].pop("taints")
            return self.put(node)

    def remove_node(self, name):
        return self.remove("nodes", name)

    # --- hooks: the DaemonSet emulator ---

    def daemonset_available(self, daemonset="*", after=0.0, nodes=None, namespace=None):
        """From now on, pods of the matching DaemonSets on the matching nodes become available
        `after` seconds after they were created (NEVER: they never do; they stay unready).
        daemonset: a name (shell pattern) or a predicate on the DaemonSet object; nodes: None for
        all, a name (shell pattern), a list of names, or a predicate on the Node object. The last
        matching rule wins; without one, daemonset_default_after (0 s) applies. Takes effect at
        once, also for pods already running (a pod whose rule turns NEVER becomes unready)."""
        with self.store.cond:
            self._ds_policies.append((daemonset, namespace, nodes, after))
            self._kick()

    def pause_daemonsets(self):
        """The DaemonSet emulator stops (no status writes, observedGeneration lags) until
        resume_daemonsets()."""
        with self.store.cond:
            self._ds_paused = True

    def resume_daemonsets(self):
        with self.store.cond:
            self._ds_paused = False
            self._kick()

    def delete_daemonset_pods(self, daemonset, namespace=None, nodes=None):
        """Deletes the emulated pods of a DaemonSet (all, or on the nodes matching `nodes`), as
        `kubectl delete pod` does: the emulator makes new ones from the current template (what an
        OnDelete update strategy waits for). Returns how many went."""
        with self.store.cond:
            gone = 0
            for key, ds in list(self.store.objects.items()):
                if key[:2] != ("apps/v1", "daemonsets") or not self._match_ds(daemonset, namespace, ds):
                    continue
                pods = self._ds_state[ds["metadata"]["uid"]].pods if ds["metadata"]["uid"] in \
                    self._ds_state else {}
                for node in list(pods):
                    n = self.store.objects.get(("v1", "nodes", "", node)) or {"metadata": {"name": node}}
                    if self._match_node(nodes, n):
                        self._ds_drop_pod(key, pods.pop(node))
                        gone += 1
            self._kick()
            return gone

    def daemonset_status(self, name, namespace=None):
        ds = self.get("daemonsets", name, namespace)
        return (ds or {}).get("status")

    # --- hooks: identities under RBAC ---

    def service_account(self, name, namespace=None):
        """A token for the ServiceAccount namespace/name (stored if missing). Unlike the fixture's
        token (system:masters, allowed everything), requests with it are authorized by the stored
        Roles, ClusterRoles and bindings as kube-apiserver's RBAC authorizer does (403 Forbidden
        otherwise), and creating a role or binding that grants more than it holds is refused as
        privilege escalation. Returns a dict: token, user, groups, kubeconfig (a file with the
        token), sa_dir (an in-cluster service-account directory) and env (the in-cluster
        environment pointing at it)."""
        ns = namespace or self.namespace
        token = secrets.token_urlsafe(24)
        user = f"system:serviceaccount:{ns}:{name}"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
        with self.store.cond:
            self._sa_tokens[token] = (user, groups)
            if self.get("serviceaccounts", name, ns) is None:
                self.put({"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": name, "namespace": ns}})
        d = self.dir / f"sa-{ns}-{name}"
        d.mkdir(exist_ok=True)
        (d / "ca.crt").write_bytes(self.certs.ca_pem)
        (d / "namespace").write_text(ns)
        _write_private(d / "token", token)
        kc = d / "kubeconfig"
        _write_private(kc, yaml.safe_dump(_kubeconfig(self.url, {"certificate-authority": str(self.certs.ca)},
                                                      {"token": token}, ns),
                                          default_flow_style=False, sort_keys=False))
        return {"token": token, "user": user, "groups": groups, "kubeconfig": kc, "sa_dir": d,
                "env": {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port),
                        "GPUPLANE_SERVICEACCOUNT_DIR": str(d)}}

    def allowed(self, user, verb, resource, namespace=None, name=None, subresource=None, groups=None):
        """What the RBAC authorizer answers for user (e.g. "system:serviceaccount:ns:sa") on a
        resource (plural or plural.group): a SubjectAccessReview by hand."""
        if groups is None:
            parts = user.split(":")
            groups = ["system:authenticated"] + (
                ["system:serviceaccounts", f"system:serviceaccounts:{parts[2]}"]
                if user.startswith("system:serviceaccount:") and len(parts) == 4 else [])
        res = self.resource(resource)
        with self.store.cond:
            return self._allowed(user, groups, verb, res.group, res.plural, subresource, namespace or "",
                                 name)

    # --- hooks: faults and observation ---

    def inject(self, method=".*", path=".*", status=500, count=1, hang=False, delay=0.0, message=None,
               headers=None, drop=False):
        """The next count requests (count=None: every one until clear_injections()) whose method and
        path (without query) match the regexes (full match) answer status with a Status body
        (status=None: served normally after delay seconds); hang=True holds them without an answer
        until release() or stop(), then closes the connection. drop=True closes the connection at
        once without an answer, as a server does that times out an idle keep-alive connection just
        as a request arrives on it. headers: extra response headers (e.g. {"Retry-After": "1"})."""
        inj = Injection(method, path, status, count, hang, delay, message, headers, drop)
        with self.store.cond:
            self._injections.append(inj)
        return inj

    def clear_injections(self):
        with self.store.cond:
            self._injections.clear()

    def release(self):
        """Lets hung requests go (their connections close without an answer); later injected hangs
        hang again."""
        with self.store.cond:
            ev, self._release = self._release, threading.Event()
        ev.set()

    def requests(self, method=None, path=None):
        """The request log: dicts with method, path, query (dict of lists), status, headers (without
        Authorization), watch (bool), time, peer, and what the request was (verb, resource,
        namespace, name, subresource); filtered by method and path regex (search)."""
        with self.store.cond:
            return [dict(r) for r in self.log if (method is None or r["method"] == method)
                    and (path is None or re.search(path, r["path"]))]

    def writes(self, since=None, verb=None, resource=None, namespace=None, name=None):
        """The client's write requests (create, update, patch, delete, deletecollection), in order,
        each with its time (time.time()), verb, resource (plural or plural.group), namespace, name,
        subresource and status (None: unanswered). since: a time.time() value; the other filters
        compare equal (resource matches the plural or plural.group)."""
        with self.store.cond:
            return [dict(r) for r in self.log if r.get("verb") in WRITE_VERBS
                    and (since is None or r["time"] >= since) and (verb is None or r["verb"] == verb)
                    and (resource is None or resource in (r.get("resource"), r.get("plural")))
                    and (namespace is None or r.get("namespace") == namespace)
                    and (name is None or r.get("name") == name)]

    def write_counts(self, since=None):
        """{(verb, resource): count} of the client's write requests since a time.time() value."""
        out = {}
        for w in self.writes(since=since):
            k = (w["verb"], w["resource"])
            out[k] = out.get(k, 0) + 1
        return out

    def changes(self, since=0, type=None, resource=None, namespace=None):
        """Every change the store went through after resourceVersion `since` (whoever made it: the
        client, a hook, the emulated controllers), oldest first, as dicts with rv, type (ADDED,
        MODIFIED, DELETED), resource (plural or plural.group), namespace, name and time; filtered by
        type and resource. Unlike watches it reaches back to the start: the order in which objects
        were created is `[c["name"] for c in fk.changes(type="ADDED", resource="daemonsets")]`."""
        with self.store.cond:
            out = []
            for rv, etype, key, t in self.store.changes:
                if rv <= since or (type is not None and etype != type):
                    continue
                group = key[0].split("/")[0] if "/" in key[0] else ""
                qualified = f"{key[1]}.{group}" if group else key[1]
                if resource is not None and resource not in (key[1], qualified):
                    continue
                if namespace is not None and key[2] != namespace:
                    continue
                out.append({"rv": rv, "type": etype, "resource": qualified, "namespace": key[2],
                            "name": key[3], "time": t})
            return out

    def events_for(self, kind, name, namespace=None):
        """The core/v1 and events.k8s.io/v1 Events whose involvedObject (or regarding) has this kind
        and name (and namespace, when given), oldest first."""
        with self.store.cond:
            out = []
            for k, o in self.store.objects.items():
                if k[1] != "events":
                    continue
                io = o.get("involvedObject") or o.get("regarding") or {}
                if io.get("kind") == kind and io.get("name") == name and \
                        (namespace is None or (io.get("namespace") or "") == namespace):
                    out.append(copy.deepcopy(o))
        return sorted(out, key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or
                                          e.get("firstTimestamp") or
                                          e["metadata"].get("creationTimestamp") or "",
                                          int(e["metadata"].get("resourceVersion", 0))))

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

    def expire_watches(self):
        """Every open watch gets an ERROR event with a 410 Expired Status and ends, and the history
        is compacted to now: a client resuming from any resourceVersion it has seen gets 410 again
        and must list anew (what a watch cache that fell behind does to its watchers)."""
        with self.store.cond:
            self.store.next_rv()  # past every version a client has seen
            self.compact()
            self._expire_gen += 1
            self.store.cond.notify_all()

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

    # --- internals: the store ---

    def _resource_of(self, obj):
        for r in self.resources:
            if r.gv == obj.get("apiVersion") and r.kind == obj.get("kind"):
                return r
        raise KeyError(f"{obj.get('apiVersion')} {obj.get('kind')} is not served")

    def _present(self, res, obj):
        """obj as the version res serves it (custom resources are stored in their storage version)."""
        if obj is not None and res.custom and obj.get("apiVersion") != res.gv:
            obj = dict(obj, apiVersion=res.gv)
        return obj

    def _stamp_new(self, meta):
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        meta.setdefault("generation", 1)

    def _commit(self, key, old, new):
        """Stores new under key with a new resourceVersion and records the change. Lock held."""
        new["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.objects[key] = new
        self._seen_uids.add(new["metadata"].get("uid"))
        self.store.record("MODIFIED" if old is not None else "ADDED", key, old, new)
        if key[:2] == (CRD_GV, "customresourcedefinitions"):
            self._crd_changed(key, new)
        return new

    def _drop(self, key, old):
        """Removes the object at key, recording a DELETED event. Lock held."""
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.objects.pop(key, None)
        self.store.record("DELETED", key, old, gone)
        if key[:2] == (CRD_GV, "customresourcedefinitions"):
            self._crd_gone(old)
        return gone

    def _delete_key(self, key):
        """A delete as a controller issues it: finalizers delay it. Lock held."""
        old = self.store.objects[key]
        if old["metadata"].get("finalizers"):
            if not old["metadata"].get("deletionTimestamp"):
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                self._commit(key, old, new)
            return
        self._drop(key, old)

    def _close_connections(self):
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            c.cut()

    def _record_violation(self, method, path, err):
        with self.store.cond:
            self.violations.append({"method": method, "path": path, "message": err.message,
                                    "causes": (err.details or {}).get("causes", []),
                                    "expected": self._expecting > 0})

    def _take_injection(self, method, path):
        with self.store.cond:
            for inj in self._injections:
                if inj.live() and inj.method.fullmatch(method) and inj.path.fullmatch(path):
                    if inj.count is not None:
                        inj.count -= 1
                    return inj
        return None

    def _classify(self, method, path, query):
        """What a request is, as an audit log names it: verb, resource, namespace, name,
        subresource (empty when the path is not a resource's)."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            gv, rest = "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return {}
        watch = query.get("watch", [""])[-1] in ("true", "1")
        if rest[:1] == ["watch"]:
            watch, rest = True, rest[1:]
        served = [r for r in self.resources if r.gv == gv]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces" and any(r.plural == rest[2] and r.namespaced
                                                             for r in served):
            ns, rest = rest[1], rest[2:]
        if not rest:
            return {}
        res = next((r for r in served if r.plural == rest[0]), None)
        name = rest[1] if len(rest) > 1 else None
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method)
        if method == "GET":
            verb = "watch" if watch else ("list" if name is None else "get")
        elif method == "DELETE":
            verb = "deletecollection" if name is None else "delete"
        return {"verb": verb, "resource": res.qualified if res else rest[0], "plural": rest[0],
                "group": gv.split("/")[0] if "/" in gv else "", "namespace": ns, "name": name,
                "subresource": rest[2] if len(rest) > 2 else None}

    # --- internals: RBAC ---

    def _rules_of(self, user, groups, namespace):
        """The PolicyRules bound to an identity: cluster-wide, plus those of `namespace`'s
        RoleBindings when given."""
        objs = self.store.objects

        def matches(sub):
            kind = sub.get("kind")
            if kind == "ServiceAccount":
                return user == f"system:serviceaccount:{sub.get('namespace')}:{sub.get('name')}"
            if kind == "User":
                return sub.get("name") == user
            return kind == "Group" and sub.get("name") in groups

        def rules(ref, ns):
            if ref.get("kind") == "ClusterRole":
                o = objs.get((RBAC_GV, "clusterroles", "", ref.get("name")))
            elif ref.get("kind") == "Role" and ns:
                o = objs.get((RBAC_GV, "roles", ns, ref.get("name")))
            else:
                o = None
            return (o or {}).get("rules") or []

        out = []
        for k, o in objs.items():
            if k[0] != RBAC_GV or not any(matches(x) for x in o.get("subjects") or []):
                continue
            if k[1] == "clusterrolebindings":
                out += rules(o.get("roleRef") or {}, "")
            elif k[1] == "rolebindings" and namespace and k[2] == namespace:
                out += rules(o.get("roleRef") or {}, namespace)
        return out

    def _allowed(self, user, groups, verb, group, resource, sub, namespace, name):
        return any(rbac_rule_allows(r, verb, group, resource, sub, name)
                   for r in self._rules_of(user, groups, namespace))

    def _authorize(self, ident, what, query):
        """403 unless the identity's RBAC rules allow the request."""
        user, groups = ident
        verb, name, ns = what["verb"], what.get("name"), what.get("namespace") or ""
        if verb in ("list", "watch") and not name:
            for f in query.get("fieldSelector", [""])[-1].split(","):
                if f.startswith("metadata.name="):
                    name = f.split("=", 1)[1]
                elif f.startswith("metadata.name=="):
                    name = f.split("==", 1)[1]
        group, plural, sub = what.get("group", ""), what["plural"], what.get("subresource")
        if self._allowed(user, groups, verb, group, plural, sub, ns, name):
            return
        qualified = f"{plural}.{group}" if group else plural
        target = f'{qualified} "{name}"' if name else qualified
        scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
        combined = f"{plural}/{sub}" if sub else plural
        raise ApiError(403, f'{target} is forbidden: User "{user}" cannot {verb} resource "{combined}" in '
                       f'API group "{group}" {scope}',
                       details={"name": name or "", "group": group, "kind": plural})

    def _escalation_check(self, res, obj):
        """kube-apiserver's escalation prevention for a restricted identity writing a role or a
        binding: it must hold every permission granted (or the escalate/bind verb)."""
        ident = getattr(self._local, "ident", None)
        if ident is None or res.gv != RBAC_GV:
            return
        user, groups = ident
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "" if res.namespaced else ""
        if res.plural in ("roles", "clusterroles"):
            if self._allowed(user, groups, "escalate", RBAC_GROUP, res.plural, None, ns, meta.get("name")):
                return
            rules = obj.get("rules") or []
        else:
            ref = obj.get("roleRef") or {}
            plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            if self._allowed(user, groups, "bind", RBAC_GROUP, plural, None, ns, ref.get("name")):
                return
            o = self.store.objects.get((RBAC_GV, plural, ns if plural == "roles" else "", ref.get("name")))
            rules = (o or {}).get("rules") or []
        own = self._rules_of(user, groups, ns)
        missing = []
        for rule in rules:
            for url in rule.get("nonResourceURLs") or []:
                if not any(_url_allowed(o, url) for o in own):
                    missing.append(f'{{NonResourceURLs:["{url}"], Verbs:{json.dumps(rule.get("verbs"))}}}')
            for g in rule.get("apiGroups") or []:
                for r in rule.get("resources") or []:
                    resource, _, sub = r.partition("/")
                    for v in rule.get("verbs") or []:
                        for n in rule.get("resourceNames") or [None]:
                            if not any(rbac_rule_allows(o, v, g, resource, sub or None, n) for o in own):
                                missing.append(f'{{APIGroups:["{g}"], Resources:["{r}"], ' +
                                               (f'ResourceNames:["{n}"], ' if n else "") +
                                               f'Verbs:["{v}"]}}')
        if missing:
            gs = " ".join(json.dumps(g) for g in groups)
            raise ApiError(403, f'{res.qualified} "{meta.get("name", "")}" is forbidden: user "{user}" '
                           f"(groups=[{gs}]) is attempting to grant RBAC permissions not currently held:\n" +
                           "\n".join(missing),
                           details={"name": meta.get("name", ""), "group": res.group, "kind": res.plural})

    # --- internals: the verbs (lock held by the callers) ---

    def _matcher(self, res, ns, name, query):
        labels = parse_label_selector(query.get("labelSelector", [""])[-1])
        fields = parse_field_selector(query.get("fieldSelector", [""])[-1], res)
        if name is not None:
            fields.append(("metadata.name", True, name))

        def match(key, obj):
            if key[:2] != (res.store_gv, res.plural) or (ns is not None and key[2] != ns):
                return False
            return labels_match(labels, obj.get("metadata", {}).get("labels") or {}) and \
                fields_match(fields, obj)
        return match

    def _check_kind(self, res, obj):
        if obj.get("apiVersion") not in (None, res.gv) or obj.get("kind") not in (None, res.kind):
            raise ApiError(400, f"the API version in the data ({obj.get('apiVersion')}) does not match "
                           f"the expected API version ({res.gv})" if obj.get("apiVersion") != res.gv else
                           f"the kind in the data ({obj.get('kind')}) does not match {res.kind}")
        obj["apiVersion"], obj["kind"] = res.gv, res.kind
        if not isinstance(obj.setdefault("metadata", {}), dict):
            raise ApiError(400, "metadata must be an object")

    def _check_namespace(self, res, ns, name):
        """The NamespaceLifecycle admission: no new content in a namespace being deleted; with
        strict_namespaces, none in one that does not exist."""
        if not res.namespaced:
            return
        nso = self.store.objects.get(("v1", "namespaces", "", ns))
        if nso is not None and nso["metadata"].get("deletionTimestamp"):
            raise ApiError(403, f'{res.qualified} "{name}" is forbidden: unable to create new content in '
                           f"namespace {ns} because it is being terminated",
                           details={"name": name, "group": res.group, "kind": res.plural,
                                    "causes": [{"reason": "NamespaceTerminating",
                                                "message": f"namespace {ns} is being terminated",
                                                "field": "metadata.namespace"}]})
        if nso is None and self.strict_namespaces:
            raise ApiError(404, f'namespaces "{ns}" not found',
                           details={"name": ns, "kind": "namespaces"})

    def _op_create(self, res, ns, obj, query):
        self._check_kind(res, obj)
        meta = obj["metadata"]
        if res.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise ApiError(400, "the namespace of the provided object does not match the namespace "
                               "sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion") not in (None, "", "0"):
            # etcd3's create refuses it, and kube-apiserver passes that on as an internal error
            raise ApiError(500, "resourceVersion should not be set on objects to be created")
        for k in ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp"):
            meta.pop(k, None)
        if res.status:
            obj.pop("status", None)  # status is written through the subresource only
        with self.store.cond:
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise invalid(res, "", [("metadata.name",
                                             "Required value: name or generateName is required")])
                for _ in range(100):
                    name = meta["generateName"] + "".join(secrets.choice(GENERATE_ALPHABET)
                                                          for _ in range(5))
                    if self._key(res, name, ns) not in self.store.objects:
                        break
                meta["name"] = name
            key = self._key(res, meta["name"], ns)
            self._check_namespace(res, ns, meta["name"])
            self._stamp_new(meta)
            obj, warnings = self._admit(res, obj, None, query)
            if key in self.store.objects:
                raise ApiError(409, f'{res.qualified} "{meta["name"]}" already exists',
                               reason="AlreadyExists",
                               details={"name": meta["name"], "group": res.group, "kind": res.plural})
            obj["apiVersion"] = res.store_gv
            return self._commit(key, None, obj), warnings

    def _store_update(self, res, key, old, new, sub, query):
        """Applies an update (PUT or the result of a PATCH) of old to new, kube-apiserver's way;
        returns (stored object, warnings)."""
        self._check_kind(res, new)
        meta = new["metadata"]
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
        if res.plural == "namespaces" and res.group == "" and sub != "status":
            # spec.finalizers change only through /finalize
            if "finalizers" in (old.get("spec") or {}):
                new.setdefault("spec", {})["finalizers"] = list(old["spec"]["finalizers"])
        new, warnings = self._admit(res, new, old, query)
        meta = new["metadata"]
        ignore = ("metadata", "status") if res.status else ("metadata",)
        spec_changed = {k: v for k, v in new.items() if k not in ignore} != \
            {k: v for k, v in old.items() if k not in ignore}
        meta["generation"] = old["metadata"].get("generation", 1) + (1 if spec_changed else 0)
        new["apiVersion"] = res.store_gv
        if _sans_rv(new) == _sans_rv(old):
            return old, warnings  # nothing changed: nothing is written, no event
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._drop(key, new), warnings  # the last finalizer went
        return self._commit(key, old, new), warnings

    def _op_update(self, res, ns, name, obj, sub, query):
        with self.store.cond:
            key = self._key(res, name, ns)
            old = self.store.objects.get(key)
            if old is None:
                raise not_found(res, name)
            rv = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj.get("metadata"), dict) \
                else None
            if not rv:
                raise invalid(res, name, [("metadata.resourceVersion",
                                           "Invalid value: 0x0: must be specified for an update")])
            if rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            return self._store_update(res, key, old, obj, sub, query)

    def _op_patch(self, res, ns, name, patch, kind, sub, query):
        with self.store.cond:
            key = self._key(res, name, ns)
            old = self.store.objects.get(key)
            if old is None:
                raise not_found(res, name)
            rv = (patch.get("metadata") or {}).get("resourceVersion") \
                if isinstance(patch.get("metadata"), dict) else None
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            base = self._present(res, old)
            if kind == "strategic":
                new = strategic_merge_patch(base, patch)
            else:
                new = merge_patch(base, patch)
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise ApiError(400, "metadata must be an object")
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return self._store_update(res, key, old, new, sub, query)

    def _op_delete(self, res, ns, name, opts, query):
        with self.store.cond:
            key = self._key(res, name, ns)
            old = self.store.objects.get(key)
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
            policy = opts.get("propagationPolicy") or query.get("propagationPolicy", [""])[-1]
            if policy not in ("", "Orphan", "Background", "Foreground"):
                raise invalid(res, name, [("propagationPolicy", f'Unsupported value: "{policy}": '
                                           'supported values: "Foreground", "Background", "Orphan"')])
            if old["metadata"].get("deletionTimestamp") and (
                    old["metadata"].get("finalizers") or (old.get("spec") or {}).get("finalizers")):
                return copy.deepcopy(old)  # being deleted already: waits for its finalizers
            if policy == "Orphan" or opts.get("orphanDependents") is True:
                self._orphan(old["metadata"]["uid"])
            terminating = res.plural == "namespaces" and res.group == "" and \
                (old.get("spec") or {}).get("finalizers")
            if old["metadata"].get("finalizers") or terminating:
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                if terminating:
                    new.setdefault("status", {})["phase"] = "Terminating"
                self._kick()
                return self._commit(key, old, new)
            return self._drop(key, old)

    def _op_delete_collection(self, res, ns, query):
        with self.store.cond:
            match = self._matcher(res, ns, None, query)
            gone = []
            for key, obj in sorted(self.store.objects.items()):
                if match(key, obj):
                    gone.append(self._present(res, self._op_delete(res, key[2], key[3], {}, query)))
        return {"kind": f"{res.kind}List", "apiVersion": res.gv,
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": gone}

    def _orphan(self, uid):
        """propagationPolicy Orphan: the dependents lose their reference to uid."""
        for key, o in list(self.store.objects.items()):
            refs = _owner_refs(o)
            if any(r.get("uid") == uid for r in refs):
                new = copy.deepcopy(o)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                if not new["metadata"]["ownerReferences"]:
                    del new["metadata"]["ownerReferences"]
                self._commit(key, o, new)

    # --- internals: admission, defaults, validation ---

    def _admit(self, res, obj, old, query):
        """Defaults, prunes (custom resources) and validates obj; ApiError when the real server would
        refuse it. Returns (object to store, warnings)."""
        warnings = []
        for path in MICRO_TIMES.get((res.gv, res.plural), ()):
            v = _dig(obj, path)
            if v is not None and not (isinstance(v, str) and MICRO_TIME_RE.match(v)):
                raise ApiError(400, f'{res.kind} in version "{res.version}" cannot be handled as a '
                               f"{res.kind}: parsing time {json.dumps(v)} as "
                               '"2006-01-02T15:04:05.000000Z07:00": cannot parse it as a MicroTime '
                               f"({'.'.join(path)})")
        if not res.custom:
            obj = _drop_nulls(obj)  # Go decodes a null into the zero value, which is then omitted
        self._defaults(res, obj, old)
        self._escalation_check(res, obj)
        causes = []
        if res.custom:
            obj, causes, pruned = crdschema.apply(res.schema or {}, obj)
            fv = query.get("fieldValidation", [""])[-1]
            if pruned and fv == "Strict":
                raise ApiError(400, f'{res.kind} in version "{res.version}" cannot be handled as a '
                               f"{res.kind}: strict decoding error: " +
                               ", ".join(f'unknown field "{p}"' for p in pruned))
            if pruned and fv != "Ignore":
                warnings = [f'unknown field "{p}"' for p in pruned]
        meta = obj.get("metadata") or {}
        causes = meta_causes(meta, NAME_RULES.get(res.plural, "subdomain") if not res.custom
                             else "subdomain") + causes
        if not res.custom:
            causes += self._schema_causes(res, obj)
        causes += self._rules(res, obj, old)
        if causes:
            raise invalid(res, meta.get("name", ""), causes)
        return obj, warnings

    def _schema_causes(self, res, obj):
        """The official schema's complaints about a built-in object (strict: unknown fields too)."""
        if not self.validate:
            return []
        v = None
        if res.group == RESOURCE_GROUP:
            v = self._validators.get(res.kind)
            if v is None:
                v = self._validators[res.kind] = openapi_schema.validator(
                    openapi_schema.load_components(), res.kind)
        elif res.group == NFD_GROUP:
            v = openapi_schema.crd_validator(res.group, res.version, res.kind)
        elif res.gv in API_VALIDATED:
            v = self._validators.get((res.gv, res.kind))
            if v is None:
                base = openapi_schema.api_validator(res.gv, res.kind)
                v = self._validators[(res.gv, res.kind)] = type(base)(base.schema,
                                                                      format_checker=DATE_TIME_CHECKER)
        if v is None:
            return []
        causes = []
        for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
            path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in e.absolute_path)
            causes.append((path.replace(".[", "["), e.message))
        return causes

    def _defaults(self, res, obj, old):
        """The built-in defaults that change what a client reads back (a subset of the real ones)."""
        if res.gv == "apps/v1" and res.plural == "daemonsets":
            spec = obj.setdefault("spec", {})
            spec.setdefault("revisionHistoryLimit", 10)
            us = spec.setdefault("updateStrategy", {})
            us.setdefault("type", "RollingUpdate")
            if us["type"] == "RollingUpdate":
                ru = us.setdefault("rollingUpdate", {})
                ru.setdefault("maxUnavailable", 1)
                ru.setdefault("maxSurge", 0)
            tmpl = spec.get("template")
            if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict):
                _default_pod_spec(tmpl["spec"])
            if old is None:
                obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                 "desiredNumberScheduled": 0, "numberReady": 0}
        elif res.gv == "apps/v1" and res.plural == "deployments":
            spec = obj.setdefault("spec", {})
            spec.setdefault("replicas", 1)
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            st = spec.setdefault("strategy", {})
            st.setdefault("type", "RollingUpdate")
            if st["type"] == "RollingUpdate":
                ru = st.setdefault("rollingUpdate", {})
                ru.setdefault("maxUnavailable", "25%")
                ru.setdefault("maxSurge", "25%")
            tmpl = spec.get("template")
            if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict):
                _default_pod_spec(tmpl["spec"])
        elif res.gv == "v1" and res.plural == "services":
            _default_service(obj, old)
        elif res.gv == "v1" and res.plural == "namespaces":
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"].get(
                "name", "")
            if old is None:
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
                obj["status"] = {"phase": "Active"}
        elif res.gv == "v1" and res.plural == "pods":
            if isinstance(obj.get("spec"), dict):
                _default_pod_spec(obj["spec"])
        elif res.gv == CRD_GV:
            spec = obj.get("spec")
            if isinstance(spec, dict):
                names = spec.get("names")
                if isinstance(names, dict) and isinstance(names.get("kind"), str):
                    names.setdefault("singular", names["kind"].lower())
                    names.setdefault("listKind", names["kind"] + "List")
                spec.setdefault("conversion", {"strategy": "None"})
            if old is None:
                fins = obj["metadata"].setdefault("finalizers", [])
                if CRD_FINALIZER not in fins:
                    fins.append(CRD_FINALIZER)

    def _rules(self, res, obj, old):
        """kube-apiserver's own validation beyond the schema, where a controller can trip on it."""
        out = []
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        ospec = (old or {}).get("spec") or {}
        if res.gv == "apps/v1" and res.plural in ("daemonsets", "deployments"):
            what = res.kind.lower()
            sel = spec.get("selector")
            tmpl_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            out += label_causes("spec.template.metadata.labels", tmpl_labels)
            if isinstance(sel, dict):
                out += label_causes("spec.selector.matchLabels", sel.get("matchLabels"))
                if not sel.get("matchLabels") and not sel.get("matchExpressions"):
                    out.append(("spec.selector", f"Invalid value: {json.dumps(sel)}: empty selector is "
                                f"invalid for {what}"))
                elif not (all(tmpl_labels.get(k) == v for k, v in (sel.get("matchLabels") or {}).items())
                          and all(_requirement(e, tmpl_labels) for e in sel.get("matchExpressions") or [])):
                    out.append(("spec.template.metadata.labels", f"Invalid value: "
                                f"{_go_map(tmpl_labels)}: `selector` does not match template `labels`"))
                if old is not None and ospec.get("selector") != sel:
                    out.append(("spec.selector", f"Invalid value: {json.dumps(sel)}: field is immutable"))
            rp = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
            if rp not in (None, "Always"):
                out.append(("spec.template.spec.restartPolicy",
                            f'Unsupported value: "{rp}": supported values: "Always"'))
        elif res.gv == "v1" and res.plural == "services":
            ports = spec.get("ports") or []
            if spec.get("type", "ClusterIP") != "ExternalName" and not ports and \
                    spec.get("clusterIP") != "None":
                out.append(("spec.ports", "Required value"))
            if len(ports) > 1:
                for i, p in enumerate(ports):
                    if isinstance(p, dict) and not p.get("name"):
                        out.append((f"spec.ports[{i}].name", "Required value"))
            if old is not None and ospec.get("clusterIP") and spec.get("clusterIP") != ospec["clusterIP"]:
                out.append(("spec.clusterIPs[0]", f'Invalid value: "{spec.get("clusterIP")}": may not '
                            "change once set"))
        elif res.gv == "node.k8s.io/v1":
            h = obj.get("handler")
            if isinstance(h, str) and not DNS_LABEL_RE.match(h):
                out.append(("handler", f'Invalid value: "{h}": a lowercase RFC 1123 label must consist of '
                            "lower case alphanumeric characters or '-', and must start and end with an "
                            "alphanumeric character"))
            if old is not None and old.get("handler") != h:
                out.append(("handler", f'Invalid value: "{h}": field is immutable'))
        elif res.gv == "rbac.authorization.k8s.io/v1" and res.plural.endswith("bindings"):
            ref = obj.get("roleRef") or {}
            if old is not None and old.get("roleRef") != ref:
                out.append(("roleRef", f"Invalid value: {json.dumps(ref)}: cannot change roleRef"))
            allowed = ("ClusterRole",) if res.plural == "clusterrolebindings" else ("Role", "ClusterRole")
            if ref.get("kind") not in allowed:
                out.append(("roleRef.kind", f'Unsupported value: "{ref.get("kind")}": supported values: ' +
                            ", ".join(f'"{a}"' for a in allowed)))
            if ref.get("apiGroup") != "rbac.authorization.k8s.io":
                out.append(("roleRef.apiGroup", f'Unsupported value: "{ref.get("apiGroup")}": supported '
                            'values: "rbac.authorization.k8s.io"'))
        elif res.gv == "v1" and res.plural == "events":
            io = obj.get("involvedObject") or {}
            ns = obj["metadata"].get("namespace", "")
            ions = io.get("namespace") or ""
            if (ions and ions != ns) or (not ions and ns not in ("", "default")):
                out.append(("involvedObject.namespace", f'Invalid value: "{ions}": does not match '
                            "event.namespace"))
        elif res.gv == CRD_GV:
            out += crdschema.check_crd(obj)
            if old is not None:
                for f in ("scope", "group"):
                    if ospec.get(f) != spec.get(f):
                        out.append((f"spec.{f}", f'Invalid value: "{spec.get(f)}": field is immutable'))
        return out

    # --- internals: custom resource definitions ---

    def _crd_changed(self, key, crd):
        """A stored CRD: serve its resources (until it is being deleted) and mark it Established."""
        self._crd_register(crd)
        if crd["metadata"].get("deletionTimestamp"):
            return
        status = _crd_status(crd)
        if status != crd.get("status"):
            new = copy.deepcopy(crd)
            new["status"] = status
            self._commit(key, crd, new)

    def _crd_register(self, crd):
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural, name = spec.get("group"), names.get("plural"), crd["metadata"]["name"]
        versions = [v for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("name")]
        if not group or not plural or not names.get("kind") or not versions:
            return
        storage = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"])
        keep = [r for r in self.resources if r.crd != name and not (r.group == group and r.plural == plural)]
        for v in versions:
            if not v.get("served"):
                continue
            fields = [sf["jsonPath"].lstrip(".") for sf in v.get("selectableFields") or []
                      if isinstance(sf, dict) and sf.get("jsonPath")]
            r = Resource(f"{group}/{v['name']}", plural, names["kind"], spec.get("scope") == "Namespaced",
                         "status" in (v.get("subresources") or {}), fields)
            r.crd = name
            r.schema = (v.get("schema") or {}).get("openAPIV3Schema") or {}
            r.store_gv = f"{group}/{storage}"
            r.short_names = list(names.get("shortNames") or [])
            r.categories = list(names.get("categories") or [])
            r.singular = names.get("singular") or names["kind"].lower()
            keep.append(r)
        self.resources = keep

    def _crd_gone(self, crd):
        """A CRD left the store: its custom resources go with it and are no longer served (a built-in
        resource it stood in for is served again)."""
        name = crd["metadata"]["name"]
        mine = [r for r in self.resources if r.crd == name]
        self.resources = [r for r in self.resources if r.crd != name]
        for r in RESOURCES:
            st = Resource(*r)
            if any(m.group == st.group and m.plural == st.plural for m in mine) and \
                    not any(x.gv == st.gv and x.plural == st.plural for x in self.resources):
                self.resources.append(st)
        for sgv, plural in {(r.store_gv, r.plural) for r in mine}:
            for key in [k for k in self.store.objects if k[:2] == (sgv, plural)]:
                self._drop(key, self.store.objects[key])

    # --- internals: the controllers (garbage collector, namespace and CRD cleanup, DaemonSets) ---

    def _kick(self):
        with self.store.cond:
            self._ctl_kick = True
            self.store.cond.notify_all()

    def _start_controllers(self):
        if self._ctl_thread:
            return
        self._ctl_stop = False
        self._ctl_thread = threading.Thread(target=self._controller_loop, name="fakekube-controllers",
                                            daemon=True)
        self._ctl_thread.start()

    def _controller_loop(self):
        cursor = 0
        next_ds = None
        while True:
            with self.store.cond:
                while True:
                    if self._ctl_stop:
                        return
                    now = time.monotonic()
                    due = next_ds is not None and now >= next_ds
                    if self.store.rv != cursor or self._ctl_kick or due:
                        break
                    self.store.cond.wait(1.0 if next_ds is None else max(0.001, min(1.0, next_ds - now)))
                if self.store.rv != cursor and not self._ctl_kick:
                    # a burst of changes (a client labelling many nodes) makes one pass, not one each
                    begin, last = time.monotonic(), self.store.rv
                    while time.monotonic() - begin < 0.05 and not self._ctl_stop:
                        self.store.cond.wait(0.005)
                        if self.store.rv == last:
                            break
                        last = self.store.rv
                gc, ds_keys, node_names = self._scan(cursor)
                everything = self._ctl_kick or ds_keys is None
                self._ctl_kick = False
                cursor = self.store.rv
                try:
                    if gc or everything:
                        self._gc_pass()
                    if everything or ds_keys or node_names or due:
                        next_ds = self._ds_pass(ds_keys or set(), node_names or set(), everything)
                except Exception as e:  # noqa: BLE001 - a fault of the emulation must show, not hang
                    self.controller_errors.append(repr(e))
                    import traceback
                    traceback.print_exc()

    def _scan(self, cursor):
        """What the changes after cursor concern: (whether the garbage collector must look, the
        DaemonSets that changed, the nodes that changed); None for both sets when history no longer
        reaches back (everything must be looked at)."""
        if cursor < self.store.compacted:
            return True, None, None
        gc = False
        ds, nodes = set(), set()
        for rv, etype, key, old, new in reversed(self.store.history):
            if rv <= cursor:
                break
            if etype == "DELETED":
                gc = True
            elif _owner_refs(new) and (old is None or _owner_refs(old) != _owner_refs(new)):
                gc = True
            elif new["metadata"].get("deletionTimestamp") and key[1] in ("namespaces",
                                                                          "customresourcedefinitions"):
                gc = True
            if key[:2] == ("apps/v1", "daemonsets"):
                ds.add(key)
            elif key[:2] == ("v1", "nodes"):
                nodes.add(key[3])
            elif key[:2] == ("v1", "pods") and etype == "DELETED" and self.daemonset_pods:
                for ref in _owner_refs(old):  # a deleted daemon pod: its DaemonSet makes another
                    if ref.get("kind") == "DaemonSet":
                        ds.add(("apps/v1", "daemonsets", key[2], ref.get("name")))
        return gc, ds, nodes

    def _kinds(self):
        """(group, kind) -> the Resource objects of that kind are stored under."""
        out = {}
        for r in self.resources:
            if (r.group, r.kind) not in out or r.gv == r.store_gv:
                out[(r.group, r.kind)] = r
        return out

    def _owner_state(self, dep_key, ref, kinds=None):
        """"present", "absent" (gone, or another object of that name), "unknown" (a kind nothing
        serves: the garbage collector waits; or a uid no object here ever had, as tests put
        dependents of owners they never store) or "invalid" (a namespaced owner of a cluster-scoped
        dependent: never collected)."""
        if ref.get("uid") not in self._seen_uids:
            return "unknown"
        api = ref.get("apiVersion") or ""
        group = api.split("/")[0] if "/" in api else ""
        if kinds is None:
            kinds = self._kinds()
        res = kinds.get((group, ref.get("kind")))
        if res is None:
            return "unknown"
        if res.namespaced and not dep_key[2]:
            return "invalid"
        o = self.store.objects.get((res.store_gv, res.plural, dep_key[2] if res.namespaced else "",
                                    ref.get("name")))
        return "present" if o is not None and o["metadata"].get("uid") == ref.get("uid") else "absent"

    def _gc_pass(self):
        objs = self.store.objects
        for _ in range(100):  # cascades: a deleted dependent may own others
            changed = False
            for key in list(objs):
                o = objs.get(key)
                if o is None or not o["metadata"].get("deletionTimestamp"):
                    continue
                if key[:2] == ("v1", "namespaces"):
                    inside = [k for k in objs if k[2] == key[3]]
                    for k in inside:
                        if not objs[k]["metadata"].get("deletionTimestamp"):
                            self._delete_key(k)
                            changed = True
                    if not any(k[2] == key[3] for k in objs) and (o.get("spec") or {}).get("finalizers"):
                        new = copy.deepcopy(o)
                        new["spec"]["finalizers"] = []
                        if new["metadata"].get("finalizers"):
                            self._commit(key, o, new)
                        else:
                            self._drop(key, o)
                        changed = True
                elif key[:2] == (CRD_GV, "customresourcedefinitions") and \
                        CRD_FINALIZER in (o["metadata"].get("finalizers") or []):
                    store = _crd_storage(o)
                    inside = [k for k in objs if k[:2] == store]
                    for k in inside:
                        if not objs[k]["metadata"].get("deletionTimestamp"):
                            self._delete_key(k)
                            changed = True
                    if not any(k[:2] == store for k in objs):
                        new = copy.deepcopy(o)
                        new["metadata"]["finalizers"].remove(CRD_FINALIZER)
                        if new["metadata"]["finalizers"]:
                            self._commit(key, o, new)
                        else:
                            self._drop(key, o)
                        changed = True
            if self.gc_enabled:
                kinds = self._kinds()
                for key in list(objs):
                    o = objs.get(key)
                    refs = _owner_refs(o) if o is not None else None
                    if not refs or o["metadata"].get("deletionTimestamp"):
                        continue
                    if all(self._owner_state(key, r, kinds) == "absent" for r in refs):
                        self._delete_key(key)
                        changed = True
            if not changed:
                return

    def _match_ds(self, m, namespace, ds):
        meta = ds["metadata"]
        if namespace is not None and meta.get("namespace") != namespace:
            return False
        if callable(m):
            return bool(m(ds))
        return fnmatch.fnmatchcase(meta.get("name", ""), m)

    @staticmethod
    def _match_node(m, node):
        name = node["metadata"].get("name", "")
        if m is None:
            return True
        if callable(m):
            return bool(m(node))
        if isinstance(m, str):
            return fnmatch.fnmatchcase(name, m)
        return name in m

    def _ds_after(self, ds, node):
        for m, ns, nodes, after in reversed(self._ds_policies):
            if self._match_ds(m, ns, ds) and self._match_node(nodes, node):
                return after
        return self.daemonset_default_after

    def _ds_pass(self, changed_ds, changed_nodes, everything):
        """One pass of the DaemonSet controller emulator over the DaemonSets that changed, saw a node
        change, or have a pod whose readiness is due (every one when `everything`); returns the
        monotonic time of the next pod readiness change, or None."""
        if self._ds_paused:
            return None
        now = time.monotonic()
        objs = self.store.objects
        all_nodes = None
        live = set()
        deadline = None
        for key in sorted(k for k in objs if k[:2] == ("apps/v1", "daemonsets")):
            ds = objs[key]
            meta = ds["metadata"]
            live.add(meta["uid"])
            if meta.get("deletionTimestamp"):
                continue
            st = self._ds_state.get(meta["uid"])
            fresh = st is None
            if fresh:
                st = self._ds_state[meta["uid"]] = _DsState()
            due = st.deadline is not None and now >= st.deadline
            if not (everything or fresh or key in changed_ds or changed_nodes or due):
                if st.deadline is not None and (deadline is None or st.deadline < deadline):
                    deadline = st.deadline
                continue
            spec = ds.get("spec") or {}
            tmpl = spec.get("template") or {}
            pod_spec = tmpl.get("spec") or {}
            h, gen = template_hash(tmpl), meta.get("generation", 1)
            if everything or fresh or key in changed_ds:
                if all_nodes is None:
                    all_nodes = {k[3]: o for k, o in objs.items() if k[:2] == ("v1", "nodes")}
                st.eligible = {n for n, o in all_nodes.items() if pod_fits_node(pod_spec, o)}
                st.after.clear()
            else:
                for n in changed_nodes:
                    st.after.pop(n, None)
                    o = objs.get(("v1", "nodes", "", n))
                    if o is not None and pod_fits_node(pod_spec, o):
                        st.eligible.add(n)
                    else:
                        st.eligible.discard(n)
            eligible = sorted(st.eligible)
            pods = st.pods
            if self.daemonset_pods:  # a Pod someone deleted is gone; the controller makes another
                for n, p in list(pods.items()):
                    if p.name and ("v1", "pods", key[2], p.name) not in objs:
                        del pods[n]
            for n in [n for n in pods if n not in st.eligible]:
                self._ds_drop_pod(key, pods.pop(n))
            for n in eligible:
                if n not in pods:
                    pods[n] = _Pod(h, gen, now)
                if n not in st.after:
                    st.after[n] = self._ds_after(ds, objs[("v1", "nodes", "", n)])
            after = st.after
            min_ready = spec.get("minReadySeconds") or 0

            def available(n):
                a = after[n]
                return a is not None and now >= pods[n].created + a + min_ready

            strategy = spec.get("updateStrategy") or {}
            if (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
                mu = scaled_value((strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1),
                                  len(eligible), True) or 1
                old = [n for n in eligible if pods[n].hash != h]
                for n in old:  # old pods that are not available anyway are replaced at once
                    if not available(n):
                        self._ds_drop_pod(key, pods[n])
                        pods[n] = _Pod(h, gen, now)
                if old:
                    unavailable = sum(1 for n in eligible if not available(n))
                    for n in old:
                        if pods[n].hash == h:
                            continue
                        if unavailable >= mu:
                            break
                        self._ds_drop_pod(key, pods[n])
                        pods[n] = _Pod(h, gen, now)
                        unavailable += 1
            n_ready = n_avail = n_upd = 0
            st.deadline = None
            for n in eligible:
                p, a = pods[n], after[n]
                ready = a is not None and now >= p.created + a
                avail = ready and now >= p.created + a + min_ready
                n_ready += ready
                n_avail += avail
                n_upd += p.hash == h
                if a is not None and not avail:
                    t = p.created + a if not ready else p.created + a + min_ready
                    if st.deadline is None or t < st.deadline:
                        st.deadline = t
                if self.daemonset_pods:
                    self._ds_sync_pod(key, ds, n, p, ready)
            if st.deadline is not None and (deadline is None or st.deadline < deadline):
                deadline = st.deadline
            status = dict(ds.get("status") or {})
            status.update(currentNumberScheduled=len(eligible), desiredNumberScheduled=len(eligible),
                          numberMisscheduled=0, numberReady=n_ready, observedGeneration=gen)
            # as the Go type serialises them: these four are omitted when zero
            for k, v in (("numberAvailable", n_avail), ("numberUnavailable", len(eligible) - n_avail),
                         ("updatedNumberScheduled", n_upd)):
                if v:
                    status[k] = v
                else:
                    status.pop(k, None)
            if status != ds.get("status"):
                new = copy.deepcopy(ds)
                new["status"] = status
                self._commit(key, ds, new)
        for uid in [u for u in self._ds_state if u not in live]:
            del self._ds_state[uid]  # its Pods (owned by it) go with the garbage collector
        return deadline

    def _ds_sync_pod(self, key, ds, node, p, ready):
        ns = key[2]
        if p.name is None:
            tmpl = (ds.get("spec") or {}).get("template") or {}
            tmeta = tmpl.get("metadata") or {}
            name = f"{ds['metadata']['name']}-" + "".join(secrets.choice(GENERATE_ALPHABET)
                                                           for _ in range(5))
            labels = dict(tmeta.get("labels") or {})
            labels.update({"controller-revision-hash": p.hash, "pod-template-generation": str(p.generation)})
            meta = {"name": name, "namespace": ns, "labels": labels,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                         "name": ds["metadata"]["name"], "uid": ds["metadata"]["uid"],
                                         "controller": True, "blockOwnerDeletion": True}]}
            if tmeta.get("annotations"):
                meta["annotations"] = dict(tmeta["annotations"])
            self._stamp_new(meta)
            spec = copy.deepcopy(tmpl.get("spec") or {})
            spec["nodeName"] = node
            p.name = name
            self._commit(("v1", "pods", ns, name), None, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                                          "spec": spec, "status": _pod_status(False)})
            p.reported = False
        if p.reported != ready:
            pkey = ("v1", "pods", ns, p.name)
            old = self.store.objects.get(pkey)
            if old is not None:
                new = copy.deepcopy(old)
                new["status"] = _pod_status(ready)
                self._commit(pkey, old, new)
            p.reported = ready

    def _ds_drop_pod(self, ds_key, p):
        if p.name:
            pkey = ("v1", "pods", ds_key[2], p.name)
            if pkey in self.store.objects:
                self._drop(pkey, self.store.objects[pkey])


def _drop_nulls(v):
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def _dig(obj, path):
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def _sans_rv(obj):
    o = dict(obj)
    o["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return o


def _go_map(d):
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(d.items())) + "}"


def _pod_status(ready):
    now = now_rfc3339()
    st = "True" if ready else "False"
    return {"phase": "Running" if ready else "Pending",
            "conditions": [{"type": t, "status": st, "lastTransitionTime": now}
                           for t in ("Initialized", "Ready", "ContainersReady")] +
            [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
            "startTime": now}


def _crd_storage(crd):
    spec = crd.get("spec") or {}
    versions = spec.get("versions") or [{}]
    storage = next((v.get("name") for v in versions if v.get("storage")), versions[0].get("name"))
    return (f"{spec.get('group')}/{storage}", (spec.get("names") or {}).get("plural"))


def _crd_status(crd):
    """The status the apiextensions controllers give an accepted CRD."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    old = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
    now = now_rfc3339()

    def cond(t, reason, message):
        c = {"type": t, "status": "True", "reason": reason, "message": message}
        prev = old.get(t)
        c["lastTransitionTime"] = prev["lastTransitionTime"] if prev and prev.get("status") == "True" and \
            prev.get("lastTransitionTime") else now
        return c

    stored = list((crd.get("status") or {}).get("storedVersions") or [])
    storage = _crd_storage(crd)[0].split("/")[-1]
    if storage not in stored:
        stored.append(storage)
    return {"conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                           cond("Established", "InitialNamesAccepted",
                                "the initial names have been accepted")],
            "acceptedNames": names, "storedVersions": stored}


def _default_container(c):
    if not isinstance(c, dict):
        return
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = c.get("image") or ""
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c and image:
        c["imagePullPolicy"] = "Always" if "@" not in tag and (":" not in tag or tag.endswith(":latest")) \
            else "IfNotPresent"
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        pr = c.get(probe)
        if isinstance(pr, dict):
            pr.setdefault("timeoutSeconds", 1)
            pr.setdefault("periodSeconds", 10)
            pr.setdefault("successThreshold", 1)
            pr.setdefault("failureThreshold", 3)
            if isinstance(pr.get("httpGet"), dict):
                pr["httpGet"].setdefault("scheme", "HTTP")
    for e in c.get("env") or []:
        fr = ((e or {}).get("valueFrom") or {}).get("fieldRef") if isinstance(e, dict) else None
        if isinstance(fr, dict):
            fr.setdefault("apiVersion", "v1")


def _default_pod_spec(spec):
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for k in ("containers", "initContainers"):
        for c in spec.get(k) or []:
            _default_container(c)
    for v in spec.get("volumes") or []:
        if not isinstance(v, dict):
            continue
        if isinstance(v.get("hostPath"), dict):
            v["hostPath"].setdefault("type", "")
        for k in ("configMap", "secret"):
            if isinstance(v.get(k), dict):
                v[k].setdefault("defaultMode", 420)


def _default_service(obj, old):
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])
    if spec["type"] == "ExternalName":
        return
    ospec = (old or {}).get("spec") or {}
    if not spec.get("clusterIP"):
        if ospec.get("clusterIP"):  # an update without it keeps the allocated one
            spec["clusterIP"] = ospec["clusterIP"]
        else:
            spec["clusterIP"] = "10.96.%d.%d" % (secrets.randbelow(250) + 1, secrets.randbelow(250) + 1)
    if spec["clusterIP"] == "None":
        spec.setdefault("clusterIPs", ["None"])
    else:
        spec["clusterIPs"] = [spec["clusterIP"]]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")


def _documents(src):
    """The objects of src: a dict, a list (of dicts or of paths), a path, or YAML/JSON text;
    `kind: List` documents are unpacked."""
    if isinstance(src, dict):
        docs = [src]
    elif isinstance(src, (list, tuple)):
        docs = []
        for s in src:
            docs.extend(_documents(s))
        return docs
    elif isinstance(src, pathlib.Path) or (isinstance(src, str) and "\n" not in src and
                                            os.path.exists(src)):
        docs = list(yaml.safe_load_all(pathlib.Path(src).read_text()))
    else:
        docs = list(yaml.safe_load_all(src))
    out = []
    for d in docs:
        if not d:
            continue
        if d.get("kind") == "List" or (d.get("kind", "").endswith("List") and "items" in d):
            out.extend(d.get("items") or [])
        else:
            out.append(d)
    return out


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
        self._what = {}
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
        for k, v in (headers.items() if isinstance(headers, dict) else headers or []):
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _log(self, method, path, query, status, watch):
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        with self.fk.store.cond:
            entry = {"method": method, "path": path, "query": query, "status": status,
                     "headers": headers, "watch": watch, "time": time.time(),
                     "peer": self.client_address[1]}
            entry.update(self._what)
            self.fk.log.append(entry)
            self.fk.store.cond.notify_all()

    def _identity(self):
        """Who is asking: "admin" (the server's token, or a client certificate of its CA: both
        system:masters), (user, groups) for a service-account token the RBAC authorizer governs,
        or None (401)."""
        auth = self.headers.get("Authorization")
        if auth is not None:
            m = re.match(r"^Bearer\s+(\S+)\s*$", auth)
            if m and secrets.compare_digest(m.group(1), self.fk.token):
                return "admin"
            if m and m.group(1) in self.fk._sa_tokens:
                return self.fk._sa_tokens[m.group(1)]
        return "admin" if self.connection.getpeercert() else None

    def _serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query, keep_blank_values=True)
        self._req = (method, path, query)
        self._what = self.fk._classify(method, path, query)
        inj = None
        try:
            body = self._read_body()
            ident = None
            if path not in ("/healthz", "/livez", "/readyz", "/version"):
                ident = self._identity()
                if ident is None:
                    raise ApiError(401, "Unauthorized")
            ident = None if ident == "admin" else ident
            self.fk._local.ident = ident
            if ident is not None and self._what.get("verb"):
                with self.fk.store.cond:
                    self.fk._authorize(ident, self._what, query)
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
        resources = fk.resources
        groups = {}
        for r in resources:
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
        served = [r for r in resources if r.gv == gv]
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
                    obj, warn = fk._op_create(res, ns_key, self._object(body), query)
                    self._send(201, fk._present(res, obj), headers=self._warnings(warn))
                else:
                    raise ApiError(405, "the server does not allow this method on the requested resource")
            elif method == "DELETE":
                self._send(200, fk._op_delete_collection(res, ns, query))
            else:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            return True
        if method == "GET":
            with fk.store.cond:
                obj = fk.store.objects.get(fk._key(res, name, ns_key))
                if obj is None:
                    raise not_found(res, name)
                self._send(200, fk._present(res, obj))
        elif method == "PUT":
            obj, warn = fk._op_update(res, ns_key, name, self._object(body), sub, query)
            self._send(200, fk._present(res, obj), headers=self._warnings(warn))
        elif method == "PATCH":
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
            kinds = {"application/merge-patch+json": "merge"}
            if not res.custom:
                kinds["application/strategic-merge-patch+json"] = "strategic"
            if ctype not in kinds:
                raise ApiError(415, "the body of the request was in an unknown format - accepted media "
                               "types include: " + ", ".join(kinds))
            obj, warn = fk._op_patch(res, ns_key, name, self._json(body), kinds[ctype], sub, query)
            self._send(200, fk._present(res, obj), headers=self._warnings(warn))
        elif method == "DELETE":
            obj = fk._op_delete(res, ns_key, name, self._json(body) if body else {}, query)
            self._send(200, fk._present(res, obj))
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        return True

    def _warnings(self, warnings):
        if warnings:
            with self.fk.store.cond:
                self.fk.warnings.extend((self._req[0], self._req[1], w) for w in warnings)
        return [("Warning", f'299 - {json.dumps(w)}') for w in warnings]

    @staticmethod
    def _group(group, gvs):
        versions = [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in dict.fromkeys(gvs)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    @staticmethod
    def _resource_list(gv, served):
        out = []
        for r in served:
            entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                     "kind": r.kind, "verbs": ["create", "delete", "deletecollection", "get", "list",
                                               "patch", "update", "watch"]}
            if r.short_names:
                entry["shortNames"] = r.short_names
            if r.categories:
                entry["categories"] = r.categories
            out.append(entry)
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

    # --- lists ---

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
                match = fk._matcher(res, ns, None, query)
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
            if res.custom:  # custom resource lists carry them, typed lists do not
                o["apiVersion"] = res.gv
            else:
                o.pop("apiVersion", None)
                o.pop("kind", None)
        return {"kind": f"{res.kind}List", "apiVersion": res.gv, "metadata": meta, "items": items}

    # --- watch ---

    def _chunk(self, event):
        data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, res, ns, name, query):
        fk, store = self.fk, self.fk.store
        match = fk._matcher(res, ns, name, query)
        bookmarks = query.get("allowWatchBookmarks", [""])[-1] in ("true", "1")
        try:
            timeout = float(query.get("timeoutSeconds", ["0"])[-1] or 0)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds")
        rv_param = query.get("resourceVersion", [""])[-1]
        with store.cond:
            gen, expire = fk._watch_gen, fk._expire_gen
            initial = []
            too_old = None
            if rv_param in ("", "0"):
                cursor = store.rv
                initial = [copy.deepcopy(fk._present(res, o)) for k, o in sorted(store.objects.items())
                           if match(k, o)]
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
                        if fk._watch_gen == gen and fk._expire_gen == expire and not fk._stopping:
                            store.cond.wait(max(0.0, min(waits)))
                        events, cursor, err = self._pending(res, match, cursor)
                    dropped = fk._watch_gen != gen or fk._stopping
                    clean = fk._drop_clean and not fk._stopping
                    if fk._expire_gen != expire and not err:
                        err = f"too old resource version: {cursor} ({store.compacted + 1})"
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
        present = self.fk._present
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
                    out.append({"type": "DELETED", "object": present(res, new)})
            elif was and now:
                out.append({"type": "MODIFIED", "object": present(res, new)})
            elif now:
                out.append({"type": "ADDED", "object": present(res, new)})
            elif was:
                gone = copy.deepcopy(old)
                gone["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"]
                out.append({"type": "DELETED", "object": present(res, gone)})
        return out, max(cursor, store.rv), None


def _parse_node(spec):
    """--node NAME[:key=value,key=value...]"""
    name, _, rest = spec.partition(":")
    labels = {}
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        labels[k] = v
    return name, labels


def main(argv=None):
    ap = argparse.ArgumentParser(description="A fake Kubernetes API server for gpuplane's tests.")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    ap.add_argument("--dir", required=True, help="where certificates and kubeconfigs are written")
    ap.add_argument("--token", help="the bearer token to accept (default: a random one)")
    ap.add_argument("--namespace", default="default", help="the kubeconfig's and service account's namespace")
    ap.add_argument("--bookmark-interval", type=float, default=10.0, help="seconds between watch bookmarks")
    ap.add_argument("--load", action="append", default=[],
                    help="YAML or JSON file of objects to store as they are")
    ap.add_argument("--apply", action="append", default=[],
                    help="YAML or JSON file of objects (CRDs, custom resources, ...) to create with "
                    "validation, in order")
    ap.add_argument("--node", action="append", default=[], metavar="NAME[:K=V,...]",
                    help="a node to register, with labels")
    ap.add_argument("--daemonsets-available-after", default="0", metavar="SECONDS|never",
                    help="when the emulated DaemonSet pods become available (default 0)")
    ap.add_argument("--no-validate", action="store_true",
                    help="accept built-in objects the official schemas reject")
    args = ap.parse_args(argv)
    fk = FakeKube(args.dir, port=args.port, token=args.token, namespace=args.namespace,
                  bookmark_interval=args.bookmark_interval, validate=not args.no_validate)
    after = args.daemonsets_available_after
    fk.daemonset_default_after = NEVER if after == "never" else float(after)
    fk.start()
    for f in args.load:
        for obj in _documents(pathlib.Path(f)):
            fk.put(obj)
    for f in args.apply:
        fk.apply(pathlib.Path(f))
    for n in args.node:
        name, labels = _parse_node(n)
        fk.add_node(name, labels=labels)
    print(fk.url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    fk.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
