# SPDX-License-Identifier: Apache-2.0
"""gpuplane allocate: the DRA structured allocator through the binary. Table-driven small cases from
the reference's behaviour examples (§4.11): exit code, chosen devices (order-insensitive) and the
error text; plus the command line's contract (help, output forms, examples/dra)."""
import json
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

CLASS_A = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: a}
spec:
  selectors: [{cel: {expression: 'device.driver == "a"'}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: b}
spec:
  selectors: [{cel: {expression: 'device.driver == "b"'}}]
"""


def slice_(name, devices, pool="p1", gen=1, count=1, node="nodeName: n1", driver="a"):
    devs = "\n".join(f"  - {d}" for d in devices)
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {name}}}
spec:
  driver: {driver}
  pool: {{name: {pool}, generation: {gen}, resourceSliceCount: {count}}}
  {node}
  devices:
{devs}
"""


def claim(name, requests, extra="", status=""):
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, namespace: default}}
spec:
  devices:
    requests: {requests}
{extra}
{status}
"""


def docs(*parts):
    return "\n---\n".join(p.strip("\n") for p in parts) + "\n"


ONE = '[{name: r, exactly: {deviceClassName: a}}]'
MEM = lambda q: f'{{cel: {{expression: "device.capacity[\'a\'].memory.compareTo(quantity(\'{q}\')) >= 0"}}}}'

CASES = {
    "one device, node-local": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"]), claim("c1", ONE)), 0, {"c1": ["r:d1"]}, None),
    "backtracking": (
        docs(CLASS_A,
             slice_("s1", ["{name: d2, capacity: {memory: {value: 2Gi}}}",
                           "{name: d1, capacity: {memory: {value: 1Gi}}}"]),
             claim("c1", f"[{{name: r0, exactly: {{deviceClassName: a, selectors: [{MEM('1Gi')}]}}}},"
                         f" {{name: r1, exactly: {{deviceClassName: a, selectors: [{MEM('2Gi')}]}}}}]")),
        0, {"c1": ["r0:d1", "r1:d2"]}, None),
    "newer generation incomplete": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"], gen=1),
             slice_("s2", ["{name: d2}"], gen=2, count=2), claim("c1", ONE)),
        1, None, "request r"),
    "duplicate device across slices": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"], count=2), slice_("s2", ["{name: d1}"], count=2),
             claim("c1", ONE)),
        1, None, "no solution: invalid resource pools were encountered"),
    "claim limit": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"]),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, count: 500}}]")),
        2, None, "exceeds the claim limit of 32"),
    "All with incomplete pool": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"], count=2),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]")),
        2, None, "resource pool a/p1 is currently being updated"),
    "All takes every device": (
        docs(CLASS_A, slice_("s1", ["{name: d1}", "{name: d2}"]),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]")),
        0, {"c1": ["r:d1", "r:d2"]}, None),
    "All with one allocated": (
        docs(CLASS_A, slice_("s1", ["{name: d1}", "{name: d2}"]),
             claim("c0", ONE, status="status: {allocation: {devices: {results: "
                                     "[{request: r, driver: a, pool: p1, device: d1}]}}}"),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]")),
        1, None, "claim default/c1"),
    "admin access on allocated device": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"]),
             claim("c0", ONE, status="status: {allocation: {devices: {results: "
                                     "[{request: r, driver: a, pool: p1, device: d1}]}}}"),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, adminAccess: true}}]")),
        0, {"c1": ["r:d1"]}, None),
    "matchAttribute differs": (
        docs(CLASS_A, slice_("s1", ["{name: d1, attributes: {numa: {int: 1}}}",
                                    "{name: d2, attributes: {numa: {int: 2}}}"]),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]",
                   extra="    constraints: [{matchAttribute: a/numa}]")),
        1, None, "claim default/c1, request r"),
    "firstAvailable falls back": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"]),
             claim("c1", "[{name: r, firstAvailable: [{name: sb, deviceClassName: b},"
                         " {name: sa, deviceClassName: a}]}]")),
        0, {"c1": ["r/sa:d1"]}, None),
    "pool order": (
        docs(CLASS_A, slice_("s3", ["{name: d3}"], pool="p3"), slice_("s2", ["{name: d2}"], pool="p2"),
             slice_("s1", ["{name: d1}"], pool="p1"),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]")),
        0, {"c1": ["r:d1", "r:d2"]}, None),
    "other node": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"], node="nodeName: n2"), claim("c1", ONE)),
        1, None, "cannot allocate all claims"),
    "unknown class": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"]),
             claim("c1", "[{name: r, exactly: {deviceClassName: nope}}]")),
        2, None, "could not retrieve device class nope"),
    "CEL runtime error": (
        docs(CLASS_A, slice_("s1", ["{name: d1}"]),
             claim("c1", "[{name: r, exactly: {deviceClassName: a, selectors: "
                         "[{cel: {expression: 'device.attributes[\"a\"].missing == 1'}}]}}]")),
        2, None, "claim default/c1: selector #0: CEL runtime error: no such key: missing"),
    "bad count": (
        docs(CLASS_A, claim("c1", "[{name: r, exactly: {deviceClassName: a, count: 0}}]")),
        2, None, "ResourceClaim default/c1: spec.devices.requests[0].exactly.count: must be >= 1"),
}


def results(out):
    return {c["metadata"]["name"]: sorted(f"{r['request']}:{r['device']}"
                                          for r in c["status"]["allocation"]["devices"]["results"])
            for c in json.loads(out)["items"]}


@pytest.mark.parametrize("name", list(CASES))
def test_case(gp, tmp_path, name):
    text, rc, want, err = CASES[name]
    f = tmp_path / "in.yaml"
    f.write_text(text)
    p = gp.run("allocate", "--node", "n1", "-o", "json", "-f", f)
    assert p.returncode == rc, p.stderr
    if want is not None:
        assert results(p.stdout) == {k: sorted(v) for k, v in want.items()}
    if err is not None:
        assert err in p.stderr


def test_node_selector_and_yaml(gp, tmp_path):
    f = tmp_path / "in.yaml"
    f.write_text(docs(CLASS_A, slice_("s1", ["{name: d1}"]), claim("c1", ONE)))
    p = gp.run("allocate", "--node", "n1", "-f", f)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith('apiVersion: "v1"\nkind: "List"\n')
    assert '- key: "metadata.name"' in p.stdout and '- "n1"' in p.stdout
    sel = tmp_path / "sel.yaml"
    sel.write_text(docs(CLASS_A, slice_("s1", ["{name: d1}"], node="allNodes: true"), claim("c1", ONE)))
    p = gp.run("allocate", "--node", "n1", "-o", "json", "-f", sel)
    assert p.returncode == 0, p.stderr
    assert "nodeSelector" not in json.loads(p.stdout)["items"][0]["status"]["allocation"]


def test_taint_toleration_copied(gp, tmp_path):
    f = tmp_path / "in.yaml"
    f.write_text(docs(CLASS_A, slice_("s1", ["{name: d1, taints: [{key: k, effect: NoSchedule}]}"]),
                      claim("c1", "[{name: r, exactly: {deviceClassName: a, "
                                  "tolerations: [{key: k, operator: Exists}]}}]")))
    p = gp.run("allocate", "--node", "n1", "-o", "json", "--feature-gates", "DRADeviceTaints=true",
               "-f", f)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["items"][0]["status"]["allocation"]["devices"]["results"][0]
    assert r["device"] == "d1" and r["tolerations"] == [{"key": "k", "operator": "Exists"}]
    p = gp.run("allocate", "--node", "n1", "-o", "json", "--feature-gates", "DRADeviceTaints=false",
               "-f", f)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["items"][0]["status"]["allocation"]["devices"]["results"][0]
    assert r["device"] == "d1" and "tolerations" not in r


def test_gates_and_usage(gp, tmp_path):
    f = tmp_path / "in.yaml"
    f.write_text(docs(CLASS_A, slice_("s1", ["{name: d1}"]),
                      claim("c1", "[{name: r, firstAvailable: [{name: s, deviceClassName: a}]}]")))
    p = gp.run("allocate", "--node", "n1", "--feature-gates", "DRAPrioritizedList=false", "-f", f)
    assert p.returncode == 2 and "DRAPrioritizedList feature is disabled" in p.stderr
    p = gp.run("allocate", "--node", "n1", "--feature-gates", "Bogus=true", "-f", f)
    assert p.returncode == 2 and "Bogus" in p.stderr
    p = gp.run("allocate", "-f", f)
    assert p.returncode == 2 and "--node" in p.stderr
    p = gp.run("allocate", "--help")
    assert p.returncode == 0 and "Examples:" in p.stdout


def test_examples_dra(gp):
    ex = ROOT / "examples" / "dra"
    if not (ex / "slices-dgx-h100-0.yaml").exists():
        pytest.skip("examples/dra not present")
    p = gp.run("allocate", "--node", "dgx-h100-0", "-o", "json", "-f", ex / "deviceclasses.yaml",
               "-f", ex / "nodes.yaml", "-f", ex / "slices-dgx-h100-0.yaml")
    assert p.returncode == 0, p.stderr  # no pending claims: an empty list
    assert json.loads(p.stdout)["items"] == []
    # a ResourceClaimTemplate stands for the claim a pod would get: two GPUs on one PCIe root
    p = gp.run("allocate", "--node", "dgx-h100-0", "-o", "json", "-f", ex / "deviceclasses.yaml",
               "-f", ex / "slices-dgx-h100-0.yaml", "-f", ex / "claimtemplate-pcie-pair.yaml")
    assert p.returncode == 0, p.stderr
    claim = json.loads(p.stdout)["items"][0]
    assert claim["kind"] == "ResourceClaim" and claim["metadata"]["name"] == "pcie-pair"
    assert sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"]) == ["gpu-0", "gpu-1"]


def test_list_stdin_and_budget(gp, tmp_path):
    objs = [{"kind": "DeviceClass", "metadata": {"name": "a"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "a"'}}]}},
            {"kind": "ResourceSlice", "metadata": {"name": "s1"},
             "spec": {"driver": "a", "pool": {"name": "p1", "generation": 1, "resourceSliceCount": 1},
                      "nodeName": "n1",
                      "devices": [{"name": f"d{i}", "attributes": {"n": {"int": i}}} for i in range(12)]}},
            {"kind": "ResourceClaim", "metadata": {"name": "c1", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "a", "count": 3}}],
                                  "constraints": [{"matchAttribute": "a/n"}]}}}]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    p = subprocess.run([str(gp.binary), "allocate", "--node", "n1", "-f", "-", "--budget", "20"],
                       input=text, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "search budget of 20 steps exhausted" in p.stderr
    f = tmp_path / "list.json"
    f.write_text(text)
    p = gp.run("allocate", "--node", "n1", "-f", f)
    assert p.returncode == 1 and "needs 3 devices" in p.stderr and "12 devices match" in p.stderr


def test_yaml_equals_json(gp, tmp_path):
    yaml = pytest.importorskip("yaml")
    f = tmp_path / "in.yaml"
    f.write_text(docs(CLASS_A, slice_("s1", ["{name: d1, attributes: {'x.example.com/k': {string: 'a: b'}}}",
                                             "{name: d2}"]),
                      claim("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]",
                            extra="    config: [{opaque: {driver: a, parameters: {s: 'yes', n: 1.5, e: {}}}}]")))
    y = gp.run("allocate", "--node", "n1", "-f", f)
    j = gp.run("allocate", "--node", "n1", "-o", "json", "-f", f)
    assert y.returncode == 0 and j.returncode == 0, y.stderr + j.stderr
    assert yaml.safe_load(y.stdout) == json.loads(j.stdout)
    assert len(json.loads(j.stdout)["items"][0]["status"]["allocation"]["devices"]["config"]) == 1


def test_allocation_timestamp(gp, tmp_path):
    """allocationTimestamp is written, as kube-scheduler does, when DRADeviceBindingConditions and
    DRAResourceClaimDeviceStatus are both on: RFC 3339 UTC seconds, from SOURCE_DATE_EPOCH if set."""
    import datetime
    import re

    def objects(d1_binding):
        bc = ", bindingConditions: [attached], bindingFailureConditions: [failed]" if d1_binding else ""
        pick = "[{name: r, exactly: {deviceClassName: a, selectors: " \
               "[{cel: {expression: 'device.attributes[\"a\"].n == %d'}}]}}]"
        return docs(CLASS_A,
                    slice_("s1", ["{name: d1, attributes: {n: {int: 1}}%s}" % bc,
                                  "{name: d2, attributes: {n: {int: 2}}}"]),
                    claim("c1", pick % 1), claim("c2", pick % 2))

    f = tmp_path / "in.yaml"
    f.write_text(objects(True))
    plain = tmp_path / "plain.yaml"
    plain.write_text(objects(False))

    def allocations(gates, env=None, path=f):
        p = gp.run("allocate", "--node", "n1", "-o", "json", "--feature-gates", gates, "-f", path,
                   env=env)
        assert p.returncode == 0, p.stderr
        return {c["metadata"]["name"]: c["status"]["allocation"] for c in json.loads(p.stdout)["items"]}

    epoch = {"SOURCE_DATE_EPOCH": "1795320306"}
    got = allocations("DRADeviceBindingConditions=true", epoch)
    assert got["c1"]["devices"]["results"][0]["bindingConditions"] == ["attached"]
    # Every claim the run allocates gets it, with or without binding conditions, as upstream.
    assert {k: v.get("allocationTimestamp") for k, v in got.items()} == \
        {"c1": "2026-11-22T04:05:06Z", "c2": "2026-11-22T04:05:06Z"}
    # YAML output carries it too.
    p = gp.run("allocate", "--node", "n1", "--feature-gates", "DRADeviceBindingConditions=true",
               "-f", f, env=epoch)
    assert p.returncode == 0 and 'allocationTimestamp: "2026-11-22T04:05:06Z"' in p.stdout, p.stderr

    # Either gate off: no timestamp (the binding gate is off by default). With it off, a device
    # with binding conditions is never picked, hence the plain objects.
    assert "allocationTimestamp" in allocations("DRADeviceBindingConditions=true", epoch, plain)["c1"]
    for gates in ("DRADeviceBindingConditions=false", "DRAAdminAccess=true",
                  "DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=false"):
        assert all("allocationTimestamp" not in a
                   for a in allocations(gates, epoch, plain).values()), gates

    # Without SOURCE_DATE_EPOCH (or with it empty): the clock.
    for env in ({}, {"SOURCE_DATE_EPOCH": ""}):
        before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        got = allocations("DRADeviceBindingConditions=true", env)
        after = datetime.datetime.now(datetime.timezone.utc)
        stamp = got["c1"]["allocationTimestamp"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), stamp
        t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        assert before <= t <= after and got["c2"]["allocationTimestamp"] == stamp

    # The edges of what a four-digit year can show, and malformed values.
    assert allocations("DRADeviceBindingConditions=true",
                       {"SOURCE_DATE_EPOCH": "0"})["c1"]["allocationTimestamp"] == "1970-01-01T00:00:00Z"
    assert allocations("DRADeviceBindingConditions=true", {"SOURCE_DATE_EPOCH": "253402300799"}) \
        ["c1"]["allocationTimestamp"] == "9999-12-31T23:59:59Z"
    for bad in ("-1", " 5", "12x", "1.5", "253402300800", "99999999999999999999"):
        p = gp.run("allocate", "--node", "n1", "--feature-gates", "DRADeviceBindingConditions=true",
                   "-f", f, env={"SOURCE_DATE_EPOCH": bad})
        assert p.returncode == 2 and "SOURCE_DATE_EPOCH" in p.stderr, (bad, p.stderr)
    # Not read at all when nothing needs it.
    p = gp.run("allocate", "--node", "n1", "-f", plain, env={"SOURCE_DATE_EPOCH": "bad"})
    assert p.returncode == 0, p.stderr
