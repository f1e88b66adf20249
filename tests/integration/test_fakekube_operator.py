# SPDX-License-Identifier: Apache-2.0
"""What the fake API server (fakekube.py) adds for the operator, checked as kube-apiserver and
kube-controller-manager behave: the built-in kinds an operator writes (DaemonSets, Deployments,
ServiceAccounts, ConfigMaps, Services, RBAC, RuntimeClasses, Leases, Events) validated against the
official schemas and the server's own rules; CustomResourceDefinitions that serve their resources at
once, with pruning, defaults, validation, the status subresource and generation as the real server;
the garbage collector; namespace and CRD termination; the DaemonSet controller emulator; restarts,
expired watches, injected faults and the write log. Driven with http.client over TLS (no kubectl).
"""
import copy
import json
import pathlib
import signal
import ssl
import subprocess
import sys
import threading
import time

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("jsonschema")
pytest.importorskip("cryptography")

import crdschema  # noqa: E402
import fakekube as fkmod  # noqa: E402
from test_fakekube import Client  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CP_CRD = ROOT / "deploy" / "helm" / "gpuplane" / "crds" / "nvidia.com_clusterpolicies.yaml"
DEPLOY = ROOT / "deploy" / "gpuplane.yaml"
NS = "gpu-operator"
DS = f"/apis/apps/v1/namespaces/{NS}/daemonsets"
MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"


@pytest.fixture
def api(fakekube):
    return Client(fakekube, token=fakekube.token)


def call(api, method, path, body=None, ctype="application/json"):
    """(status, body, headers) of one request."""
    c = api.conn()
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                  headers=api.headers(ctype))
        r = c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None), r.getheaders()
    finally:
        c.close()


# --- objects ------------------------------------------------------------------------------------

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "selectableFields": [{"jsonPath": ".spec.color"}],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object", "required": ["color"],
                        "properties": {
                            "color": {"type": "string", "enum": ["red", "green"]},
                            "size": {"type": "integer", "minimum": 1, "default": 3},
                            "port": {"x-kubernetes-int-or-string": True},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "tags": {"type": "array", "items": {"type": "string"},
                                     "x-kubernetes-list-type": "set"},
                            "owner": {"type": "string", "nullable": True},
                            "nested": {"type": "object", "default": {},
                                       "properties": {"mode": {"type": "string", "default": "auto"}}},
                        },
                    },
                    "status": {"type": "object",
                               "properties": {"state": {"type": "string"}}},
                },
            }},
        }],
    },
}

GADGET_CRD = {  # cluster-scoped, no status subresource, two versions
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Cluster",
        "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
            {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
        ],
    },
}

WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget(name, **spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": dict({"color": "red"}, **spec)}


def gadget(name, version="v1", **meta):
    return {"apiVersion": f"example.com/{version}", "kind": "Gadget",
            "metadata": dict(name=name, **meta), "spec": {"anything": {"goes": 1}}}


def owner_ref(obj, controller=True):
    ref = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
           "uid": obj["metadata"]["uid"]}
    if controller:
        ref.update(controller=True, blockOwnerDeletion=True)
    return ref


def daemonset(name, node_selector=None, affinity=None, tolerations=None, labels=None, image="busybox:1",
              strategy=None, owners=None):
    spec = {"containers": [{"name": "main", "image": image}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": affinity}}}
    if tolerations:
        spec["tolerations"] = tolerations
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
          "spec": {"selector": {"matchLabels": {"app": name}},
                   "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}
    if strategy:
        ds["spec"]["updateStrategy"] = strategy
    if owners:
        ds["metadata"]["ownerReferences"] = owners
    return ds


# one valid object of each built-in kind the operator writes, and its collection path
BUILTINS = {
    "serviceaccounts": (f"/api/v1/namespaces/{NS}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nvidia-x"}}),
    "configmaps": (f"/api/v1/namespaces/{NS}/configmaps",
                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                    "data": {"config.yaml": "a: 1\n"}}),
    "services": (f"/api/v1/namespaces/{NS}/services",
                 {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nvidia-dcgm-exporter"},
                  "spec": {"selector": {"app": "x"},
                           "ports": [{"name": "gpu-metrics", "port": 9400}]}}),
    "daemonsets": (DS, daemonset("nvidia-device-plugin-daemonset")),
    "deployments": (f"/apis/apps/v1/namespaces/{NS}/deployments",
                    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "gpu-operator"},
                     "spec": {"selector": {"matchLabels": {"app": "gpu-operator"}},
                              "template": {"metadata": {"labels": {"app": "gpu-operator"}},
                                           "spec": {"containers": [{"name": "op", "image": "g:1"}]}}}}),
    "roles": (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    "rolebindings": (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
                     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "r"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                      "subjects": [{"kind": "ServiceAccount", "name": "nvidia-x", "namespace": NS}]}),
    "clusterroles": ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "gpuplane:node-reader"},
                      "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}),
    "clusterrolebindings": ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                             "metadata": {"name": "gpuplane:node-reader"},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                         "name": "gpuplane:node-reader"},
                             "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": NS}]}),
    "runtimeclasses": ("/apis/node.k8s.io/v1/runtimeclasses",
                       {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                        "metadata": {"name": "nvidia"}, "handler": "nvidia"}),
    "leases": (f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
               {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "53822513.nvidia.com"},
                "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
    "events": (f"/api/v1/namespaces/{NS}/events",
               {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ev.1"},
                "involvedObject": {"kind": "DaemonSet", "name": "x", "namespace": NS},
                "reason": "Created", "message": "m", "type": "Normal"}),
    "namespaces": ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "other"}}),
    "customresourcedefinitions": ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                  copy.deepcopy(GADGET_CRD)),
}


# --- built-in kinds -----------------------------------------------------------------------------

def test_discovery_of_operator_groups(fakekube, api):
    st, apis = api.call("GET", "/apis")
    groups = {g["name"] for g in apis["groups"]}
    assert {"apps", "rbac.authorization.k8s.io", "node.k8s.io", "coordination.k8s.io",
            "apiextensions.k8s.io", "events.k8s.io"} <= groups
    st, rl = api.call("GET", "/apis/apps/v1")
    names = {r["name"] for r in rl["resources"]}
    assert {"daemonsets", "daemonsets/status", "deployments"} <= names
    st, core = api.call("GET", "/api/v1")
    assert {"serviceaccounts", "configmaps", "services", "services/status"} <= \
        {r["name"] for r in core["resources"]}


@pytest.mark.parametrize("plural", sorted(BUILTINS))
def test_builtin_kinds(fakekube, api, plural):
    """Every verb on each kind; an unknown field is 422 (the official schema, strictly)."""
    fakekube.pause_daemonsets()  # no status writes of its own to race the test's updates
    path, obj = copy.deepcopy(BUILTINS[plural])
    name = obj["metadata"]["name"]
    st, created = api.call("POST", path, obj)
    assert st == 201, created
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and created["kind"] == obj["kind"]
    st, got = api.call("GET", f"{path}/{name}")
    assert st == 200 and got["metadata"]["uid"] == meta["uid"]
    w = api.watch(f"{path}?watch=true&resourceVersion={got['metadata']['resourceVersion']}")
    try:
        st, patched = api.call("PATCH", f"{path}/{name}", {"metadata": {"labels": {"a": "b"}}}, ctype=MERGE)
        assert st == 200 and patched["metadata"]["labels"]["a"] == "b"
        e = w.next_non_bookmark()
        assert e["type"] == "MODIFIED" and e["object"]["metadata"]["labels"]["a"] == "b"
        upd = copy.deepcopy(patched)
        upd["metadata"]["annotations"] = {"nvidia.com/last-applied-hash": "abc"}
        st, u = api.call("PUT", f"{path}/{name}", upd)
        assert st == 200, u
        st, err = api.call("PUT", f"{path}/{name}", upd)  # stale resourceVersion
        assert st == 409 and err["reason"] == "Conflict"
        st, lst = api.call("GET", f"{path}?labelSelector=a%3Db")
        assert st == 200 and [o["metadata"]["name"] for o in lst["items"]] == [name]
        bad = copy.deepcopy(obj)
        bad["metadata"]["name"] = name + "-bad" if plural != "customresourcedefinitions" else name
        bad["bogusField"] = 1
        with fakekube.expect_invalid():
            st, err = api.call("POST", path, bad)
        assert st == 422 and err["reason"] == "Invalid" and "bogusField" in err["message"]
        st, d = api.call("DELETE", f"{path}/{name}")
        assert st == 200
        if plural in ("namespaces", "customresourcedefinitions"):  # finalizers: terminated in the background
            fakekube.wait_for(lambda: api.call("GET", f"{path}/{name}")[0] == 404, 5, f"{plural} gone")
        assert api.call("GET", f"{path}/{name}")[0] == 404
    finally:
        w.close()


def test_builtin_defaults(fakekube, api):
    st, ds = api.call("POST", DS, daemonset("d"))
    spec = ds["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert spec["revisionHistoryLimit"] == 10
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always" and pod["dnsPolicy"] == "ClusterFirst"
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    # a created DaemonSet's status has the four counters that are never omitted
    assert ds["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                            "desiredNumberScheduled": 0, "numberReady": 0}
    path, svc = BUILTINS["services"]
    st, s = api.call("POST", path, svc)
    ip = s["spec"]["clusterIP"]
    assert s["spec"]["type"] == "ClusterIP" and s["spec"]["clusterIPs"] == [ip]
    assert s["spec"]["ports"][0] == {"name": "gpu-metrics", "port": 9400, "protocol": "TCP",
                                     "targetPort": 9400}
    upd = copy.deepcopy(s)
    del upd["spec"]["clusterIP"], upd["spec"]["clusterIPs"]
    st, s2 = api.call("PUT", f"{path}/{svc['metadata']['name']}", upd)
    assert st == 200 and s2["spec"]["clusterIP"] == ip  # an update without it keeps it
    upd = copy.deepcopy(s2)
    upd["spec"]["clusterIP"] = "10.96.0.1" if ip != "10.96.0.1" else "10.96.0.2"
    with fakekube.expect_invalid():
        st, err = api.call("PUT", f"{path}/{svc['metadata']['name']}", upd)
    assert st == 422 and "may not change once set" in err["message"]
    st, ns = api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "n1"}})
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "n1"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}


def test_builtin_rules(fakekube, api):
    """The server's own checks beyond the schema, which a controller can trip on."""
    cases = [
        (DS, dict(daemonset("sel"), spec=dict(daemonset("sel")["spec"],
                                              selector={"matchLabels": {"app": "other"}})),
         "`selector` does not match template `labels`"),
        (DS, dict(daemonset("sel2"), spec=dict(daemonset("sel2")["spec"], selector={})),
         "empty selector is invalid for daemonset"),
        (DS, daemonset("Bad_Name"), "metadata.name: Invalid value"),
        (DS, daemonset("lbl", labels={"nvidia.com/gpu.deploy.driver": "not ok!"}),
         "metadata.labels: Invalid value: \"not ok!\""),
        (DS, daemonset("lbl2", labels={"-bad/key": "x"}), "prefix part"),
        (BUILTINS["services"][0], {"metadata": {"name": "two"}, "spec": {"ports": [
            {"name": "a", "port": 1}, {"port": 2}]}}, "spec.ports[1].name: Required value"),
        (BUILTINS["services"][0], {"metadata": {"name": "9starts-with-digit"},
                                   "spec": {"ports": [{"port": 1}]}}, "DNS-1035"),
        (f"/api/v1/namespaces/{NS}/events", {
            "metadata": {"name": "e2"}, "involvedObject": {"kind": "ClusterPolicy", "name": "cp"},
            "reason": "x"}, "involvedObject.namespace: Invalid value: \"\": does not match"),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                   "kind": "Role", "name": "r"}},
         'roleRef.kind: Unsupported value: "Role"'),
    ]
    for path, obj, want in cases:
        with fakekube.expect_invalid():
            st, err = api.call("POST", path, obj)
        assert st == 422 and want in err["message"], (want, err["message"])
        assert err["details"]["causes"]
    # an event about a cluster-scoped object lives in "default"
    st, _ = api.call("POST", "/api/v1/namespaces/default/events", {
        "metadata": {"name": "e3"}, "involvedObject": {"kind": "ClusterPolicy", "name": "cp"},
        "reason": "Reconciled"})
    assert st == 201
    # immutable: a DaemonSet's selector, a RuntimeClass's handler, a binding's roleRef
    api.call("POST", DS, daemonset("imm"))
    wait_status(fakekube, "imm", observedGeneration=1)  # the emulator's status write comes first
    ds = fakekube.get("daemonsets", "imm", NS)
    ds["spec"]["selector"] = {"matchLabels": {"app": "imm", "x": "y"}}
    ds["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    with fakekube.expect_invalid():
        st, err = api.call("PUT", f"{DS}/imm", ds)
    assert st == 422 and "spec.selector" in err["message"] and "field is immutable" in err["message"]
    path, rc = BUILTINS["runtimeclasses"]
    api.call("POST", path, rc)
    with fakekube.expect_invalid():
        st, err = api.call("PATCH", f"{path}/nvidia", {"handler": "other"}, ctype=MERGE)
    assert st == 422 and "field is immutable" in err["message"]
    path, rb = BUILTINS["rolebindings"]
    api.call("POST", path, rb)
    with fakekube.expect_invalid():
        st, err = api.call("PATCH", f"{path}/r", {"roleRef": {"name": "other"}}, ctype=MERGE)
    assert st == 422 and "cannot change roleRef" in err["message"]


def test_decoding_rules(fakekube, api):
    """What fails before validation on a real server: a resourceVersion in a create (etcd refuses
    it: 500), a MicroTime without exactly six fractional digits (400); and what passes: a null in
    an optional field (Go decodes it to the zero value)."""
    obj = daemonset("rv")
    obj["metadata"]["resourceVersion"] = "5"
    st, err = api.call("POST", DS, obj)
    assert st == 500 and err["message"] == "resourceVersion should not be set on objects to be created"
    path, lease = copy.deepcopy(BUILTINS["leases"])
    for bad in ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123Z", "2026-01-01T00:00:00.123456789Z"):
        lease["spec"]["renewTime"] = bad
        st, err = api.call("POST", path, lease)
        assert st == 400 and "cannot be handled as a Lease" in err["message"], bad
    lease["spec"]["renewTime"] = lease["spec"]["acquireTime"] = "2026-01-01T00:00:00.123456Z"
    assert api.call("POST", path, lease)[0] == 201
    obj = daemonset("nulls")
    obj["spec"]["template"]["metadata"]["creationTimestamp"] = None
    obj["spec"]["template"]["spec"]["nodeSelector"] = None
    st, ds = api.call("POST", DS, obj)
    assert st == 201 and "creationTimestamp" not in ds["spec"]["template"]["metadata"]
    bad = daemonset("time")
    bad["spec"]["template"]["metadata"]["creationTimestamp"] = "yesterday"
    with fakekube.expect_invalid():
        st, err = api.call("POST", DS, bad)
    assert st == 422 and "creationTimestamp" in err["message"]


def test_generation_and_noop_writes(fakekube, api):
    fakekube.pause_daemonsets()
    st, ds = api.call("POST", DS, daemonset("g"))
    assert ds["metadata"]["generation"] == 1
    rv = ds["metadata"]["resourceVersion"]
    st, p = api.call("PATCH", f"{DS}/g", {"metadata": {"labels": {"x": "1"}}}, ctype=MERGE)
    assert p["metadata"]["generation"] == 1  # metadata is not spec
    st, p = api.call("PATCH", f"{DS}/g", {"spec": {"template": {"spec": {"hostPID": True}}}}, ctype=MERGE)
    assert p["metadata"]["generation"] == 2
    st, p2 = api.call("PATCH", f"{DS}/g/status", {"status": {"numberReady": 0}}, ctype=MERGE)
    assert p2["metadata"]["generation"] == 2
    # a write that changes nothing stores nothing: no new resourceVersion, no event
    rv = fakekube.get("daemonsets", "g", NS)["metadata"]["resourceVersion"]
    before = fakekube.resource_version
    w = api.watch(f"{DS}?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dg")
    try:
        st, same = api.call("PATCH", f"{DS}/g", {"metadata": {"labels": {"x": "1"}}}, ctype=MERGE)
        assert st == 200 and same["metadata"]["resourceVersion"] == rv
        cur = fakekube.get("daemonsets", "g", NS)
        st, same = api.call("PUT", f"{DS}/g", cur)
        assert st == 200 and same["metadata"]["resourceVersion"] == rv
        assert fakekube.resource_version == before
        api.call("PATCH", f"{DS}/g", {"metadata": {"labels": {"x": "2"}}}, ctype=MERGE)
        e = w.next_non_bookmark()  # the first event is the real change
        assert e["type"] == "MODIFIED" and e["object"]["metadata"]["labels"]["x"] == "2"
    finally:
        w.close()


def test_strategic_merge_patch(fakekube, api):
    ds = daemonset("smp")
    ds["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "s:1",
                                                         "env": [{"name": "A", "value": "1"}]})
    api.call("POST", DS, ds)
    st, p = api.call("PATCH", f"{DS}/smp", {
        "metadata": {"labels": {"l": "v"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "side", "env": [{"name": "B", "value": "2"}]},
            {"name": "main", "$patch": "delete"}]}}}}, ctype=SMP)
    assert st == 200, p
    cs = p["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in cs] == ["side"] and cs[0]["image"] == "s:1"
    assert cs[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert p["metadata"]["labels"] == {"l": "v"}
    fakekube.apply_crd(WIDGET_CRD)
    api.call("POST", WIDGETS, widget("w"))
    st, err = api.call("PATCH", f"{WIDGETS}/w", {"spec": {"size": 4}}, ctype=SMP)
    assert st == 415 and "application/merge-patch+json" in err["message"]  # not for custom resources


def test_lease_race(fakekube, api):
    """Two candidates update the same Lease from the same resourceVersion: one wins, one gets 409."""
    path, lease = copy.deepcopy(BUILTINS["leases"])
    st, cur = api.call("POST", path, lease)
    results = []
    barrier = threading.Barrier(2)

    def take(who):
        mine = copy.deepcopy(cur)
        mine["spec"]["holderIdentity"] = who
        mine["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z"
        barrier.wait()
        results.append((who, api.call("PUT", f"{path}/{lease['metadata']['name']}", mine)[0]))

    threads = [threading.Thread(target=take, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s for _, s in results) == [200, 409]
    winner = next(w for w, s in results if s == 200)
    assert fakekube.get("leases", lease["metadata"]["name"], NS)["spec"]["holderIdentity"] == winner


# --- custom resources ---------------------------------------------------------------------------

def test_crd_serves_resources(fakekube, api):
    st, crd = api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGET_CRD)
    assert st == 201 and fkmod.CRD_FINALIZER in crd["metadata"]["finalizers"]
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    got = fakekube.wait_for(lambda: (fakekube.get("customresourcedefinitions", "widgets.example.com")
                                     .get("status")), 3, "Established")
    assert {c["type"]: c["status"] for c in got["conditions"]} == {"NamesAccepted": "True",
                                                                   "Established": "True"}
    assert got["storedVersions"] == ["v1"]
    st, rl = api.call("GET", "/apis/example.com/v1")
    res = {r["name"]: r for r in rl["resources"]}
    assert res["widgets"]["namespaced"] and res["widgets"]["shortNames"] == ["wd"]
    assert "widgets/status" in res
    st, apis = api.call("GET", "/apis")
    assert "example.com" in {g["name"] for g in apis["groups"]}

    # defaults, pruning with a warning, preserved fields, int-or-string, nullable
    w = widget("w1", port="http", extra={"free": {"form": 1}}, owner=None, unknown=1)
    st, c, headers = call(api, "POST", WIDGETS, w)
    assert st == 201, c
    assert c["spec"] == {"color": "red", "size": 3, "port": "http", "extra": {"free": {"form": 1}},
                         "owner": None, "nested": {"mode": "auto"}}
    assert ("Warning", '299 - "unknown field \\"spec.unknown\\""') in headers
    assert fakekube.warnings[-1][2] == 'unknown field "spec.unknown"'
    assert c["metadata"]["generation"] == 1 and c["apiVersion"] == "example.com/v1"
    st, err, _ = call(api, "POST", f"{WIDGETS}?fieldValidation=Strict", widget("w2", unknown=1))
    assert st == 400 and err["reason"] == "BadRequest"
    assert err["message"] == ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
                              'unknown field "spec.unknown"')

    # validation: the causes, with the real server's paths and words
    bad = widget("w3", color="blue", size=0, port=1.5, tags=["a", "a"])
    del bad["spec"]["color"]
    bad["spec"]["color"] = "blue"
    with fakekube.expect_invalid():
        st, err = api.call("POST", WIDGETS, bad)
    assert st == 422 and err["details"]["kind"] == "Widget"
    causes = {c["field"]: c["message"] for c in err["details"]["causes"]}
    assert causes["spec.color"] == 'Unsupported value: "blue": supported values: "red", "green"'
    assert causes["spec.size"] == "Invalid value: 0: spec.size in body should be greater than or equal to 1"
    assert causes["spec.port"].startswith("Invalid value: 1.5: spec.port in body must be of type")
    assert causes["spec.tags[1]"] == 'Duplicate value: "a"'
    assert err["message"].startswith('Widget.example.com "w3" is invalid: [spec.')  # several: a list
    nocolor = widget("w4")
    del nocolor["spec"]["color"]
    with fakekube.expect_invalid():
        st, err = api.call("POST", WIDGETS, nocolor)
    assert st == 422 and err["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.color"}]
    with fakekube.expect_invalid():
        st, err = api.call("POST", WIDGETS, dict(widget("w5"), spec={"color": "red", "size": "big"}))
    assert 'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"' \
        in err["message"]

    # status subresource: /status writes status only; the main resource ignores status;
    # generation follows spec only
    st, s = api.call("PUT", f"{WIDGETS}/w1/status", dict(c, status={"state": "ready"},
                                                         spec=dict(c["spec"], color="green")))
    assert st == 200 and s["status"] == {"state": "ready"} and s["spec"]["color"] == "red"
    assert s["metadata"]["generation"] == 1
    st, m = api.call("PATCH", f"{WIDGETS}/w1", {"status": {"state": "x"}, "spec": {"color": "green"}},
                     ctype=MERGE)
    assert m["status"] == {"state": "ready"} and m["spec"]["color"] == "green"
    assert m["metadata"]["generation"] == 2
    st, m = api.call("PATCH", f"{WIDGETS}/w1", {"metadata": {"labels": {"k": "v"}}}, ctype=MERGE)
    assert m["metadata"]["generation"] == 2
    with fakekube.expect_invalid():
        st, err = api.call("PATCH", f"{WIDGETS}/w1/status", {"status": {"state": 5}}, ctype=MERGE)
    assert st == 422

    # lists carry apiVersion and kind; selectable fields select
    api.call("POST", WIDGETS, widget("w6", port=8080))
    st, lst = api.call("GET", f"{WIDGETS}?fieldSelector=spec.color%3Dred")
    assert lst["kind"] == "WidgetList" and [o["metadata"]["name"] for o in lst["items"]] == ["w6"]
    assert lst["items"][0]["apiVersion"] == "example.com/v1" and lst["items"][0]["kind"] == "Widget"
    st, err = api.call("GET", f"{WIDGETS}?fieldSelector=spec.size%3D3")
    assert st == 400


def test_crd_versions_scope_and_deletion(fakekube, api):
    fakekube.apply_crd(GADGET_CRD)
    st, g = api.call("POST", "/apis/example.com/v1beta1/gadgets", gadget("g1", "v1beta1"))
    assert st == 201 and g["apiVersion"] == "example.com/v1beta1" and "namespace" not in g["metadata"]
    st, g1 = api.call("GET", "/apis/example.com/v1/gadgets/g1")  # one storage, served in both versions
    assert st == 200 and g1["apiVersion"] == "example.com/v1" and g1["spec"] == {"anything": {"goes": 1}}
    assert fakekube.get("gadgets", "g1")["apiVersion"] == "example.com/v1"
    # no status subresource: status is an ordinary field and counts for generation
    st, p = api.call("PATCH", "/apis/example.com/v1/gadgets/g1", {"status": {"s": 1}}, ctype=MERGE)
    assert p["status"] == {"s": 1} and p["metadata"]["generation"] == 2
    assert api.call("GET", "/apis/example.com/v1/gadgets/g1/status")[0] == 404
    # deleting the CRD deletes its objects (seen by a watch), then stops serving them
    w = api.watch(f"/apis/example.com/v1/gadgets?watch=true&resourceVersion={fakekube.resource_version}")
    try:
        st, d = api.call("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                   "gadgets.example.com")
        assert st == 200 and d["metadata"]["deletionTimestamp"]
        e = w.next_non_bookmark()
        assert e["type"] == "DELETED" and e["object"]["metadata"]["name"] == "g1"
    finally:
        w.close()
    fakekube.wait_for(lambda: fakekube.get("customresourcedefinitions", "gadgets.example.com") is None, 5,
                      "the CRD gone")
    assert api.call("GET", "/apis/example.com/v1/gadgets")[0] == 404


@pytest.mark.parametrize("change,want", [
    (lambda c: c["metadata"].update(name="wrong.example.com"), 'must be spec.names.plural+"."+spec.group'),
    (lambda c: c["spec"]["versions"][0].update(storage=False), "exactly one version marked as storage"),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
     ["properties"].update(loose={"description": "no type"}), "properties[loose].type: Required value"),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
     ["properties"]["size"].update(default="three"), "properties[size].default"),
    (lambda c: c["spec"].update(scope="Global"), 'spec.scope: Unsupported value: "Global"'),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].update(
        metadata={"type": "object", "properties": {"labels": {"type": "object"}}}),
     "must not specify anything other than name and generateName"),
])
def test_crd_rejected(fakekube, api, change, want):
    crd = copy.deepcopy(WIDGET_CRD)
    change(crd)
    with fakekube.expect_invalid():
        st, err = api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert st == 422 and want in err["message"], err["message"]


def test_crd_update_changes_schema(fakekube, api):
    fakekube.apply_crd(WIDGET_CRD)
    crd = copy.deepcopy(WIDGET_CRD)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "color"]["enum"].append("blue")
    fakekube.apply_crd(crd)
    assert api.call("POST", WIDGETS, widget("b", color="blue"))[0] == 201
    cur = fakekube.get("customresourcedefinitions", "widgets.example.com")
    cur["spec"]["scope"] = "Cluster"
    with fakekube.expect_invalid():
        st, err = api.call("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                  "widgets.example.com", cur)
    assert st == 422 and "spec.scope" in err["message"] and "field is immutable" in err["message"]


@pytest.mark.skipif(not CP_CRD.exists(), reason="the ClusterPolicy CRD is not in deploy/ yet")
def test_cluster_policy_crd(fakekube, api):
    """The chart's CRD is accepted as a real server accepts it, and its ClusterPolicy is served with
    the status subresource, pruning NVIDIA's fields only where the schema does not preserve them."""
    assert fakekube.apply_crd(CP_CRD) == ["clusterpolicies.nvidia.com"]
    cps = "/apis/nvidia.com/v1/clusterpolicies"
    cp = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
          "spec": {"operator": {}, "daemonsets": {}, "driver": {"enabled": True}, "toolkit": {},
                   "devicePlugin": {}, "dcgm": {}, "dcgmExporter": {}, "gfd": {},
                   "nodeStatusExporter": {}, "sandboxWorkloads": {"enabled": False}}}
    st, got = api.call("POST", cps, cp)
    assert st == 201, got
    assert "status" not in got and got["metadata"]["generation"] == 1
    bad = copy.deepcopy(cp)
    bad["metadata"]["name"] = "bad"
    bad["spec"]["driver"]["enabled"] = "yes"
    with fakekube.expect_invalid():
        st, err = api.call("POST", cps, bad)
    assert st == 422 and "spec.driver.enabled" in err["message"]
    st, s = api.call("PATCH", f"{cps}/cluster-policy/status",
                     {"status": {"state": "ready", "namespace": NS}}, ctype=MERGE)
    assert st == 200 and s["status"]["state"] == "ready"
    with fakekube.expect_invalid():
        st, err = api.call("PATCH", f"{cps}/cluster-policy/status", {"status": {"state": "happy"}},
                           ctype=MERGE)
    assert st == 422 and "status.state" in err["message"]
    cond = {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}
    st, s = api.call("PATCH", f"{cps}/cluster-policy/status", {"status": {"conditions": [cond]}},
                     ctype=MERGE)
    assert st == 200 and s["status"]["conditions"] == [cond]
    with fakekube.expect_invalid():
        st, err = api.call("PATCH", f"{cps}/cluster-policy/status", {"status": {"conditions": [
            dict(cond, lastTransitionTime="now")]}}, ctype=MERGE)
    assert st == 422 and "lastTransitionTime in body must be of type date-time" in err["message"]


@pytest.mark.skipif(not DEPLOY.exists(), reason="deploy/gpuplane.yaml is not there yet")
def test_deploy_manifest_applies(fakekube):
    """`kubectl apply -f deploy/gpuplane.yaml` against a server that checks as the real one."""
    fakekube.strict_namespaces = True
    out = fakekube.apply(DEPLOY)
    kinds = {o["kind"] for o in out}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "ClusterPolicy"} <= kinds


# --- RBAC ---------------------------------------------------------------------------------------

def rbac(kind, name, rules=None, role=None, sa=None, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta}
    if rules is not None:
        obj["rules"] = rules
    if role:
        obj["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": role[0], "name": role[1]}
        obj["subjects"] = [{"kind": "ServiceAccount", "name": sa[1], "namespace": sa[0]}]
    return obj


def test_rbac_authorization(fakekube, api):
    """A service account's requests are allowed only by its Roles and ClusterRoles, as the RBAC
    authorizer: verbs, groups, resources, subresources, resourceNames, namespaces."""
    sa = fakekube.service_account("op", NS)
    op = Client(fakekube, token=sa["token"])
    assert op.call("GET", "/apis")[0] == 200 and op.call("GET", "/version")[0] == 200
    st, err = op.call("GET", "/api/v1/nodes")
    assert st == 403 and err["reason"] == "Forbidden"
    assert err["message"] == ('nodes is forbidden: User "system:serviceaccount:gpu-operator:op" cannot list '
                              'resource "nodes" in API group "" at the cluster scope')
    fakekube.apply([
        rbac("ClusterRole", "op", [{"apiGroups": [""], "resources": ["nodes"],
                                    "verbs": ["get", "list", "watch", "patch"]},
                                   {"apiGroups": ["example.com"], "resources": ["gadgets/status"],
                                    "verbs": ["update", "patch"]},
                                   {"apiGroups": ["example.com"], "resources": ["gadgets"],
                                    "verbs": ["get", "list", "watch"]}]),
        rbac("ClusterRoleBinding", "op", role=("ClusterRole", "op"), sa=(NS, "op")),
        rbac("Role", "op", [{"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["*"]},
                            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                             "resourceNames": ["53822513.nvidia.com"], "verbs": ["get", "update"]},
                            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                             "verbs": ["create"]}], namespace=NS),
        rbac("RoleBinding", "op", role=("Role", "op"), sa=(NS, "op"), namespace=NS),
    ])
    fakekube.add_node("n1")
    assert op.call("GET", "/api/v1/nodes")[0] == 200
    assert op.call("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": "b"}}}, ctype=MERGE)[0] == 200
    st, err = op.call("DELETE", "/api/v1/nodes/n1")
    assert st == 403 and 'nodes "n1" is forbidden' in err["message"] and "cannot delete" in err["message"]
    assert op.call("POST", DS, daemonset("mine"))[0] == 201
    st, err = op.call("POST", "/apis/apps/v1/namespaces/default/daemonsets", daemonset("x"))
    assert st == 403 and 'in the namespace "default"' in err["message"]
    assert op.call("GET", "/apis/apps/v1/daemonsets")[0] == 403  # all namespaces: cluster scope
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    assert op.call("POST", leases, BUILTINS["leases"][1])[0] == 201
    assert op.call("GET", f"{leases}/53822513.nvidia.com")[0] == 200
    assert op.call("GET", f"{leases}/other")[0] == 403  # resourceNames
    assert op.call("GET", f"{leases}?fieldSelector=metadata.name%3D53822513.nvidia.com")[0] == 403
    # a subresource needs its own rule
    fakekube.apply_crd(GADGET_CRD)
    g = fakekube.create(gadget("g"))
    assert op.call("PUT", "/apis/example.com/v1/gadgets/g", g)[0] == 403
    assert op.call("GET", "/apis/example.com/v1/gadgets/g")[0] == 200
    assert fakekube.allowed(sa["user"], "update", "gadgets", subresource="status")
    assert not fakekube.allowed(sa["user"], "update", "gadgets")
    assert fakekube.allowed(sa["user"], "watch", "nodes")
    # the files a process needs to be this service account
    kc = yaml.safe_load(sa["kubeconfig"].read_text())
    assert kc["users"][0]["user"]["token"] == sa["token"] and kc["contexts"][0]["context"]["namespace"] == NS
    assert (sa["sa_dir"] / "token").read_text() == sa["token"]
    assert sa["env"]["GPUPLANE_SERVICEACCOUNT_DIR"] == str(sa["sa_dir"])


def test_rbac_escalation_prevention(fakekube, api):
    """A service account may grant only what it holds, unless it may escalate or bind."""
    sa = fakekube.service_account("granter", NS)
    op = Client(fakekube, token=sa["token"])
    fakekube.apply([
        rbac("ClusterRole", "granter", [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles", "clusterrolebindings"],
             "verbs": ["create", "get", "update"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]),
        rbac("ClusterRoleBinding", "granter", role=("ClusterRole", "granter"), sa=(NS, "granter")),
        rbac("ClusterRole", "powerful", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    ])
    crs = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    crbs = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    ok = rbac("ClusterRole", "reader", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}])
    assert op.call("POST", crs, ok)[0] == 201
    more = rbac("ClusterRole", "deleter", [{"apiGroups": [""], "resources": ["nodes"],
                                            "verbs": ["get", "delete"]}])
    st, err = op.call("POST", crs, more)
    assert st == 403 and "is attempting to grant RBAC permissions not currently held" in err["message"]
    assert 'Resources:["nodes"], Verbs:["delete"]' in err["message"]
    assert 'Verbs:["get"]' not in err["message"]
    wild = rbac("ClusterRole", "wild", [{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}])
    assert op.call("POST", crs, wild)[0] == 403  # "*" is only covered by "*"
    st, err = op.call("POST", crbs, rbac("ClusterRoleBinding", "b1", role=("ClusterRole", "powerful"),
                                         sa=(NS, "granter")))
    assert st == 403 and "not currently held" in err["message"]
    assert op.call("POST", crbs, rbac("ClusterRoleBinding", "b2", role=("ClusterRole", "reader"),
                                      sa=(NS, "x")))[0] == 201
    # the bind verb on the role lets it bind what it does not hold; escalate lets it write it
    fakekube.apply([
        rbac("ClusterRole", "binder", [{"apiGroups": ["rbac.authorization.k8s.io"],
                                        "resources": ["clusterroles"], "verbs": ["bind", "escalate"],
                                        "resourceNames": ["powerful", "deleter"]}]),
        rbac("ClusterRoleBinding", "binder", role=("ClusterRole", "binder"), sa=(NS, "granter")),
    ])
    assert op.call("POST", crbs, rbac("ClusterRoleBinding", "b3", role=("ClusterRole", "powerful"),
                                      sa=(NS, "y")))[0] == 201
    assert op.call("POST", crs, more)[0] == 201


@pytest.mark.skipif(not DEPLOY.exists(), reason="deploy/gpuplane.yaml is not there yet")
def test_deploy_rbac_lets_the_operator_work(fakekube):
    """With deploy/gpuplane.yaml applied, the operator's service account may do what the contract
    says the operator does (a sample of it)."""
    fakekube.apply(DEPLOY)
    user = fakekube.service_account("gpu-operator", "gpu-operator")["user"]
    need = [("list", "nodes", None), ("watch", "nodes", None), ("patch", "nodes", None),
            ("list", "clusterpolicies", None), ("watch", "clusterpolicies", None),
            ("update", "clusterpolicies", "status"),
            ("create", "daemonsets", None), ("update", "daemonsets", None), ("delete", "daemonsets", None),
            ("list", "daemonsets", None), ("watch", "daemonsets", None),
            ("create", "services", None), ("create", "serviceaccounts", None),
            ("create", "runtimeclasses", None), ("create", "events", None),
            ("get", "leases", None), ("update", "leases", None)]
    missing = []
    for verb, resource, sub in need:
        ns = NS if fakekube.resource(resource).namespaced else None
        name = "53822513.nvidia.com" if resource == "leases" else None
        if not fakekube.allowed(user, verb, resource, namespace=ns, name=name, subresource=sub):
            missing.append((verb, resource, sub))
    assert not missing, missing


# --- garbage collection, namespace termination ------------------------------------------------

def test_garbage_collection(fakekube, api):
    """Deleting the owner deletes its dependents in the background (cluster-scoped and namespaced,
    in a cascade, with DELETED events); one with another live owner stays; Orphan strips the
    reference instead; a dependent's finalizer holds it; a namespaced owner cannot own a
    cluster-scoped dependent."""
    fakekube.apply_crd(GADGET_CRD)
    fakekube.daemonset_pods = True
    owner = fakekube.create(gadget("cp"))
    other = fakekube.create(gadget("other"))
    ref = owner_ref(owner)
    st, ds = api.call("POST", DS, daemonset("dep-ds", owners=[ref]))
    fakekube.add_node("n1")
    pods = fakekube.wait_for(lambda: fakekube.objects("pods", NS), 3, "the DaemonSet's pod")
    assert pods[0]["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
    crole = dict(copy.deepcopy(BUILTINS["clusterroles"][1]))
    crole["metadata"]["ownerReferences"] = [ref]
    api.call("POST", BUILTINS["clusterroles"][0], crole)
    shared = copy.deepcopy(BUILTINS["configmaps"][1])
    shared["metadata"] = {"name": "shared", "ownerReferences": [ref, owner_ref(other, controller=False)]}
    api.call("POST", BUILTINS["configmaps"][0], shared)
    held = copy.deepcopy(BUILTINS["serviceaccounts"][1])
    held["metadata"] = {"name": "held", "ownerReferences": [ref], "finalizers": ["example.com/hold"]}
    api.call("POST", BUILTINS["serviceaccounts"][0], held)

    w = api.watch(f"{DS}?watch=true&resourceVersion={fakekube.resource_version}")
    try:
        st, _ = api.call("DELETE", "/apis/example.com/v1/gadgets/cp")
        assert st == 200
        e = w.next_non_bookmark()
        assert e["type"] == "DELETED" and e["object"]["metadata"]["name"] == "dep-ds"
    finally:
        w.close()
    fakekube.wait_for(lambda: not fakekube.objects("pods", NS) and
                      fakekube.get("clusterroles", "gpuplane:node-reader") is None, 3, "the cascade")
    assert fakekube.get("configmaps", "shared", NS) is not None  # its other owner lives
    sa = fakekube.get("serviceaccounts", "held", NS)
    assert sa["metadata"]["deletionTimestamp"]  # waits for its finalizer
    api.call("PATCH", f"{BUILTINS['serviceaccounts'][0]}/held", {"metadata": {"finalizers": None}},
             ctype=MERGE)
    assert fakekube.get("serviceaccounts", "held", NS) is None
    api.call("DELETE", "/apis/example.com/v1/gadgets/other")
    fakekube.wait_for(lambda: fakekube.get("configmaps", "shared", NS) is None, 3, "the last owner's GC")

    # Orphan: the dependents stay, without the reference
    o2 = fakekube.create(gadget("o2"))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orphan", "namespace": NS,
                                                                 "ownerReferences": [owner_ref(o2)]}}
    fakekube.create(cm)
    st, _ = api.call("DELETE", "/apis/example.com/v1/gadgets/o2", {"propagationPolicy": "Orphan"})
    assert st == 200
    left = fakekube.get("configmaps", "orphan", NS)
    assert left is not None and "ownerReferences" not in left["metadata"]

    # a cluster-scoped dependent naming a namespaced owner is never collected
    bad = copy.deepcopy(BUILTINS["runtimeclasses"][1])
    bad["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                                           "uid": "00000000-0000-0000-0000-000000000000"}]
    fakekube.create(bad)
    # an object created with an owner that does not exist is collected
    fakekube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "dangling", "namespace": NS, "ownerReferences": [dict(owner_ref(owner))]}})
    fakekube.wait_for(lambda: fakekube.get("configmaps", "dangling", NS) is None, 3, "a dangling GC")
    assert fakekube.get("runtimeclasses", "nvidia") is not None
    fakekube.gc_enabled = False
    fakekube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "kept", "namespace": NS, "ownerReferences": [dict(owner_ref(owner))]}})
    fakekube.create(gadget("tick"))  # a change the controllers see after "kept"
    fakekube.wait_for(lambda: fakekube.get("gadgets", "tick"), 3)
    assert fakekube.get("configmaps", "kept", NS) is not None
    assert not fakekube.controller_errors


def test_namespace_termination(fakekube, api):
    fakekube.strict_namespaces = True
    cm = {"metadata": {"name": "c"}, "data": {}}
    st, err = api.call("POST", "/api/v1/namespaces/ops/configmaps", cm)
    assert st == 404 and err["message"] == 'namespaces "ops" not found'
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "ops"}})
    assert api.call("POST", "/api/v1/namespaces/ops/configmaps", cm)[0] == 201
    held = {"metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    assert api.call("POST", "/api/v1/namespaces/ops/serviceaccounts", held)[0] == 201
    st, ns = api.call("DELETE", "/api/v1/namespaces/ops")
    assert st == 200 and ns["status"]["phase"] == "Terminating"
    st, err = api.call("POST", "/api/v1/namespaces/ops/configmaps", dict(cm, metadata={"name": "d"}))
    assert st == 403 and "because it is being terminated" in err["message"]
    fakekube.wait_for(lambda: fakekube.get("configmaps", "c", "ops") is None, 3, "the contents gone")
    assert fakekube.get("namespaces", "ops") is not None  # a finalizer inside holds it
    api.call("PATCH", "/api/v1/namespaces/ops/serviceaccounts/held", {"metadata": {"finalizers": None}},
             ctype=MERGE)
    fakekube.wait_for(lambda: fakekube.get("namespaces", "ops") is None, 3, "the namespace gone")


# --- the DaemonSet controller emulator ----------------------------------------------------------

def ds_status(fk, name):
    return fk.daemonset_status(name, NS) or {}


def wait_status(fk, name, what="the DaemonSet status", timeout=5, **want):
    def ok():
        st = ds_status(fk, name)
        return st if all(st.get(k, 0) == v for k, v in want.items()) else None
    try:
        return fk.wait_for(ok, timeout, what)
    except AssertionError:
        raise AssertionError(f"{what}: wanted {want}, have {ds_status(fk, name)}")


def test_daemonset_scheduling(fakekube, api):
    """Which nodes a DaemonSet's pods land on: nodeSelector, required node affinity (In, NotIn,
    Exists, DoesNotExist), taints against tolerations (plus the controller's own); node label
    changes and node deletion re-evaluate."""
    fakekube.add_node("gpu-a", labels={"nvidia.com/gpu.deploy.device-plugin": "true",
                                       "nvidia.com/gpu.present": "true"})
    fakekube.add_node("gpu-b", labels={"nvidia.com/gpu.deploy.device-plugin": "true",
                                       "nvidia.com/gpu.deploy.dra-driver": "true",
                                       "nvidia.com/gpu.present": "true"},
                      taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    fakekube.add_node("cpu", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
                      unschedulable=True)
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    cases = {
        "plugin": (dict(node_selector={"nvidia.com/gpu.deploy.device-plugin": "true"}, tolerations=tol), 2),
        "plugin-no-tol": (dict(node_selector={"nvidia.com/gpu.deploy.device-plugin": "true"}), 1),
        "not-dra": (dict(node_selector={"nvidia.com/gpu.deploy.device-plugin": "true"}, tolerations=tol,
                         affinity=[{"matchExpressions": [{"key": "nvidia.com/gpu.deploy.dra-driver",
                                                          "operator": "NotIn", "values": ["true"]}]}]), 1),
        "exists": (dict(affinity=[{"matchExpressions": [{"key": "nvidia.com/gpu.present",
                                                         "operator": "Exists"}]}], tolerations=tol), 2),
        "absent": (dict(affinity=[{"matchExpressions": [{"key": "nvidia.com/gpu.present",
                                                         "operator": "DoesNotExist"}]}]), 1),
        "or-terms": (dict(affinity=[
            {"matchExpressions": [{"key": "nvidia.com/gpu.deploy.dra-driver", "operator": "In",
                                   "values": ["true"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cpu"]}]}],
            tolerations=tol), 2),
        "everywhere": (dict(tolerations=[{"operator": "Exists"}]), 3),
    }
    for name, (kw, _) in cases.items():
        assert api.call("POST", DS, daemonset(name, **kw))[0] == 201
    for name, (_, want) in cases.items():
        wait_status(fakekube, name, f"{name} scheduled", desiredNumberScheduled=want,
                    currentNumberScheduled=want, numberAvailable=want, numberReady=want,
                    updatedNumberScheduled=want, numberUnavailable=0, observedGeneration=1)
    st = ds_status(fakekube, "absent")
    assert "numberUnavailable" not in st  # omitted when zero, as the Go type serialises it
    # the node labeller marks gpu-a for DRA: the device plugin leaves it, DRA arrives
    api.call("PATCH", "/api/v1/nodes/gpu-a", {"metadata": {"labels": {
        "nvidia.com/gpu.deploy.dra-driver": "true"}}}, ctype=MERGE)
    wait_status(fakekube, "not-dra", "re-evaluated on a label change", desiredNumberScheduled=0)
    wait_status(fakekube, "or-terms", desiredNumberScheduled=3)
    fakekube.remove_node("gpu-b")
    wait_status(fakekube, "plugin", "re-evaluated on a node deletion", desiredNumberScheduled=1)


def test_daemonset_availability(fakekube, api):
    """The test decides when pods become available, per DaemonSet and per node."""
    for n in ("n1", "n2", "n3"):
        fakekube.add_node(n)
    fakekube.daemonset_available("slow-*", after=0.4)
    fakekube.daemonset_available("never", after=fakekube.NEVER)
    fakekube.daemonset_available(lambda ds: ds["metadata"]["name"] == "partial", after=fakekube.NEVER,
                                 nodes=["n2"])
    t0 = time.monotonic()
    for name in ("slow-1", "never", "partial", "quick"):
        api.call("POST", DS, daemonset(name))
    wait_status(fakekube, "quick", desiredNumberScheduled=3, numberAvailable=3)
    st = wait_status(fakekube, "slow-1", "pods scheduled, not yet available", desiredNumberScheduled=3)
    if time.monotonic() - t0 < 0.3:
        assert st["numberReady"] == 0 and st["numberUnavailable"] == 3
    wait_status(fakekube, "slow-1", "available after the delay", numberAvailable=3, numberUnavailable=0)
    assert time.monotonic() - t0 >= 0.4
    wait_status(fakekube, "partial", numberAvailable=2, numberUnavailable=1, numberReady=2)
    st = wait_status(fakekube, "never", desiredNumberScheduled=3, updatedNumberScheduled=3)
    assert st["numberReady"] == 0 and st["numberUnavailable"] == 3 and "numberAvailable" not in st
    # later rules win, for running pods too: healed, then broken on one node
    fakekube.daemonset_available("never", after=0)
    wait_status(fakekube, "never", "healed", numberAvailable=3)
    fakekube.daemonset_available("never", after=fakekube.NEVER, nodes="n3")
    wait_status(fakekube, "never", "one node broken", numberAvailable=2, numberUnavailable=1)
    # minReadySeconds: ready first, available later
    ds = daemonset("minready")
    ds["spec"]["minReadySeconds"] = 1
    api.call("POST", DS, ds)
    st = wait_status(fakekube, "minready", numberReady=3)
    assert "numberAvailable" not in st or st["numberAvailable"] < 3 or time.monotonic() - t0 > 1
    wait_status(fakekube, "minready", numberAvailable=3)


def test_daemonset_rolling_update(fakekube, api):
    """A spec change: generation 2, observedGeneration follows when the controller has seen it,
    old pods are replaced maxUnavailable at a time; OnDelete replaces only deleted pods."""
    for n in ("n1", "n2", "n3", "n4"):
        fakekube.add_node(n)
    fakekube.daemonset_available("*", after=0.2)
    api.call("POST", DS, daemonset("roll"))
    api.call("POST", DS, daemonset("ondelete", strategy={"type": "OnDelete"}))
    for name in ("roll", "ondelete"):
        wait_status(fakekube, name, numberAvailable=4, updatedNumberScheduled=4, observedGeneration=1)
    fakekube.pause_daemonsets()
    for name in ("roll", "ondelete"):
        st, ds = api.call("PATCH", f"{DS}/{name}", {"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "busybox:2"}]}}}}, ctype=MERGE)
        assert ds["metadata"]["generation"] == 2
    assert ds_status(fakekube, "roll")["observedGeneration"] == 1  # the controller has not seen it
    seen = []
    fakekube.resume_daemonsets()

    def progress():
        st = ds_status(fakekube, "roll")
        seen.append((st.get("updatedNumberScheduled", 0), st.get("numberUnavailable", 0)))
        return st.get("observedGeneration") == 2 and st.get("updatedNumberScheduled") == 4 and \
            st.get("numberAvailable") == 4
    fakekube.wait_for(progress, 10, "the rolling update")
    assert max(u for _, u in seen) <= 1  # maxUnavailable 1 (the default)
    assert any(0 < upd < 4 for upd, _ in seen)  # one node at a time
    st = wait_status(fakekube, "ondelete", observedGeneration=2)
    assert st.get("updatedNumberScheduled", 0) == 0 and st["numberAvailable"] == 4
    assert fakekube.delete_daemonset_pods("ondelete", nodes=["n1", "n2"]) == 2
    wait_status(fakekube, "ondelete", "deleted pods come back updated", updatedNumberScheduled=2,
                numberAvailable=4)


def test_daemonset_pods(fakekube, api):
    """With daemonset_pods, the emulator keeps Pod objects: on their node, owned by the DaemonSet,
    Ready when available; a deleted pod is replaced."""
    fakekube.daemonset_pods = True
    fakekube.add_node("n1")
    fakekube.add_node("n2")
    fakekube.daemonset_available("*", after=fakekube.NEVER, nodes="n2")
    st, ds = api.call("POST", DS, daemonset("withpods"))
    pods = fakekube.wait_for(lambda: len(fakekube.objects("pods", NS)) == 2 and fakekube.objects("pods", NS),
                             3, "two pods")
    by_node = {p["spec"]["nodeName"]: p for p in pods}
    assert set(by_node) == {"n1", "n2"}
    p1 = fakekube.wait_for(lambda: next((p for p in fakekube.objects("pods", NS)
                                         if p["spec"]["nodeName"] == "n1" and
                                         p["status"]["phase"] == "Running"), None), 3, "n1's pod ready")
    assert p1["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
    assert p1["metadata"]["labels"]["app"] == "withpods"
    assert {c["type"]: c["status"] for c in p1["status"]["conditions"]}["Ready"] == "True"
    assert by_node["n2"]["status"]["phase"] == "Pending"
    st, lst = api.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
    assert [p["metadata"]["name"] for p in lst["items"]] == [p1["metadata"]["name"]]
    api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/{p1['metadata']['name']}")
    fakekube.wait_for(lambda: any(p["spec"]["nodeName"] == "n1" and p["metadata"]["name"] !=
                                  p1["metadata"]["name"] for p in fakekube.objects("pods", NS)),
                      3, "a replacement pod")


# --- faults and observation ---------------------------------------------------------------------

def test_restart_keeps_or_loses_state(fakekube, api):
    fakekube.apply_crd(WIDGET_CRD)
    api.call("POST", WIDGETS, widget("keep"))
    rv = fakekube.resource_version
    w = api.watch(f"{WIDGETS}?watch=true&resourceVersion={rv}")
    refused = []

    def probe():  # during the down time, connections are refused
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not refused:
            try:
                api.call("GET", "/version", timeout=0.5)
            except ConnectionRefusedError:
                refused.append(True)
            except (OSError, ssl.SSLError):
                pass
    t = threading.Thread(target=probe)
    t.start()
    try:
        fakekube.restart(down=0.5)
        t.join()
        assert refused
        try:
            assert w.next_non_bookmark() is None
        except (OSError, ValueError, ssl.SSLError) as e:  # cut mid-stream
            assert e is not None
    finally:
        w.close()
    assert fakekube.restarts == 1
    st, got = api.call("GET", f"{WIDGETS}/keep")
    assert st == 200
    w = api.watch(f"{WIDGETS}?watch=true&resourceVersion={rv}")  # resuming works: history kept
    try:
        api.call("POST", WIDGETS, widget("after"))
        assert w.next_non_bookmark()["object"]["metadata"]["name"] == "after"
    finally:
        w.close()
    fakekube.restart(keep_state=False)
    assert api.call("GET", "/apis/example.com/v1")[0] == 404  # the CRD went with the state
    assert fakekube.objects("nodes") == []
    st, err = api.call("GET", f"/api/v1/nodes?watch=true&resourceVersion={rv}")
    assert st == 200  # a watch: ERROR 410 as its first event
    w = api.watch(f"/api/v1/nodes?watch=true&resourceVersion={rv}")
    try:
        e = w.next()
        assert e["type"] == "ERROR" and e["object"]["code"] == 410
    finally:
        w.close()


def test_expire_watches(fakekube, api):
    fakekube.add_node("n1")
    st, lst = api.call("GET", "/api/v1/nodes")
    rv = lst["metadata"]["resourceVersion"]
    w = api.watch(f"/api/v1/nodes?watch=true&resourceVersion={rv}")
    try:
        fakekube.wait_for(fakekube.watch_count, 3, "the watch")
        fakekube.expire_watches()
        e = w.next_non_bookmark()
        assert e["type"] == "ERROR" and e["object"]["code"] == 410 and e["object"]["reason"] == "Expired"
        assert w.next() is None
    finally:
        w.close()
    w = api.watch(f"/api/v1/nodes?watch=true&resourceVersion={rv}")  # resuming: 410 again
    try:
        assert w.next()["object"]["code"] == 410
    finally:
        w.close()
    st, lst = api.call("GET", "/api/v1/nodes")  # list again, watch from there
    w = api.watch(f"/api/v1/nodes?watch=true&resourceVersion={lst['metadata']['resourceVersion']}")
    try:
        fakekube.add_node("n2")
        assert w.next_non_bookmark()["object"]["metadata"]["name"] == "n2"
    finally:
        w.close()


def test_injected_faults_per_path(fakekube, api):
    fakekube.pause_daemonsets()
    fakekube.inject("PUT", f"{DS}/.*", status=500, count=None)
    fakekube.inject("GET", "/api/v1/nodes", status=None, delay=0.3, count=None)
    api.call("POST", DS, daemonset("f"))
    cur = fakekube.get("daemonsets", "f", NS)
    for _ in range(3):
        assert api.call("PUT", f"{DS}/f", cur)[0] == 500
    t = time.monotonic()
    assert api.call("GET", "/api/v1/nodes")[0] == 200 and time.monotonic() - t >= 0.3
    fakekube.clear_injections()
    assert api.call("PUT", f"{DS}/f", cur)[0] == 200


def test_write_log(fakekube, api):
    """Client writes are counted per verb and resource with their time; reads, watches and the
    emulated controllers' own writes are not."""
    fakekube.add_node("n1")
    t0 = time.time()
    api.call("POST", DS, daemonset("wl"))
    api.call("PATCH", f"{DS}/wl", {"metadata": {"labels": {"a": "b"}}}, ctype=MERGE)
    api.call("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": "b"}}}, ctype=MERGE)
    api.call("GET", f"{DS}/wl")
    api.call("GET", DS)
    wait_status(fakekube, "wl", desiredNumberScheduled=1, numberAvailable=1)  # the emulator wrote status
    api.call("DELETE", f"{DS}/wl")
    writes = fakekube.writes(since=t0)
    assert [(w["verb"], w["resource"], w["name"]) for w in writes] == [
        ("create", "daemonsets.apps", None), ("patch", "daemonsets.apps", "wl"),
        ("patch", "nodes", "n1"), ("delete", "daemonsets.apps", "wl")]
    assert all(w["time"] >= t0 and w["status"] in (200, 201) for w in writes)
    assert writes[0]["namespace"] == NS
    assert fakekube.write_counts(since=t0) == {("create", "daemonsets.apps"): 1,
                                               ("patch", "daemonsets.apps"): 1, ("patch", "nodes"): 1,
                                               ("delete", "daemonsets.apps"): 1}
    assert fakekube.writes(since=time.time()) == []
    assert [w["verb"] for w in fakekube.writes(resource="nodes")] == ["patch"]
    gets = [r for r in fakekube.requests("GET") if r.get("resource") == "daemonsets.apps"]
    assert [r["verb"] for r in gets] == ["get", "list"]
    # the store's changes, whoever made them: the emulator's status writes are there
    ch = fakekube.changes(resource="daemonsets.apps")
    assert [c["type"] for c in ch][0] == "ADDED" and ch[-1]["type"] == "DELETED"
    assert len(ch) > 3 and all(c["name"] == "wl" and c["namespace"] == NS for c in ch)
    assert [c["name"] for c in fakekube.changes(type="ADDED", resource="nodes")] == ["n1"]
    assert fakekube.changes(since=ch[-1]["rv"], resource="daemonsets") == []


def test_events_for(fakekube, api):
    api.call("POST", "/api/v1/namespaces/default/events", {
        "metadata": {"name": "cp.1"}, "involvedObject": {"apiVersion": "nvidia.com/v1",
                                                         "kind": "ClusterPolicy", "name": "cluster-policy"},
        "reason": "Reconciled", "message": "ready", "type": "Normal",
        "lastTimestamp": "2026-01-01T00:00:01Z"})
    api.call("POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events", {
        "metadata": {"name": "ds.1"}, "regarding": {"kind": "DaemonSet", "name": "x", "namespace": NS},
        "reason": "Updated", "note": "n", "type": "Normal", "action": "Update",
        "reportingController": "gpuplane", "reportingInstance": "a",
        "eventTime": "2026-01-01T00:00:00.000000Z"})
    assert [e["reason"] for e in fakekube.events_for("ClusterPolicy", "cluster-policy")] == ["Reconciled"]
    assert [e["metadata"]["name"] for e in fakekube.events_for("DaemonSet", "x", NS)] == ["ds.1"]
    assert fakekube.events_for("DaemonSet", "x", "elsewhere") == []


def test_hooks_for_tests(fakekube):
    """create/apply/patch go through validation as a client's request; add_node makes a schema-valid
    Node with allocatable; label_node merges."""
    n = fakekube.add_node("g1", labels={"feature.node.kubernetes.io/pci-10de.present": "true"},
                          allocatable={"nvidia.com/gpu": 8})
    assert n["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert n["metadata"]["labels"]["kubernetes.io/hostname"] == "g1"
    assert n["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    n = fakekube.label_node("g1", {"a": "1", "kubernetes.io/os": None})
    assert n["metadata"]["labels"]["a"] == "1" and "kubernetes.io/os" not in n["metadata"]["labels"]
    with pytest.raises(fkmod.ApiError) as e:
        fakekube.add_node("Bad")
    assert e.value.code == 422
    with pytest.raises(fkmod.ApiError):
        fakekube.create(dict(daemonset("x"), spec={}))
    out = fakekube.apply([BUILTINS["configmaps"][1] | {"metadata": {"name": "a", "namespace": NS}}])
    assert out[0]["metadata"]["namespace"] == NS
    again = fakekube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "a", "namespace": NS}, "data": {"k": "v"}})
    assert again[0]["data"] == {"k": "v"} and again[0]["metadata"]["uid"] == out[0]["metadata"]["uid"]
    p = fakekube.patch("configmaps", "a", {"data": {"k": None}}, namespace=NS)
    assert p["data"] == {}
    assert not fakekube.violations  # hooks do not count as the client's rejections


# --- crdschema on its own -----------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "m": {"type": "object", "additionalProperties": {"type": "integer"}},
    "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
             "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                        "v": {"type": "string", "default": "d"}}}},
    "emb": {"type": "object", "x-kubernetes-embedded-resource": True,
            "properties": {"spec": {"type": "object"}}},
    "pat": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
    "one": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
}}}}


@pytest.mark.parametrize("spec,out,causes,pruned", [
    ({"m": {"x": 1}}, {"m": {"x": 1}}, [], []),
    ({"m": {"x": "1"}}, None, ['spec.m.x: Invalid value: "string": spec.m.x in body must be of type integer: '
                               '"string"'], []),
    ({"list": [{"name": "a"}, {"name": "b", "x": 1}]}, {"list": [{"name": "a", "v": "d"},
                                                                {"name": "b", "v": "d"}]},
     [], ["spec.list[1].x"]),
    ({"list": [{"name": "a"}, {"name": "a"}]}, None, ['spec.list[1]: Duplicate value: {"name": "a"}'], []),
    ({"emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "x": 1}},
     {"emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}, [], ["spec.emb.x"]),
    ({"pat": "ABC"}, None, ["spec.pat: Invalid value: \"ABC\": spec.pat in body should match '^[a-z]+$'"], []),
    ({"pat": "abcdefg"}, None, ["spec.pat: Too long: may not be longer than 5"], []),
    ({"one": {"a": "x", "b": "y"}}, None, ['spec.one: Invalid value: "object": spec.one in body must '
                                           'validate one and only one schema (oneOf)'], []),
    ({"one": {"b": "y"}}, {"one": {"b": "y"}}, [], []),
])
def test_crdschema_cases(spec, out, causes, pruned):
    got, c, p = crdschema.apply(SCHEMA, {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"},
                                         "spec": spec})
    assert [f"{f}: {m}" for f, m in c] == causes and p == pruned
    if out is not None:
        assert got["spec"] == out and got["metadata"] == {"name": "n"}


# --- the script ---------------------------------------------------------------------------------

def test_script_mode_for_the_demo(tmp_path):
    crd = tmp_path / "crd.yaml"
    crd.write_text(yaml.safe_dump(WIDGET_CRD))
    objs = tmp_path / "objs.yaml"
    objs.write_text(yaml.safe_dump_all([widget("from-file") | {"metadata": {"name": "from-file",
                                                                           "namespace": "default"}}]))
    p = subprocess.Popen([sys.executable, fkmod.__file__, "--port", "0", "--dir", str(tmp_path / "d"),
                          "--token", "tok", "--apply", str(crd), "--apply", str(objs),
                          "--node", "gpu-1:nvidia.com/gpu.present=true,x=y", "--node", "cpu-1",
                          "--daemonsets-available-after", "never"],
                         stdout=subprocess.PIPE, text=True)
    try:
        url = p.stdout.readline().strip()
        port = int(url.rsplit(":", 1)[1])

        class FK:  # what Client needs of a server
            certs = type("C", (), {"ca": tmp_path / "d" / "ca.crt"})
        FK.port = port
        c = Client(FK, token="tok")
        st, nodes = c.call("GET", "/api/v1/nodes")
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["cpu-1", "gpu-1"]
        assert nodes["items"][1]["metadata"]["labels"]["x"] == "y"
        st, w = c.call("GET", f"{WIDGETS}/from-file")
        assert st == 200 and w["spec"]["size"] == 3
        st, ds = c.call("POST", DS, daemonset("d"))
        assert st == 201
        deadline = time.monotonic() + 5
        while True:  # the emulator runs in the script too; its pods never become available here
            st, got = c.call("GET", f"{DS}/d")
            if got["status"].get("desiredNumberScheduled") == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert got["status"]["desiredNumberScheduled"] == 2 and got["status"]["numberUnavailable"] == 2
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=5) == 0
