# SPDX-License-Identifier: Apache-2.0
"""The allocator case table (tests/dalloc-cases/*.yaml, format in its README.md) run through
`gpuplane allocate`.

Contract assumed of the command (see tests/dalloc-cases/README.md):
    gpuplane allocate --node NODE --feature-gates G=true,... -o json -f FILE
FILE holds the case's objects as a JSON `kind: List` (JSON is YAML, so a YAML reader works too).
Exit 0: stdout is JSON - the pending claims with status.allocation filled (an array, or an object
with `items`); exit 1: no solution (reason on stderr); any other status: an error (message on
stderr). A case using a feature the allocator reports as "not supported by gpuplane yet" is
skipped with that message.

The format checks at the bottom need no binary.
"""
import fractions
import json
import os
import pathlib
import re
import subprocess

import pytest

yaml = pytest.importorskip("yaml")

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build"))
BINARY = BUILD / "gpuplane"
CASES_DIR = ROOT / "tests" / "dalloc-cases"
SCHEMA_FILE = pathlib.Path(__file__).resolve().parent / "schemas" / "resource.k8s.io_v1.json"

# Kubernetes 1.36 defaults of the gates that change allocation (reference section 1). Every run
# passes all of them, so the outcome never depends on the binary's own defaults.
# DRAResourceClaimDeviceStatus counts because kube-scheduler allocates devices with binding
# conditions only when it is on together with DRADeviceBindingConditions.
GATES_136 = {
    "DRAAdminAccess": True,
    "DRAPrioritizedList": True,
    "DRADeviceTaints": True,
    "DRAPartitionableDevices": True,
    "DRAConsumableCapacity": True,
    "DRADeviceBindingConditions": True,
    "DRAResourceClaimDeviceStatus": True,
}
UNSUPPORTED = "not supported by gpuplane yet"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def load_cases():
    return [(p.stem, yaml.safe_load(p.read_text())) for p in sorted(CASES_DIR.glob("*.yaml"))]


CASES = load_cases()


def has_allocate():
    if not BINARY.exists():
        return f"{BINARY} is not built"
    p = subprocess.run([str(BINARY), "--help"], capture_output=True, text=True, timeout=30)
    if not re.search(r"^\s+allocate\s", p.stdout + p.stderr, re.M):
        return "gpuplane has no `allocate` command yet (not listed by `gpuplane --help`)"
    return None


# ---- comparison helpers ---------------------------------------------------------------------

_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "m": fractions.Fraction(1, 1000), "": 1, "k": 10**3, "M": 10**6, "G": 10**9,
           "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(q):
    """A Kubernetes Quantity string (or number) as an exact Fraction."""
    if isinstance(q, (int, float)):
        return fractions.Fraction(q)
    m = re.fullmatch(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?)", q.strip())
    assert m, f"bad quantity {q!r}"
    v = fractions.Fraction(m.group(1))
    if m.group(2):
        return v * fractions.Fraction(10) ** int(m.group(2)[1:])
    return v * _SUFFIX[m.group(3) or ""]


def norm_toleration(t):
    t = {k: v for k, v in t.items() if v not in (None, "")}
    t.setdefault("operator", "Equal")
    return t


def entry_matches(exp, act):
    for k in ("request", "driver", "pool", "device"):
        if exp[k] != act.get(k):
            return False
    if bool(exp.get("adminAccess", False)) != bool(act.get("adminAccess", False)):
        return False
    if "tolerations" in exp:
        if [norm_toleration(t) for t in exp["tolerations"]] != [norm_toleration(t) for t in act.get("tolerations") or []]:
            return False
    if "shareID" in exp:
        sid = act.get("shareID")
        if exp["shareID"] is True and not (isinstance(sid, str) and UUID.match(sid)):
            return False
        if exp["shareID"] is False and sid:
            return False
    if "consumedCapacity" in exp:
        cc = act.get("consumedCapacity")
        if exp["consumedCapacity"] is None:
            if cc:
                return False
        elif not cc or {k: quantity(v) for k, v in exp["consumedCapacity"].items()} != {k: quantity(v) for k, v in cc.items()}:
            return False
    for k in ("bindingConditions", "bindingFailureConditions"):
        if k in exp and exp[k] != (act.get(k) or []):
            return False
    return True


def compare_results(claim, expected, actual):
    """Order-insensitive: every expected entry matches a distinct actual entry and vice versa."""
    left = list(actual)
    for e in expected:
        for i, a in enumerate(left):
            if entry_matches(e, a):
                del left[i]
                break
        else:
            pytest.fail(f"claim {claim}: expected result {e} not in {actual}")
    assert not left, f"claim {claim}: unexpected results {left}"


def norm_selector(sel):
    if not sel:
        return None
    terms = []
    for t in sel.get("nodeSelectorTerms", []):
        reqs = set()
        for kind in ("matchExpressions", "matchFields"):
            for r in t.get(kind) or []:
                reqs.add((kind, r["key"], r["operator"], tuple(sorted(r.get("values") or []))))
        terms.append(frozenset(reqs))
    return terms


def norm_config(cfgs):
    return [{"source": c.get("source"), "requests": list(c.get("requests") or []), "opaque": c.get("opaque")}
            for c in cfgs or []]


def claims_by_name(out):
    items = out.get("items", []) if isinstance(out, dict) else out
    byname = {}
    for c in items:
        md = c.get("metadata", {})
        byname[md.get("name")] = c
        byname[f"{md.get('namespace', 'default')}/{md.get('name')}"] = c
    return byname


# ---- running the cases ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def allocate_binary():
    reason = has_allocate()
    if reason:
        pytest.skip(reason)
    return BINARY


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_case(name, case, allocate_binary, tmp_path):
    gates = {**GATES_136, **(case.get("featureGates") or {})}
    objs = tmp_path / "objects.json"
    objs.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": case["objects"]}))
    cmd = [str(allocate_binary), "allocate", "--node", case["node"],
           "--feature-gates", ",".join(f"{k}={'true' if v else 'false'}" for k, v in gates.items()),
           "-o", "json", "-f", str(objs)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    text = p.stderr + p.stdout
    if UNSUPPORTED in text:
        pytest.skip(f"{name}: {text.strip().splitlines()[-1]}")
    expect = case["expect"]
    ctx = f"{' '.join(cmd)}\nexit {p.returncode}\nstdout: {p.stdout[:2000]}\nstderr: {p.stderr[:2000]}"
    if "error" in expect:
        assert p.returncode not in (0, 1), f"expected an error containing {expect['error']!r}\n{ctx}"
        assert expect["error"] in p.stderr, ctx
        return
    if "unsatisfiable" in expect:
        assert p.returncode == 1, f"expected no solution\n{ctx}"
        if isinstance(expect["unsatisfiable"], str):
            assert expect["unsatisfiable"] in text, ctx
        return
    assert p.returncode == 0, ctx
    byname = claims_by_name(json.loads(p.stdout))
    for claim, expected in expect["results"].items():
        assert claim in byname, f"claim {claim} missing from the output\n{ctx}"
        alloc = (byname[claim].get("status") or {}).get("allocation") or {}
        compare_results(claim, expected, (alloc.get("devices") or {}).get("results") or [])
    for claim, want in (expect.get("allocations") or {}).items():
        alloc = byname[claim]["status"]["allocation"]
        if "nodeSelector" in want:
            assert norm_selector(want["nodeSelector"]) == norm_selector(alloc.get("nodeSelector")), \
                f"claim {claim}: nodeSelector {alloc.get('nodeSelector')}"
        if "config" in want:
            assert norm_config(want["config"]) == norm_config((alloc.get("devices") or {}).get("config")), \
                f"claim {claim}: config {(alloc.get('devices') or {}).get('config')}"


# ---- the table itself (no binary needed) -----------------------------------------------------

def _schemas():
    jsonschema = pytest.importorskip("jsonschema")
    comps = json.loads(SCHEMA_FILE.read_text())["components"]
    return jsonschema, comps


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_case_format(name, case):
    assert set(case) <= {"description", "node", "featureGates", "objects", "expect"}, set(case)
    assert case["description"] and case["node"]
    for g in case.get("featureGates") or {}:
        assert g in GATES_136, f"unknown gate {g}"
    expect = case["expect"]
    assert len({"results", "unsatisfiable", "error"} & set(expect)) == 1, expect
    assert set(expect) <= {"results", "allocations", "unsatisfiable", "error"}
    kinds = [o["kind"] for o in case["objects"]]
    assert "Node" in kinds
    assert case["node"] in {o["metadata"]["name"] for o in case["objects"] if o["kind"] == "Node"}
    claims = {o["metadata"]["name"]: o for o in case["objects"] if o["kind"] == "ResourceClaim"}
    pending = {n for n, c in claims.items() if not (c.get("status") or {}).get("allocation")}
    assert pending, "nothing to allocate"
    for claim, results in (expect.get("results") or {}).items():
        assert claim in pending, f"{claim} is not a pending claim"
        reqs = set()
        for r in claims[claim]["spec"]["devices"]["requests"]:
            reqs.add(r["name"])
            reqs.update(f"{r['name']}/{s['name']}" for s in r.get("firstAvailable", []))
        for e in results:
            assert {"request", "driver", "pool", "device"} <= set(e)
            assert e["request"] in reqs, e
    if "results" in expect:
        assert set(expect["results"]) == pending, "every pending claim needs its expected results"
    jsonschema, comps = _schemas()
    for o in case["objects"]:
        if o["kind"] == "Node":
            continue
        schema = {"$ref": f"#/components/schemas/io.k8s.api.resource.v1.{o['kind']}", "components": comps}
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(o))
        assert not errors, f"{o['kind']} {o['metadata']['name']}: " + "; ".join(e.message for e in errors)


def test_table_covers_the_rules():
    groups = {n.split("-", 1)[0] for n, _ in CASES}
    assert groups >= {"basics", "pools", "nodes", "all", "admin", "constraints", "prioritized", "taints",
                      "partitionable", "capacity", "binding", "config", "cel", "in"}, groups
