# SPDX-License-Identifier: Apache-2.0
"""The fake API server (fakekube.py) behaves as kube-apiserver does for what gpuplane uses.

Driven with http.client over TLS, as a client that trusts only the fake's CA: discovery,
authentication, every verb, selectors, pagination, watches and bookmarks, the error statuses
(401/404/409/410/415/422) with kube-apiserver's wording, and the test hooks.
"""
import base64
import copy
import http.client
import json
import os
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

import fakekube as fkmod  # noqa: E402

RES = "/apis/resource.k8s.io/v1"
SLICES = f"{RES}/resourceslices"
CLAIMS = f"{RES}/namespaces/default/resourceclaims"


class Client:
    """One HTTPS connection per request; token or client certificate from the fake's files."""

    def __init__(self, fk, token=None, cert=False, ca=None):
        self.fk, self.token = fk, token
        self.ctx = ssl.create_default_context(cafile=str(ca or fk.certs.ca))
        if cert:
            self.ctx.load_cert_chain(*cert) if isinstance(cert, tuple) else \
                self.ctx.load_cert_chain(fk.certs.client_cert, fk.certs.client_key)

    def conn(self, timeout=5):
        return http.client.HTTPSConnection("127.0.0.1", self.fk.port, context=self.ctx, timeout=timeout)

    def headers(self, ctype="application/json"):
        h = {"Accept": "application/json", "Content-Type": ctype}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def call(self, method, path, body=None, ctype="application/json", timeout=5):
        c = self.conn(timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers=self.headers(ctype))
            r = c.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw.decode()
        finally:
            c.close()

    def watch(self, path, timeout=5):
        c = self.conn(timeout)
        c.request("GET", path, headers=self.headers())
        r = c.getresponse()
        assert r.status == 200
        return Watch(c, r)


class Watch:
    def __init__(self, conn, resp):
        self.conn, self.resp = conn, resp

    def next(self):
        """The next event, or None when the stream ended."""
        line = self.resp.readline()
        return json.loads(line) if line.strip() else None

    def next_non_bookmark(self):
        while True:
            e = self.next()
            if e is None or e["type"] != "BOOKMARK":
                return e

    def close(self):
        self.conn.close()


@pytest.fixture
def api(fakekube):
    return Client(fakekube, token=fakekube.token)


def slice_obj(name, node="node-a", driver="gpu.nvidia.com", labels=None, devices=1):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}}
                                 for i in range(devices)]}}


def claim_obj(name, **meta):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": dict(name=name, **meta),
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}


def allocation():
    return {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}]}}}


# --- discovery, auth, configuration ---

def test_discovery(fakekube, api):
    st, v = Client(fakekube).call("GET", "/version")
    assert st == 200 and v["major"] == "1" and v["gitVersion"].startswith("v1.")
    st, apis = api.call("GET", "/apis")
    assert st == 200 and apis["kind"] == "APIGroupList"
    group = next(g for g in apis["groups"] if g["name"] == "resource.k8s.io")
    assert group["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1"
    st, rl = api.call("GET", RES)
    names = {r["name"]: r for r in rl["resources"]}
    assert rl["groupVersion"] == "resource.k8s.io/v1"
    assert not names["resourceslices"]["namespaced"] and names["resourceclaims"]["namespaced"]
    assert "resourceclaims/status" in names and "watch" in names["resourceslices"]["verbs"]
    st, core = api.call("GET", "/api")
    assert st == 200 and core["versions"] == ["v1"]
    st, _ = api.call("GET", "/apis/nothing.example.com/v1/things")
    assert st == 404


def test_auth(fakekube, tmp_path):
    for client in (Client(fakekube), Client(fakekube, token="wrong")):
        st, body = client.call("GET", SLICES)
        assert st == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    assert Client(fakekube, token=fakekube.token).call("GET", SLICES)[0] == 200
    assert Client(fakekube, cert=True).call("GET", SLICES)[0] == 200
    # a certificate from another CA does not get through the handshake
    other = fkmod.Certs(tmp_path / "other")
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        Client(fakekube, cert=(other.client_cert, other.client_key)).call("GET", SLICES)
    # the client does not trust a server outside its CA
    with pytest.raises(ssl.SSLCertVerificationError):
        Client(fakekube, token=fakekube.token, ca=other.ca).call("GET", SLICES)
    old = fakekube.token
    new = fakekube.rotate_token()
    assert Client(fakekube, token=old).call("GET", SLICES)[0] == 401
    assert Client(fakekube, token=new).call("GET", SLICES)[0] == 200
    assert fakekube.token_file.read_text() == new
    assert (fakekube.sa_dir / "token").read_text() == new
    entry = fakekube.requests(path="resourceslices")[0]
    assert "Authorization" not in entry["headers"] and "authorization" not in entry["headers"]


def test_kubeconfigs(fakekube):
    d = fakekube.dir
    for name, path in fakekube.kubeconfigs.items():
        kc = yaml.safe_load(path.read_text())
        assert kc["current-context"] == "fakekube", name
        assert kc["clusters"][0]["cluster"]["server"] == fakekube.url
        user = kc["users"][0]["user"]
        cluster = kc["clusters"][0]["cluster"]
        if "certificate-authority-data" in cluster:
            assert base64.b64decode(cluster["certificate-authority-data"]) == fakekube.certs.ca_pem
        else:
            assert (d / cluster["certificate-authority"]).read_bytes() == fakekube.certs.ca_pem
        if "tokenFile" in user:
            assert pathlib_read(user["tokenFile"]) == fakekube.token
        if "client-certificate" in user:  # relative to the kubeconfig's directory
            assert not os.path.isabs(user["client-certificate"])
            assert (path.parent / user["client-key"]).exists()
        if "client-key-data" in user:
            assert b"PRIVATE KEY" in base64.b64decode(user["client-key-data"])
    assert set(fakekube.kubeconfigs) >= {"token", "tokenfile", "cert", "embedded"}
    sa = fakekube.sa_dir
    assert (sa / "token").read_text() == fakekube.token and (sa / "namespace").read_text() == "default"
    assert (sa / "ca.crt").read_bytes() == fakekube.certs.ca_pem
    env = fakekube.incluster_env()
    assert env["KUBERNETES_SERVICE_PORT"] == str(fakekube.port)
    assert env["GPUPLANE_SERVICEACCOUNT_DIR"] == str(sa)


def pathlib_read(p):
    with open(p) as f:
        return f.read()


# --- verbs ---

def test_create_get_update_patch_delete(fakekube, api):
    st, c = api.call("POST", CLAIMS, claim_obj("c1"))
    assert st == 201
    meta = c["metadata"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1 and int(meta["resourceVersion"]) > 1
    st, again = api.call("POST", CLAIMS, claim_obj("c1"))
    assert st == 409 and again["reason"] == "AlreadyExists"
    assert again["message"] == 'resourceclaims.resource.k8s.io "c1" already exists'
    st, got = api.call("GET", f"{CLAIMS}/c1")
    assert st == 200 and got == c

    # update with the current resourceVersion, then with a stale one
    upd = copy.deepcopy(got)
    upd["metadata"]["labels"] = {"a": "1"}
    st, u1 = api.call("PUT", f"{CLAIMS}/c1", upd)
    assert st == 200 and int(u1["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert u1["metadata"]["generation"] == 1 and u1["metadata"]["uid"] == meta["uid"]
    st, err = api.call("PUT", f"{CLAIMS}/c1", upd)
    assert st == 409 and err["reason"] == "Conflict"
    assert err["message"] == ('Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c1": the '
                              'object has been modified; please apply your changes to the latest version '
                              'and try again')
    spec = copy.deepcopy(u1)
    spec["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    st, u2 = api.call("PUT", f"{CLAIMS}/c1", spec)
    assert st == 200 and u2["metadata"]["generation"] == 2
    norv = copy.deepcopy(u2)
    del norv["metadata"]["resourceVersion"]
    with fakekube.expect_invalid():
        st, err = api.call("PUT", f"{CLAIMS}/c1", norv)
    assert st == 422 and "metadata.resourceVersion" in err["message"]

    # merge patch: add, replace, remove with null; a resourceVersion in it is a precondition
    st, p = api.call("PATCH", f"{CLAIMS}/c1", {"metadata": {"labels": {"a": None, "b": "2"},
                                                            "annotations": {"x": "y"}}},
                     ctype="application/merge-patch+json")
    assert st == 200 and p["metadata"]["labels"] == {"b": "2"} and p["metadata"]["annotations"] == {"x": "y"}
    assert p["spec"] == u2["spec"]
    st, err = api.call("PATCH", f"{CLAIMS}/c1", {"metadata": {"resourceVersion": "1"}},
                       ctype="application/merge-patch+json")
    assert st == 409 and err["reason"] == "Conflict"
    st, err = api.call("PATCH", f"{CLAIMS}/c1", [{"op": "add"}], ctype="application/json-patch+json")
    assert st == 415
    st, err = api.call("PATCH", f"{CLAIMS}/nope", {}, ctype="application/merge-patch+json")
    assert st == 404
    st, err = api.call("POST", CLAIMS, claim_obj("c9"), ctype="application/x-www-form-urlencoded")
    assert st == 415 and err["reason"] == "UnsupportedMediaType"

    st, d = api.call("DELETE", f"{CLAIMS}/c1")
    assert st == 200 and d["metadata"]["name"] == "c1"
    for method in ("GET", "DELETE"):
        st, err = api.call(method, f"{CLAIMS}/c1")
        assert st == 404 and err["reason"] == "NotFound" and err["kind"] == "Status"
        assert err["message"] == 'resourceclaims.resource.k8s.io "c1" not found'
        assert err["details"] == {"name": "c1", "group": "resource.k8s.io", "kind": "resourceclaims"}
    st, err = api.call("GET", "/api/v1/nodes/n0")
    assert st == 404 and err["message"] == 'nodes "n0" not found'


def test_generate_name_and_cluster_scope(fakekube, api):
    names = set()
    for _ in range(3):
        obj = slice_obj("x")
        obj["metadata"] = {"generateName": "node-a-gpu.nvidia.com-"}
        st, s = api.call("POST", SLICES, obj)
        assert st == 201 and s["metadata"]["name"].startswith("node-a-gpu.nvidia.com-")
        assert "namespace" not in s["metadata"]
        names.add(s["metadata"]["name"])
    assert len(names) == 3
    assert sorted(o["metadata"]["name"] for o in fakekube.objects("resourceslices")) == sorted(names)
    obj = slice_obj("x")
    obj["metadata"] = {}
    with fakekube.expect_invalid():
        st, err = api.call("POST", SLICES, obj)
    assert st == 422 and "generateName" in err["message"]
    st, err = api.call("POST", f"{RES}/namespaces/default/resourceclaims", dict(claim_obj("c"), kind="Pod"))
    assert st == 400


def test_status_subresource(fakekube, api):
    created = claim_obj("c2")
    created["status"] = allocation()
    st, c = api.call("POST", CLAIMS, created)
    assert st == 201 and "status" not in c  # status is set through /status only
    withstatus = copy.deepcopy(c)
    withstatus["status"] = allocation()
    withstatus["metadata"]["labels"] = {"ignored": "yes"}
    st, s = api.call("PUT", f"{CLAIMS}/c2/status", withstatus)
    assert st == 200 and s["status"] == allocation() and "labels" not in s["metadata"]
    assert s["metadata"]["generation"] == 1
    st, err = api.call("PUT", f"{CLAIMS}/c2/status", withstatus)
    assert st == 409
    # the main resource keeps the status whatever the body says
    main = copy.deepcopy(s)
    del main["status"]
    st, m = api.call("PUT", f"{CLAIMS}/c2", main)
    assert st == 200 and m["status"] == allocation()
    st, p = api.call("PATCH", f"{CLAIMS}/c2/status", {"status": {"allocation": None}},
                     ctype="application/merge-patch+json")
    assert st == 200 and p["status"] == {}
    st, _ = api.call("PUT", f"{SLICES}/x/status", slice_obj("x"))
    assert st == 404  # resourceslices have no status subresource


def test_finalizers_delay_deletion(fakekube, api):
    st, c = api.call("POST", CLAIMS, claim_obj("c3", finalizers=["gpuplane.example.com/x"]))
    st, d = api.call("DELETE", f"{CLAIMS}/c3")
    assert st == 200 and d["metadata"]["deletionTimestamp"]
    assert fakekube.get("resourceclaims", "c3") == d
    st, d2 = api.call("DELETE", f"{CLAIMS}/c3")
    assert st == 200 and d2 == d
    st, _ = api.call("PATCH", f"{CLAIMS}/c3", {"metadata": {"finalizers": None}},
                     ctype="application/merge-patch+json")
    assert st == 200 and fakekube.get("resourceclaims", "c3", "default") is None
    st, c = api.call("POST", CLAIMS, claim_obj("c4"))
    st, err = api.call("DELETE", f"{CLAIMS}/c4", {"preconditions": {"uid": "other"}})
    assert st == 409 and "Precondition failed" in err["message"]


def test_validation(fakekube, api):
    bad = slice_obj("bad")
    bad["spec"]["devices"][0]["bogus"] = 1
    st, err = api.call("POST", SLICES, bad)
    assert st == 422 and err["reason"] == "Invalid"
    assert "'bogus' was unexpected" in err["message"]
    assert err["message"].startswith('ResourceSlice.resource.k8s.io "bad" is invalid: spec.devices[0]: ')
    assert err["details"]["causes"][0]["field"] == "spec.devices[0]"
    unexpected = fakekube.unexpected_violations()
    assert len(unexpected) == 1 and unexpected[0]["method"] == "POST"
    unexpected[0].clear()  # handled: keep the fixture's teardown check quiet
    fakekube.violations.clear()
    with fakekube.expect_invalid():
        st, _ = api.call("POST", SLICES, dict(slice_obj("Upper")))
    assert st == 422
    with pytest.raises(AssertionError):
        with fakekube.expect_invalid():
            assert api.call("POST", SLICES, slice_obj("fine"))[0] == 201
    st, s = api.call("GET", f"{SLICES}/fine")
    with fakekube.expect_invalid():
        st, err = api.call("PATCH", f"{SLICES}/fine", {"spec": {"driver": 5}},
                           ctype="application/merge-patch+json")
    assert st == 422 and "spec.driver" in err["message"]
    assert fakekube.get("resourceslices", "fine")["spec"]["driver"] == "gpu.nvidia.com"
    assert not fakekube.unexpected_violations()


# --- lists ---

def names(lst):
    return [o["metadata"]["name"] for o in lst["items"]]


def test_list_selectors(fakekube, api):
    fakekube.put(slice_obj("s1", node="n1", labels={"tier": "a", "gpu": "yes"}))
    fakekube.put(slice_obj("s2", node="n2", labels={"tier": "b"}))
    fakekube.put(slice_obj("s3", node="n1", driver="other.example.com", labels={"tier": "c"}))
    cases = {
        "labelSelector=tier%3Da": ["s1"],
        "labelSelector=tier%3D%3Da": ["s1"],
        "labelSelector=tier!%3Da": ["s2", "s3"],
        "labelSelector=tier%20in%20(a%2Cc)": ["s1", "s3"],
        "labelSelector=tier%20notin%20(a%2Cc)": ["s2"],
        "labelSelector=gpu": ["s1"],
        "labelSelector=!gpu": ["s2", "s3"],
        "labelSelector=tier%2C!gpu%2Ctier!%3Dc": ["s2"],
        "fieldSelector=spec.nodeName%3Dn1": ["s1", "s3"],
        "fieldSelector=spec.driver%3Dgpu.nvidia.com%2Cspec.nodeName%3Dn1": ["s1"],
        "fieldSelector=spec.driver!%3Dgpu.nvidia.com": ["s3"],
        "fieldSelector=metadata.name%3Ds2": ["s2"],
        "fieldSelector=spec.nodeName%3Dn1&labelSelector=tier%3Dc": ["s3"],
    }
    for q, want in cases.items():
        st, lst = api.call("GET", f"{SLICES}?{q}")
        assert st == 200 and names(lst) == want, q
    st, lst = api.call("GET", SLICES)
    assert lst["kind"] == "ResourceSliceList" and lst["apiVersion"] == "resource.k8s.io/v1"
    assert lst["metadata"]["resourceVersion"] == str(fakekube.resource_version)
    assert all("kind" not in o and "apiVersion" not in o for o in lst["items"])
    st, err = api.call("GET", f"{SLICES}?fieldSelector=spec.pool.name%3Dx")
    assert st == 400 and err["message"] == "field label not supported: spec.pool.name"
    st, err = api.call("GET", f"{SLICES}?labelSelector=tier%20in%20a")
    assert st == 400


def test_list_namespaces(fakekube, api):
    fakekube.put(dict(claim_obj("a", namespace="ns1")))
    fakekube.put(dict(claim_obj("b", namespace="ns2")))
    assert names(api.call("GET", f"{RES}/namespaces/ns1/resourceclaims")[1]) == ["a"]
    assert names(api.call("GET", f"{RES}/resourceclaims")[1]) == ["a", "b"]
    lst = api.call("GET", f"{RES}/resourceclaims?fieldSelector=metadata.namespace%3Dns2")[1]
    assert names(lst) == ["b"]
    fakekube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}})
    assert api.call("GET", "/api/v1/namespaces/ns1")[1]["metadata"]["name"] == "ns1"
    assert names(api.call("GET", "/api/v1/namespaces")[1]) == ["ns1"]


def test_pagination(fakekube, api):
    for i in range(5):
        fakekube.put(slice_obj(f"p{i}"))
    st, page = api.call("GET", f"{SLICES}?limit=2")
    assert names(page) == ["p0", "p1"] and page["metadata"]["remainingItemCount"] == 3
    rv = page["metadata"]["resourceVersion"]
    fakekube.put(slice_obj("p25"))  # pages after the first show the first page's snapshot
    seen = names(page)
    while page["metadata"].get("continue"):
        path = f"{SLICES}?limit=2&continue={page['metadata']['continue']}"
        st, page = api.call("GET", path)
        assert st == 200 and page["metadata"]["resourceVersion"] == rv
        assert api.call("GET", path)[1] == page  # a token can be used again
        seen += names(page)
    assert seen == ["p0", "p1", "p2", "p3", "p4"]
    st, err = api.call("GET", f"{SLICES}?limit=2&continue=garbage")
    assert st == 400
    st, page = api.call("GET", f"{SLICES}?limit=2")
    fakekube.put(slice_obj("p26"))
    fakekube.compact()  # compaction past a snapshot's version expires its tokens too
    st, err = api.call("GET", f"{SLICES}?limit=2&continue={page['metadata']['continue']}")
    assert st == 410 and err["reason"] == "Expired"
    st, page = api.call("GET", f"{SLICES}?limit=2")
    fakekube.expire_continues()
    st, err = api.call("GET", f"{SLICES}?limit=2&continue={page['metadata']['continue']}")
    assert st == 410 and err["reason"] == "Expired" and err["code"] == 410
    st, page = api.call("GET", f"{SLICES}?limit=100")
    assert "continue" not in page["metadata"] and len(page["items"]) == 7


def test_list_resource_versions(fakekube, api):
    fakekube.put(slice_obj("o1"))
    old = fakekube.resource_version
    fakekube.put(slice_obj("o2"))
    fakekube.put(slice_obj("o1", node="n7"))
    fakekube.remove("resourceslices", "o1")
    # Exact (or a limit without a match: the legacy rule) reads the state at the version
    for q in (f"resourceVersion={old}&resourceVersionMatch=Exact", f"resourceVersion={old}&limit=5"):
        st, lst = api.call("GET", f"{SLICES}?{q}")
        assert st == 200 and names(lst) == ["o1"] and lst["metadata"]["resourceVersion"] == str(old), q
        assert lst["items"][0]["spec"]["nodeName"] == "node-a"
    st, lst = api.call("GET", f"{SLICES}?resourceVersion={old}&resourceVersionMatch=NotOlderThan")
    assert st == 200 and names(lst) == ["o2"]
    st, err = api.call("GET", f"{SLICES}?resourceVersion={fakekube.resource_version + 5}")
    assert st == 504 and err["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    fakekube.compact()
    st, err = api.call("GET", f"{SLICES}?resourceVersion={old}&resourceVersionMatch=Exact")
    assert st == 410 and err["reason"] == "Expired" and err["message"] == \
        "The resourceVersion for the provided list is too old."
    assert api.call("GET", f"{SLICES}?resourceVersion={old}")[0] == 200
    assert api.call("GET", f"{SLICES}?resourceVersion=0")[0] == 200
    assert api.call("GET", f"{SLICES}?resourceVersion=0&resourceVersionMatch=Exact")[0] == 400


def test_delete_collection(fakekube, api):
    for i, node in enumerate(["n1", "n1", "n2"]):
        fakekube.put(slice_obj(f"d{i}", node=node))
    st, lst = api.call("DELETE", f"{SLICES}?fieldSelector=spec.nodeName%3Dn1")
    assert st == 200 and names(lst) == ["d0", "d1"]
    assert [o["metadata"]["name"] for o in fakekube.objects("resourceslices")] == ["d2"]


# --- watches ---

def test_watch_events_and_bookmarks(fakekube, api):
    st, lst = api.call("GET", SLICES)
    rv = lst["metadata"]["resourceVersion"]
    w = api.watch(f"{SLICES}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true")
    try:
        st, s = api.call("POST", SLICES, slice_obj("w1"))
        mod = copy.deepcopy(s)
        mod["metadata"]["labels"] = {"x": "1"}
        st, m = api.call("PUT", f"{SLICES}/w1", mod)
        st, d = api.call("DELETE", f"{SLICES}/w1")
        events = [w.next_non_bookmark() for _ in range(3)]
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
        assert events[0]["object"] == s and events[1]["object"] == m
        assert events[2]["object"]["metadata"]["resourceVersion"] == d["metadata"]["resourceVersion"]
        deadline = time.monotonic() + 3
        while True:
            e = w.next()
            assert e is not None and time.monotonic() < deadline
            if e["type"] == "BOOKMARK":
                break
        assert e["object"]["kind"] == "ResourceSlice"
        assert int(e["object"]["metadata"]["resourceVersion"]) >= int(d["metadata"]["resourceVersion"])
    finally:
        w.close()
    assert fakekube.requests(path="resourceslices/w1$")[-1]["method"] == "DELETE"
    assert any(r["watch"] and r["status"] == 200 for r in fakekube.requests())


def test_watch_selectors_and_initial_state(fakekube, api):
    fakekube.put(slice_obj("i1", labels={"sel": "y"}))
    fakekube.put(slice_obj("i2"))
    w = api.watch(f"{SLICES}?watch=true&labelSelector=sel%3Dy")
    try:
        e = w.next_non_bookmark()
        assert e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "i1"
        fakekube.put(slice_obj("i1"))  # no longer matches: seen as DELETED
        fakekube.put(slice_obj("i2", labels={"sel": "y"}))  # now matches: ADDED
        e1, e2 = w.next_non_bookmark(), w.next_non_bookmark()
        assert (e1["type"], e1["object"]["metadata"]["name"]) == ("DELETED", "i1")
        assert (e2["type"], e2["object"]["metadata"]["name"]) == ("ADDED", "i2")
    finally:
        w.close()
    w = api.watch(f"{SLICES}/i2?watch=true")  # a single object's watch
    try:
        assert w.next_non_bookmark()["object"]["metadata"]["name"] == "i2"
        fakekube.put(slice_obj("i1", node="z"))
        fakekube.put(slice_obj("i2", node="z"))
        e = w.next_non_bookmark()
        assert e["type"] == "MODIFIED" and e["object"]["metadata"]["name"] == "i2"
    finally:
        w.close()


def test_watch_too_old(fakekube, api):
    fakekube.put(slice_obj("t1"))
    old = fakekube.resource_version
    fakekube.put(slice_obj("t2"))
    fakekube.compact()
    w = api.watch(f"{SLICES}?watch=true&resourceVersion={old - 1}")
    try:
        e = w.next()
        assert e["type"] == "ERROR" and e["object"]["code"] == 410 and e["object"]["reason"] == "Expired"
        assert e["object"]["message"].startswith(f"too old resource version: {old - 1} (")
        assert w.next() is None
    finally:
        w.close()
    fakekube.watch_expired = "status"
    st, err = api.call("GET", f"{SLICES}?watch=true&resourceVersion={old - 1}")
    assert st == 410 and err["reason"] == "Expired"
    # a bounded history: old versions fall out of it
    small = fkmod.FakeKube(fakekube.dir / "small", history=3).start()
    try:
        c = Client(small, token=small.token)
        for i in range(6):
            small.put(slice_obj(f"h{i}"))
        w = c.watch(f"{SLICES}?watch=true&resourceVersion=2")
        assert w.next()["object"]["code"] == 410
        w.close()
        w = c.watch(f"{SLICES}?watch=true&resourceVersion={small.resource_version - 2}")
        assert [w.next()["type"] for _ in range(2)] == ["ADDED", "ADDED"]
        w.close()
    finally:
        small.stop()


def test_drop_watches(fakekube, api):
    for clean in (False, True):
        w = api.watch(f"{SLICES}?watch=true&resourceVersion={fakekube.resource_version}")
        try:
            fakekube.wait_for(fakekube.watch_count, timeout=3, what="a watch")
            fakekube.drop_watches(clean=clean)
            if clean:
                assert w.next_non_bookmark() is None
            else:
                try:
                    assert w.next_non_bookmark() is None
                except (http.client.IncompleteRead, ConnectionError, ssl.SSLError, ValueError):
                    pass
        finally:
            w.close()
    # a new watch works again
    w = api.watch(f"{SLICES}?watch=true&resourceVersion={fakekube.resource_version}")
    try:
        fakekube.put(slice_obj("after"))
        assert w.next_non_bookmark()["type"] == "ADDED"
    finally:
        w.close()


def test_watch_timeout_seconds(fakekube, api):
    w = api.watch(f"{SLICES}?watch=true&timeoutSeconds=1")
    t = time.monotonic()
    try:
        assert w.next() is None and time.monotonic() - t < 3
    finally:
        w.close()


# --- hooks ---

def test_injected_failures(fakekube, api):
    fakekube.inject("GET", "/apis/resource.k8s.io/v1/resourceslices", status=503, count=2,
                    headers={"Retry-After": "1"})
    assert api.call("GET", SLICES)[0] == 503
    assert api.call("GET", f"{SLICES}/x")[0] == 404  # the path regex matches whole paths only
    st, body = api.call("GET", SLICES)
    assert st == 503 and body["reason"] == "ServiceUnavailable"
    assert api.call("GET", SLICES)[0] == 200
    assert [r["status"] for r in fakekube.requests("GET", "resourceslices$")] == [503, 503, 200]
    fakekube.inject("DELETE", status=429)
    c = api.conn()
    c.request("DELETE", f"{SLICES}/x", headers=api.headers())
    r = c.getresponse()
    assert r.status == 429 and r.getheader("Retry-After") == "1"
    assert json.loads(r.read())["reason"] == "TooManyRequests"
    c.close()

    for _ in range(2):  # a released hang does not release the next one
        fakekube.inject("POST", ".*", hang=True)
        with pytest.raises((TimeoutError, OSError)):
            api.call("POST", SLICES, slice_obj("h"), timeout=0.5)
        fakekube.release()
    assert api.call("POST", SLICES, slice_obj("h"))[0] == 201
    assert [r["status"] for r in fakekube.requests("POST")] == [None, None, 201]

    fakekube.inject("GET", ".*/resourceslices/h", status=None, delay=0.3)
    t = time.monotonic()
    assert api.call("GET", f"{SLICES}/h")[0] == 200 and time.monotonic() - t >= 0.3


def test_wait_for(fakekube, api):
    with pytest.raises(AssertionError, match="a slice did not happen"):
        fakekube.wait_for(lambda: fakekube.objects("resourceslices"), timeout=0.2, what="a slice")
    threading.Timer(0.1, lambda: api.call("POST", SLICES, slice_obj("late"))).start()
    got = fakekube.wait_for(lambda: fakekube.objects("resourceslices"), timeout=3)
    assert got[0]["metadata"]["name"] == "late"


def test_hooks_put_remove_objects(fakekube, api):
    s = fakekube.put(slice_obj("k1"))
    assert s["metadata"]["uid"] and s["metadata"]["resourceVersion"] == str(fakekube.resource_version)
    s2 = fakekube.put(slice_obj("k1", node="n9"))
    assert s2["metadata"]["uid"] == s["metadata"]["uid"]
    assert api.call("GET", f"{SLICES}/k1")[1]["spec"]["nodeName"] == "n9"
    assert fakekube.remove("resourceslices", "k1")["metadata"]["name"] == "k1"
    assert fakekube.objects("resourceslices") == []
    assert api.call("GET", f"{SLICES}/k1")[0] == 404


@pytest.mark.skipif(os.environ.get("FAKEKUBE_SELFCHECK") != "1", reason="run by test_fixture_fails_on_422")
def test_unexpected_422(fakekube, api):
    assert api.call("POST", SLICES, dict(slice_obj("x"), spec={}))[0] == 422


def test_fixture_fails_on_422():
    """A 422 the test did not expect fails the test at the fixture's teardown."""
    env = dict(os.environ, FAKEKUBE_SELFCHECK="1")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{__file__}::test_unexpected_422"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 1, p.stdout
    assert "1 passed, 1 error" in p.stdout and "rejected as invalid" in p.stdout, p.stdout
    assert "POST /apis/resource.k8s.io/v1/resourceslices" in p.stdout


def test_script_mode(tmp_path):
    p = subprocess.Popen([sys.executable, fkmod.__file__, "--port", "0", "--dir", str(tmp_path / "d"),
                          "--token", "tok"], stdout=subprocess.PIPE, text=True)
    try:
        url = p.stdout.readline().strip()
        assert url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=str(tmp_path / "d" / "ca.crt"))
        c = http.client.HTTPSConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), context=ctx, timeout=5)
        c.request("GET", SLICES, headers={"Authorization": "Bearer tok"})
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.read())["items"] == []
        c.close()
        kc = yaml.safe_load((tmp_path / "d" / "kubeconfig").read_text())
        assert kc["clusters"][0]["cluster"]["server"] == url
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=5) == 0
