# SPDX-License-Identifier: Apache-2.0
"""`gpuplane allocate` and `gpuplane schedule` where kube-scheduler 1.36's structured allocator is
easy to get subtly wrong, through the binary:

* every field of the CEL `device` variable reads the same inside the allocator (class and request
  selectors, in allocate and in schedule) as in `gpuplane cel eval --device`, one case per field;
* invalid resource pools fail the node, not the input (exit 1; schedule tries the other nodes and
  words the pod's message as the scheduler does);
* pools are gathered per node (a newer generation on other nodes does not hide this node's
  complete one; a pool spread over nodes is judged whole, also in schedule);
* devices with binding conditions need DRADeviceBindingConditions and DRAResourceClaimDeviceStatus;
* the 32-result limit of a claim prunes firstAvailable choices before any device is tried.
"""
import json
import subprocess

import pytest
import yaml

GATES_136 = ("DRAAdminAccess=true,DRAPrioritizedList=true,DRADeviceTaints=true,"
             "DRAPartitionableDevices=true,DRAConsumableCapacity=true,"
             "DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=true")
DRIVER = "gpu.nvidia.com"

# One device entry with every kind of value the `device` variable carries.
DEVICE = {
    "name": "gpu-0",
    "allowMultipleAllocations": True,
    "attributes": {
        "index": {"int": 3},
        "healthy": {"bool": True},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "driverVersion": {"version": "550.54.15"},
        "dra.example.com/numa": {"int": 1},
        "resource.kubernetes.io/pciBusID": {"string": "0000:0a:00.0"},
    },
    "capacity": {
        "memory": {"value": "80Gi"},
        "dra.example.com/slices": {"value": "7"},
        "fraction": {"value": "500m"},
    },
}

A = f"device.attributes['{DRIVER}']"
C = f"device.capacity['{DRIVER}']"
# (field, expression): the expressions are bool, some true, some false, some runtime errors.
FIELDS = [
    ("driver", f"device.driver == '{DRIVER}'"),
    ("driver-other", "device.driver == 'other.example.com'"),
    ("allowMultipleAllocations", "device.allowMultipleAllocations"),
    ("allowMultipleAllocations-eq-true", "device.allowMultipleAllocations == true"),
    ("allowMultipleAllocations-eq-false", "device.allowMultipleAllocations == false"),
    ("allowMultipleAllocations-type", "type(device.allowMultipleAllocations) == bool"),
    ("attr-int", f"{A}.index == 3"),
    ("attr-int-type", f"type({A}.index) == int"),
    ("attr-bool", f"{A}.healthy"),
    ("attr-string", f"{A}.productName.lowerAscii().contains('h100')"),
    ("attr-version", f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))"),
    ("attr-version-eq", f"{A}.driverVersion == semver('550.54.15')"),
    ("attr-version-parts", f"{A}.driverVersion.major() == 550 && {A}.driverVersion.patch() == 15"),
    ("attr-domain", "device.attributes['dra.example.com'].numa == 1"),
    ("attr-standard", "device.attributes['resource.kubernetes.io'].pciBusID == '0000:0a:00.0'"),
    ("attr-domains", "size(device.attributes) == 3 && size(" + A + ") == 4"),
    ("attr-unknown-domain", "size(device.attributes['unknown.example.com']) == 0"),
    ("attr-unknown-domain-in", "'unknown.example.com' in device.attributes"),
    ("attr-has", f"has({A}.index) && !has({A}.missing)"),
    ("attr-optional", f"{A}[?'missing'].orValue(7) == 7"),
    ("attr-missing-key", f"{A}.missing == 1"),
    ("cap-quantity", f"{C}.memory.compareTo(quantity('40Gi')) > 0"),
    ("cap-quantity-eq", f"{C}.memory == quantity('80Gi')"),
    ("cap-domain", "device.capacity['dra.example.com'].slices.asInteger() == 7"),
    ("cap-fraction", f"!{C}.fraction.isInteger() && {C}.fraction.isLessThan(quantity('1'))"),
    ("cap-domains", f"size(device.capacity) == 2 && size({C}) == 2"),
    ("cap-missing-key", f"{C}.missing.isZero()"),
    ("no-such-field", "device.nofield"),
]


def cel_verdict(gp, tmp_path, expr, device=DEVICE):
    """true / false / error, as `gpuplane cel eval --device` sees the expression."""
    dev = tmp_path / "device.json"
    dev.write_text(json.dumps(device))
    p = gp.run("cel", "eval", "--device", dev, "--driver", DRIVER, expr)
    if p.returncode != 0:
        return "error"
    assert p.stdout.strip() in ("true", "false"), p.stdout
    return p.stdout.strip()


def cluster(expr, device=DEVICE, where="class"):
    """A node n1 with the device; class `gpu` selects the driver and, with where == "class",
    expr; a template `one` asks for one device of the class, with expr as its selector otherwise."""
    class_sel = [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]
    req_sel = []
    (class_sel if where == "class" else req_sel).append({"cel": {"expression": expr}})
    exactly = {"deviceClassName": "gpu"}
    if req_sel:
        exactly["selectors"] = req_sel
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": class_sel}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s1"},
         "spec": {"driver": DRIVER, "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                  "nodeName": "n1", "devices": [device]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "one", "namespace": "default"},
         "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}}},
    ]


def claim(name="c1", exactly=None, first_available=None, req="r"):
    request = {"name": req}
    if first_available is not None:
        request["firstAvailable"] = first_available
    else:
        request["exactly"] = exactly or {"deviceClassName": "gpu"}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [request]}}}


def pod(name, template="one"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}


def write(tmp_path, objs, name="in.json"):
    f = tmp_path / name
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    return f


def allocate(gp, tmp_path, objs, *args, gates=GATES_136):
    return gp.run("allocate", "--node", "n1", "--feature-gates", gates, "-o", "json", *args,
                  "-f", write(tmp_path, objs))


def schedule(gp, tmp_path, objs, *args, gates=GATES_136):
    if not any(o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == "one"
               for o in objs):
        objs = objs + [TEMPLATE_ONE]
    return gp.run("schedule", "--feature-gates", gates, "-o", "json", *args,
                  "-f", write(tmp_path, objs))


def verdict(p):
    return {0: "true", 1: "false"}.get(p.returncode, "error")


# ---- 1. the device variable: allocator == cel eval, field by field ---------------------------

@pytest.mark.parametrize("field,expr", FIELDS, ids=[f for f, _ in FIELDS])
def test_device_field_allocate(gp, tmp_path, field, expr):
    want = cel_verdict(gp, tmp_path, expr)
    for where in ("class", "request"):
        objs = cluster(expr, where=where)[:3] + [claim(exactly={"deviceClassName": "gpu", **(
            {"selectors": [{"cel": {"expression": expr}}]} if where == "request" else {})})]
        p = allocate(gp, tmp_path, objs)
        assert verdict(p) == want, f"{field} ({where} selector): cel eval says {want}\n{p.stderr}"


@pytest.mark.parametrize("field,expr", FIELDS, ids=[f for f, _ in FIELDS])
def test_device_field_schedule(gp, tmp_path, field, expr):
    want = cel_verdict(gp, tmp_path, expr)
    p = schedule(gp, tmp_path, cluster(expr, where="request") + [pod("p1")])
    assert verdict(p) == want, f"{field}: cel eval says {want}\n{p.stdout}\n{p.stderr}"


def test_allow_multiple_allocations_is_used(gp, tmp_path):
    """The field is the device's own in both directions: a class preferring shared devices gets the
    second device, one refusing them the first, and the share carries a shareID."""
    plain = {"name": "plain"}
    shared = {"name": "shared", "allowMultipleAllocations": True,
              "capacity": {"memory": {"value": "8Gi"}}}
    for expr, want in (("device.allowMultipleAllocations", "shared"),
                       ("!device.allowMultipleAllocations", "plain")):
        objs = cluster(expr)[:3] + [claim()]
        objs[2]["spec"]["devices"] = [plain, shared] if want == "shared" else [shared, plain]
        p = allocate(gp, tmp_path, objs)
        assert p.returncode == 0, p.stderr
        res = json.loads(p.stdout)["items"][0]["status"]["allocation"]["devices"]["results"]
        assert [r["device"] for r in res] == [want]
        assert ("shareID" in res[0]) == (want == "shared")


def test_allow_multiple_allocations_stable_variant(gp, tmp_path):
    """With DRAConsumableCapacity and DRADeviceBindingConditions off kube-scheduler uses its
    "stable" allocator, which hands CEL no allowMultipleAllocations: selectors read false. One of
    the two gates on (the DeviceBindingAndStatus variant also reads the field) and they see it."""
    objs = cluster("device.allowMultipleAllocations")[:3] + [claim()]
    off = "DRAConsumableCapacity=false,DRADeviceBindingConditions=false"
    assert allocate(gp, tmp_path, objs, gates=off).returncode == 1
    assert allocate(gp, tmp_path, objs, gates="DRAConsumableCapacity=false,"
                    "DRADeviceBindingConditions=true").returncode == 0
    assert allocate(gp, tmp_path, objs, gates="DRAConsumableCapacity=true").returncode == 0


# ---- 2. invalid pools fail the node ---------------------------------------------------------

def slice_(name, node, devices, pool=None, gen=1, count=1, driver="a", **extra):
    spec = {"driver": driver, "pool": {"name": pool or node, "generation": gen,
                                       "resourceSliceCount": count},
            "devices": [{"name": d} if isinstance(d, str) else d for d in devices]}
    if node:
        spec["nodeName"] = node
    spec.update(extra)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": spec}


CLASS_A = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": "device.driver == 'a'"}}]}},
]
# What pod() refers to; schedule() adds it when the input has no template of that name.
TEMPLATE_ONE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}}


def nodes(*names):
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in names]


INVALID_N1 = [slice_("dup-1", "n1", ["d1"], count=2), slice_("dup-2", "n1", ["d1"], count=2)]


def test_invalid_pool_allocate_exit_1(gp, tmp_path):
    p = allocate(gp, tmp_path, nodes("n1") + CLASS_A + INVALID_N1 + [claim()])
    assert p.returncode == 1, p.stderr
    assert p.stderr.strip() == "gpuplane allocate: no solution: invalid resource pools were encountered"
    # A valid pool the node also sees serves the claim: the invalid one is only skipped.
    p = allocate(gp, tmp_path, nodes("n1") + CLASS_A + INVALID_N1
                 + [slice_("ok", "n1", ["d9"], pool="other"), claim()])
    assert p.returncode == 0, p.stderr


def test_invalid_pool_schedule_message(gp, tmp_path):
    names = [f"n{i}" for i in range(1, 9)]
    p = schedule(gp, tmp_path, nodes(*names) + CLASS_A + INVALID_N1 + [pod("p1")])
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)["pods"][0]
    assert out["node"] is None
    assert out["reasons"]["invalid resource pools were encountered"] == 1
    assert out["message"] == ("0/8 nodes are available: 1 invalid resource pools were "
                              "encountered, 7 cannot allocate all claims.")
    # The other nodes are still tried: with a device on n5 the pod goes there.
    p = schedule(gp, tmp_path, nodes(*names) + CLASS_A + INVALID_N1
                 + [slice_("s5", "n5", ["g0"]), pod("p1"), pod("p2")])
    assert p.returncode == 1, p.stderr
    pods = json.loads(p.stdout)["pods"]
    assert pods[0]["node"] == "n5" and "message" not in pods[0]
    assert pods[1]["message"] == ("0/8 nodes are available: 1 invalid resource pools were "
                                  "encountered, 7 cannot allocate all claims.")
    y = schedule(gp, tmp_path, nodes(*names) + CLASS_A + INVALID_N1 + [pod("p1")], "-o", "yaml")
    assert yaml.safe_load(y.stdout)["pods"][0]["message"].startswith("0/8 nodes are available: 1 ")


def test_schedule_message_counts_and_sorts(gp, tmp_path):
    """Reasons in the scheduler's words, counted and sorted as strings (so "10 x" < "2 y")."""
    names = [f"n{i:02d}" for i in range(1, 13)]
    objs = nodes(*names) + CLASS_A
    for n in names[:10]:
        objs[names.index(n)]["spec"] = {"unschedulable": True}
    p = schedule(gp, tmp_path, objs + [pod("p1")])
    msg = json.loads(p.stdout)["pods"][0]["message"]
    assert msg == ("0/12 nodes are available: 10 node(s) were unschedulable, "
                   "2 cannot allocate all claims.")


def test_input_the_api_server_refuses_stays_exit_2(gp, tmp_path):
    bad = slice_("s1", "n1", [{"name": "Not_A_Label"}])
    p = allocate(gp, tmp_path, nodes("n1") + CLASS_A + [bad, claim()])
    assert p.returncode == 2 and "Invalid value" in p.stderr
    p = schedule(gp, tmp_path, nodes("n1") + CLASS_A + [bad, pod("p1")])
    assert p.returncode == 2 and "Invalid value" in p.stderr


# ---- 3. pools gathered per node -------------------------------------------------------------

def results(p):
    return [(r["request"], r["pool"], r["device"])
            for c in json.loads(p.stdout)["items"]
            for r in c["status"]["allocation"]["devices"]["results"]]


def test_pools_per_node_allocate(gp, tmp_path):
    base = nodes("n1") + CLASS_A
    # generation 2 complete on n2 and n3, generation 1 complete on n1: n1 keeps using it
    moved = [slice_("old-n1", "n1", ["d1"], pool="p", gen=1, count=1),
             slice_("new-n2", "n2", ["d2"], pool="p", gen=2, count=2),
             slice_("new-n3", "n3", ["d3"], pool="p", gen=2, count=2)]
    p = allocate(gp, tmp_path, base + moved + [claim()])
    assert p.returncode == 0, p.stderr
    assert results(p) == [("r", "p", "d1")]
    # generation 2 still incomplete elsewhere: the same
    p = allocate(gp, tmp_path, base + moved[:2] + [claim()])
    assert results(p) == [("r", "p", "d1")]
    # the update reached n1 but is incomplete: nothing from the pool, and All says so
    partial = [slice_("old-n1", "n1", ["d1"], pool="p", gen=1, count=1),
               slice_("new-n1", "n1", ["d2"], pool="p", gen=2, count=2)]
    assert allocate(gp, tmp_path, base + partial + [claim()]).returncode == 1
    p = allocate(gp, tmp_path, base + partial + [claim(exactly={"deviceClassName": "gpu",
                                                                "allocationMode": "All"})])
    assert p.returncode == 2 and "resource pool a/p is currently being updated" in p.stderr
    # ...and once complete (its other slice is n2's) n1 gets its generation-2 device only
    done = partial + [slice_("new-n2", "n2", ["d9"], pool="p", gen=2, count=2)]
    p = allocate(gp, tmp_path, base + done + [claim(exactly={"deviceClassName": "gpu",
                                                             "allocationMode": "All"})])
    assert p.returncode == 0, p.stderr
    assert results(p) == [("r", "p", "d2")]
    # a shorter old generation on n1 while n2 has a newer one: obsolete, ignored
    stale = [slice_("old-n1", "n1", ["d1"], pool="p", gen=1, count=2),
             slice_("new-n2", "n2", ["d2"], pool="p", gen=2, count=1)]
    p = allocate(gp, tmp_path, base + stale + [claim(exactly={"deviceClassName": "gpu",
                                                              "allocationMode": "All"})])
    assert p.returncode == 1, p.stderr


def test_pools_per_node_schedule(gp, tmp_path):
    objs = nodes("n1", "n2", "n3") + CLASS_A + [
        # pool p moved to generation 2 on n2 and n3; n1 still publishes its generation 1
        slice_("p-old-n1", "n1", ["d1"], pool="p", gen=1, count=1),
        slice_("p-new-n2", "n2", ["d2"], pool="p", gen=2, count=2),
        slice_("p-new-n3", "n3", ["d3"], pool="p", gen=2, count=2),
        # pool q spans n1 and n2 with one slice each: complete only when counted whole
        slice_("q-n1", "n1", ["e1"], pool="q", gen=1, count=2),
        slice_("q-n2", "n2", ["e2"], pool="q", gen=1, count=2),
        # pool r: n3's slice is short, n1 has generation 2 already: obsolete on n3
        slice_("r-n3", "n3", ["f3"], pool="r", gen=1, count=2),
        slice_("r-n1", "n1", ["f1"], pool="r", gen=2, count=1),
    ] + [pod(f"p{i}") for i in range(1, 8)]
    p = schedule(gp, tmp_path, objs)
    out = json.loads(p.stdout)
    placed = sorted(d for x in out["pods"] for d in x["devices"])
    devices = sorted(d.rsplit("/", 1)[1] for d in placed)
    assert devices == ["d1", "d2", "d3", "e1", "e2", "f1"], out
    assert out["summary"]["scheduled"] == 6 and p.returncode == 1
    assert out["pods"][6]["message"] == "0/3 nodes are available: 3 cannot allocate all claims."


# ---- 4. binding conditions need both gates --------------------------------------------------

BINDING = {"name": "b0", "bindingConditions": ["attached"],
           "bindingFailureConditions": ["attach-failed"]}


@pytest.mark.parametrize("binding,status,ok", [(True, True, True), (True, False, False),
                                               (False, True, False), (False, False, False)])
def test_binding_conditions_gates(gp, tmp_path, binding, status, ok):
    gates = (f"DRADeviceBindingConditions={str(binding).lower()},"
             f"DRAResourceClaimDeviceStatus={str(status).lower()}")
    objs = nodes("n1") + CLASS_A + [slice_("s1", "n1", [BINDING]), claim()]
    p = allocate(gp, tmp_path, objs, gates=gates)
    assert p.returncode == (0 if ok else 1), p.stderr
    if ok:
        res = json.loads(p.stdout)["items"][0]["status"]["allocation"]["devices"]["results"][0]
        assert res["bindingConditions"] == ["attached"]
    p = schedule(gp, tmp_path, nodes("n1") + CLASS_A + [slice_("s1", "n1", [BINDING]),
                                                         pod("p1")], gates=gates)
    assert p.returncode == (0 if ok else 1), p.stderr


# ---- 5. the 32-result limit prunes ----------------------------------------------------------

def prefer_32_else_16():
    subs = [{"name": "all32", "deviceClassName": "gpu", "count": 32},
            {"name": "half", "deviceClassName": "gpu", "count": 16}]
    c = claim(first_available=subs, req="r0")
    c["spec"]["devices"]["requests"].append({"name": "r1", "firstAvailable": subs})
    return c


def test_limit_prunes_allocate(gp, tmp_path):
    objs = nodes("n1") + CLASS_A + [slice_("s1", "n1", [f"d{i}" for i in range(64)]),
                                    prefer_32_else_16()]
    p = allocate(gp, tmp_path, objs, "--stats")
    assert p.returncode == 0, p.stderr
    res = results(p)
    assert [r for r, _, _ in res] == ["r0/half"] * 16 + ["r1/half"] * 16
    assert [d for _, _, d in res] == [f"d{i}" for i in range(32)]
    # 16 picks, the 16 devices now in use skipped, 16 picks: the 32-device choices cost nothing
    steps = int(p.stderr.split("stats: ")[1].split()[0])
    assert steps <= 48, p.stderr
    # so a small budget is plenty
    assert allocate(gp, tmp_path, objs, "--budget", "48").returncode == 0


def test_limit_prunes_schedule(gp, tmp_path):
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "many", "namespace": "default"},
                "spec": {"spec": prefer_32_else_16()["spec"]}}
    objs = nodes("n1") + CLASS_A + [slice_("s1", "n1", [f"d{i}" for i in range(64)]), template,
                                    pod("p1", "many"), pod("p2", "many")]
    p = schedule(gp, tmp_path, objs, "--budget", "200")
    assert p.returncode == 0, p.stderr
    pods = json.loads(p.stdout)["pods"]
    assert [len(x["devices"]) for x in pods] == [32, 32]
    assert all("/half=" in d for x in pods for d in x["devices"])
