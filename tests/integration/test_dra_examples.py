# SPDX-License-Identifier: Apache-2.0
"""Every object in examples/dra/ is valid resource.k8s.io/v1 (or core/v1 Node).

Structure is checked against the Kubernetes OpenAPI v3 document copied into schemas/ (strict: unknown
fields are rejected, as the API server does with strict field validation); $refs are resolved inside
that document. On top, the API-validation rules the schema cannot express (reference
dra-api-and-allocator.md section 2) are checked: one-of fields, name formats, semver, limits.
Needs python3-jsonschema and python3-yaml; no gpuplane binary.
"""
import copy
import json
import pathlib
import re

import pytest

jsonschema = pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml")

from openapi_schema import SCHEMA_FILE, strict, validator as _validator  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dra"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


@pytest.fixture(scope="module")
def components():
    doc = json.loads(SCHEMA_FILE.read_text())
    return strict(copy.deepcopy(doc["components"]))


def _objects():
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, obj in enumerate(yaml.safe_load_all(path.read_text())):
            if obj is not None:
                out.append(pytest.param(obj, id=f"{path.name}#{i}:{obj.get('kind')}/{obj['metadata']['name']}"))
    return out


def dns_subdomain(s):
    return len(s) <= 253 and all(DNS_LABEL.match(p) for p in s.split("."))


def qualified_name(s):
    if "/" in s:
        dom, ident = s.split("/", 1)
        return len(dom) <= 63 and dns_subdomain(dom) and len(ident) <= 32 and bool(C_IDENT.match(ident))
    return len(s) <= 32 and bool(C_IDENT.match(s))


def one_of(obj, keys):
    return sum(1 for k in keys if obj.get(k) not in (None, False)) == 1


def check_slice(spec):
    assert len(spec["driver"]) <= 63 and dns_subdomain(spec["driver"])
    assert spec["pool"]["resourceSliceCount"] > 0 and spec["pool"]["generation"] >= 0
    assert one_of(spec, ["nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"])
    devices = spec.get("devices", [])
    assert len(devices) <= 128
    if any(d.get("taints") or d.get("consumesCounters") for d in devices):
        assert len(devices) <= 64, "at most 64 devices when devices have taints or consume counters"
    assert len(spec.get("sharedCounters", [])) <= 8
    for cs in spec.get("sharedCounters", []):
        assert DNS_LABEL.match(cs["name"]) and 0 < len(cs["counters"]) <= 32
        assert all(DNS_LABEL.match(c) for c in cs["counters"])
    assert not (devices and spec.get("sharedCounters")), "a slice carries either sharedCounters or devices"
    names = [d["name"] for d in devices]
    assert len(names) == len(set(names)), "duplicate device names"
    for d in devices:
        assert DNS_LABEL.match(d["name"]) and len(d["name"]) <= 63, d["name"]
        attrs, caps = d.get("attributes", {}), d.get("capacity", {})
        assert len(attrs) + len(caps) <= 32, f"{d['name']}: more than 32 attributes + capacities"
        for name, a in attrs.items():
            assert qualified_name(name), name
            assert len(a) == 1, f"{d['name']}/{name}: exactly one value must be specified"
            if "string" in a:
                assert len(a["string"]) <= 64
            if "version" in a:
                assert SEMVER.match(a["version"]) and len(a["version"]) <= 64, a["version"]
        for name in caps:
            assert qualified_name(name), name
        if d.get("nodeName") or d.get("nodeSelector") or d.get("allNodes"):
            assert spec.get("perDeviceNodeSelection")
        assert len(d.get("taints", [])) <= 16
        assert len(d.get("consumesCounters", [])) <= 2
        for cc in d.get("consumesCounters", []):
            assert len(cc["counters"]) <= 32


def check_request(r, in_sub=False):
    assert DNS_LABEL.match(r["name"]), r["name"]
    assert dns_subdomain(r["deviceClassName"])
    assert len(r.get("selectors", [])) <= 32
    for s in r.get("selectors", []):
        assert s["cel"]["expression"].strip() and len(s["cel"]["expression"]) <= 10 * 1024
    mode = r.get("allocationMode", "ExactCount")
    assert mode in ("ExactCount", "All")
    if mode == "All":
        assert not r.get("count")
    else:
        assert r.get("count", 1) > 0
    if in_sub:
        assert "adminAccess" not in r


def check_claim_spec(spec):
    dev = spec.get("devices", {})
    reqs = dev.get("requests", [])
    assert len(reqs) <= 32
    names = set()
    for r in reqs:
        assert one_of(r, ["exactly", "firstAvailable"]), "exactly one of exactly or firstAvailable"
        assert r["name"] not in names
        names.add(r["name"])
        if "exactly" in r:
            check_request({"name": r["name"], **r["exactly"]})
        else:
            subs = r["firstAvailable"]
            assert 0 < len(subs) <= 8
            assert len({s["name"] for s in subs}) == len(subs)
            for s in subs:
                check_request(s, in_sub=True)
                names.add(f"{r['name']}/{s['name']}")
    for c in dev.get("constraints", []):
        assert one_of(c, ["matchAttribute", "distinctAttribute"])
        for ref in c.get("requests", []):
            assert ref in names, f"constraint names unknown request {ref}"
        assert qualified_name(c.get("matchAttribute") or c["distinctAttribute"])
        assert "/" in (c.get("matchAttribute") or c["distinctAttribute"]), "fully qualified name"
    for c in dev.get("config", []):
        for ref in c.get("requests", []):
            assert ref in names
        assert isinstance(c["opaque"]["parameters"], dict)
        assert len(json.dumps(c["opaque"]["parameters"])) <= 10 * 1024


@pytest.mark.parametrize("obj", _objects())
def test_example_object_is_valid(obj, components):
    if obj["kind"] in ("Node", "Pod"):
        assert obj["apiVersion"] == "v1"
        assert dns_subdomain(obj["metadata"]["name"])
        assert all(isinstance(v, str) for v in obj["metadata"].get("labels", {}).values())
        return
    assert obj["apiVersion"] == "resource.k8s.io/v1"
    errors = sorted(_validator(components, obj["kind"]).iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)
    name = obj["metadata"]["name"]
    assert dns_subdomain(name), name
    if obj["kind"] == "ResourceSlice":
        check_slice(obj["spec"])
    elif obj["kind"] == "DeviceClass":
        assert len(obj["spec"].get("selectors", [])) <= 32
    elif obj["kind"] == "ResourceClaim":
        check_claim_spec(obj["spec"])
    elif obj["kind"] == "ResourceClaimTemplate":
        check_claim_spec(obj["spec"]["spec"])
    else:
        pytest.fail(f"unexpected kind {obj['kind']}")


def test_strict_schema_rejects_unknown_fields(components):
    bad = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "x"},
           "spec": {"selectors": [{"cel": {"expresion": "true"}}]}}
    assert list(_validator(components, "DeviceClass").iter_errors(bad))


def test_pools_consistent():
    """Per pool: slice count and generation agree, device names unique across slices, counter sets
    unique and every consumed counter exists with enough total value (reference 4.1 step 5)."""
    pools = {}
    for path in EXAMPLES.glob("slices-*.yaml"):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj:
                pools.setdefault((obj["spec"]["driver"], obj["spec"]["pool"]["name"]), []).append(obj["spec"])
    for key, specs in pools.items():
        assert {s["pool"]["resourceSliceCount"] for s in specs} == {len(specs)}, key
        assert len({s["pool"]["generation"] for s in specs}) == 1, key
        names = [d["name"] for s in specs for d in s.get("devices", [])]
        assert len(names) == len(set(names)), key
        sets = {}
        for s in specs:
            for cs in s.get("sharedCounters", []):
                assert cs["name"] not in sets, key
                sets[cs["name"]] = cs["counters"]
        for s in specs:
            for d in s.get("devices", []):
                for cc in d.get("consumesCounters", []):
                    assert cc["counterSet"] in sets, (key, d["name"])
                    for c in cc["counters"]:
                        assert c in sets[cc["counterSet"]], (key, d["name"], c)


def test_examples_cover_the_issue():
    kinds = {}
    for path in EXAMPLES.glob("*.yaml"):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj:
                kinds.setdefault(obj["kind"], []).append(obj)
    assert {c["metadata"]["name"] for c in kinds["DeviceClass"]} >= {"gpu.nvidia.com", "mig.nvidia.com"}
    pools = {s["spec"]["pool"]["name"]: s for s in kinds["ResourceSlice"]}
    dgx = pools["dgx-h100-0"]["spec"]["devices"]
    assert len(dgx) == 8
    roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in dgx]
    assert all(roots.count(r) == 2 for r in roots), "two GPUs per PCIe root on a DGX"
    types = {d["attributes"]["type"]["string"] for d in pools["a100-mig-0"]["spec"]["devices"]}
    assert types == {"gpu", "mig"}
    assert "Node" in kinds and "ResourceClaim" in kinds


# ---- the README's table of expected allocations, through `gpuplane allocate` ----------------

EXPECTED = {  # (node, claim) -> sorted [(request, device)], or None for no solution
    ("dgx-h100-0", "one-gpu"): [("gpu", "gpu-0")],
    ("dgx-h100-0", "h100-80gb"): [("gpu", "gpu-0")],
    ("dgx-h100-0", "recent-driver"): [("gpu", "gpu-0")],
    ("dgx-h100-0", "pcie-pair"): [("gpus", "gpu-0"), ("gpus", "gpu-1")],
    ("dgx-h100-0", "two-pcie-pairs"): [("pair-a", "gpu-0"), ("pair-a", "gpu-1"), ("pair-b", "gpu-2"), ("pair-b", "gpu-3")],
    ("dgx-h100-0", "pcie-quad"): None,
    ("dgx-h100-0", "mig-1g5gb-pair"): None,
    ("dgx-h100-0", "best-gpu"): [("gpu/h100", "gpu-0")],
    ("a100-mig-0", "one-gpu"): [("gpu", "gpu-2")],
    ("a100-mig-0", "h100-80gb"): None,
    ("a100-mig-0", "recent-driver"): [("gpu", "gpu-2")],
    ("a100-mig-0", "pcie-pair"): [("gpus", "gpu-2"), ("gpus", "gpu-3")],
    ("a100-mig-0", "two-pcie-pairs"): None,
    ("a100-mig-0", "pcie-quad"): None,
    ("a100-mig-0", "mig-1g5gb-pair"): [("mig", "gpu-0-mig-1g5gb-19-2"), ("mig", "gpu-0-mig-1g5gb-19-3")],
    ("a100-mig-0", "best-gpu"): [("gpu/a100", "gpu-2")],
    ("pcie-t4-0", "one-gpu"): [("gpu", "gpu-0")],
    ("pcie-t4-0", "h100-80gb"): None,
    ("pcie-t4-0", "recent-driver"): None,
    ("pcie-t4-0", "pcie-pair"): None,
    ("pcie-t4-0", "two-pcie-pairs"): None,
    ("pcie-t4-0", "pcie-quad"): None,
    ("pcie-t4-0", "mig-1g5gb-pair"): None,
    ("pcie-t4-0", "best-gpu"): None,
    # Dynamic MIG (partitionable devices): first fit over the counter-limited placements.
    ("a100-dynmig-0", "one-gpu"): [("gpu", "gpu-0")],
    ("a100-dynmig-0", "pcie-pair"): [("gpus", "gpu-0"), ("gpus", "gpu-1")],
    ("a100-dynmig-0", "mig-1g5gb-pair"): [("mig", "gpu-0-mig-1g5gb-19-0"), ("mig", "gpu-0-mig-1g5gb-19-1")],
    ("a100-dynmig-0", "best-gpu"): [("gpu/a100", "gpu-0")],
}


@pytest.fixture(scope="module")
def allocate():
    import os
    import subprocess
    binary = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build")) / "gpuplane"
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    helptext = subprocess.run([str(binary), "--help"], capture_output=True, text=True).stdout
    if not re.search(r"^\s+allocate\s", helptext, re.M):
        pytest.skip("gpuplane has no `allocate` command yet")

    def run(*args):
        return subprocess.run([str(binary), "allocate", *map(str, args)], capture_output=True, text=True, timeout=60)
    return run


@pytest.mark.parametrize("node,claim", sorted(EXPECTED), ids=[f"{n}:{c}" for n, c in sorted(EXPECTED)])
def test_readme_allocations(node, claim, allocate, tmp_path):
    claims = [o for o in yaml.safe_load_all((EXAMPLES / "claims.yaml").read_text()) if o]
    f = tmp_path / "claim.yaml"
    f.write_text(yaml.safe_dump(next(c for c in claims if c["metadata"]["name"] == claim)))
    gates = ["--feature-gates", "DRAPartitionableDevices=true"] if "dynmig" in node else []
    p = allocate("--node", node, *gates, "-o", "json", "-f", EXAMPLES / "nodes.yaml", "-f", EXAMPLES / "deviceclasses.yaml",
                 "-f", EXAMPLES / f"slices-{node}.yaml", "-f", f)
    if "not supported by gpuplane yet" in p.stderr:
        pytest.skip(p.stderr.strip().splitlines()[-1])
    want = EXPECTED[(node, claim)]
    if want is None:
        assert p.returncode == 1, p.stdout + p.stderr
        return
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    items = out["items"] if isinstance(out, dict) else out
    results = items[0]["status"]["allocation"]["devices"]["results"]
    assert sorted((r["request"], r["device"]) for r in results) == want
    assert all(r["driver"] == "gpu.nvidia.com" and r["pool"] == node for r in results)
