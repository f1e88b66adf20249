# SPDX-License-Identifier: Apache-2.0
"""deploy/: the ClusterPolicy CRD, the Helm chart deploy/helm/gpuplane, deploy/gpuplane.yaml and the
image recipe deploy/Dockerfile.

- The CRD is what scripts/gen-crd.py writes; it is a valid apiextensions.k8s.io/v1
  CustomResourceDefinition (the official schema) and its schema is structural, as the API server
  requires (every node typed, no forbidden keywords, defaults and enums that match their type).
- The chart is rendered by tests/deploy-render (Go's text/template with sprig, as Helm does) with the
  default values and with overrides; every object is checked against the official OpenAPI schema of
  its kind and the ClusterPolicy against the CRD's own schema; deploy/gpuplane.yaml is exactly the
  default rendering (scripts/render-deploy.sh).
- The operator's RBAC covers every rule of every Role and ClusterRole it creates for the operands
  (the API server refuses to let it grant what it does not hold).
- The Dockerfile's runtime packages provide every library the binary needs (DT_NEEDED) and every
  library it loads at run time.
"""
import copy
import functools
import json
import os
import pathlib
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from conftest import BUILD, ROOT

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from openapi_schema import REFERENCE_OPENAPI, strict  # noqa: E402

CHART = ROOT / "deploy" / "helm" / "gpuplane"
CRD_FILE = CHART / "crds" / "nvidia.com_clusterpolicies.yaml"
DEPLOY_FILE = ROOT / "deploy" / "gpuplane.yaml"
PY = "/usr/bin/python3"

# apiVersion -> (the reference document, the schemas' name prefix)
DOCUMENTS = {
    "v1": ("core_v1.json", "io.k8s.api.core.v1."),
    "apps/v1": ("apps_v1.json", "io.k8s.api.apps.v1."),
    "rbac.authorization.k8s.io/v1": ("rbac_v1.json", "io.k8s.api.rbac.v1."),
    "node.k8s.io/v1": ("node_v1.json", "io.k8s.api.node.v1."),
    "coordination.k8s.io/v1": ("coordination_v1.json", "io.k8s.api.coordination.v1."),
    "apiextensions.k8s.io/v1": ("apiextensions_v1.json",
                                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."),
}


@functools.lru_cache(maxsize=None)
def _components(name):
    doc = json.loads((REFERENCE_OPENAPI / name).read_text())
    return strict(copy.deepcopy(doc["components"]))


@functools.lru_cache(maxsize=None)
def api_validator(api_version, kind):
    name, prefix = DOCUMENTS[api_version]
    schema = {"$ref": f"#/components/schemas/{prefix}{kind}", "components": _components(name)}
    return jsonschema.Draft202012Validator(schema)


def api_errors(obj):
    v = api_validator(obj["apiVersion"], obj["kind"])
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]


def load_crd():
    docs = [d for d in yaml.safe_load_all(CRD_FILE.read_text()) if d]
    assert len(docs) == 1
    return docs[0]


def crd_strict(node):
    """The CRD's schema as a validator sees it under strict field validation: objects with
    properties reject other fields unless they preserve unknown fields; int-or-string is anyOf."""
    if isinstance(node, dict):
        node = {k: crd_strict(v) for k, v in node.items()}
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [crd_strict(v) for v in node]
    return node


@functools.lru_cache(maxsize=1)
def cluster_policy_validator():
    schema = load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft202012Validator(crd_strict(schema))


def object_errors(obj):
    if obj.get("apiVersion") == "nvidia.com/v1" and obj.get("kind") == "ClusterPolicy":
        v = cluster_policy_validator()
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]
    return api_errors(obj)


# -- the CRD ------------------------------------------------------------------------------------

def test_crd_is_what_the_generator_writes():
    p = subprocess.run([PY, str(ROOT / "scripts" / "gen-crd.py"), "--check", str(CRD_FILE)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_crd_names_scope_versions_columns():
    crd = load_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "clusterpolicies.nvidia.com"
    spec = crd["spec"]
    assert spec["group"] == "nvidia.com"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {"kind": "ClusterPolicy", "listKind": "ClusterPolicyList",
                             "plural": "clusterpolicies", "singular": "clusterpolicy"}
    assert [v["name"] for v in spec["versions"]] == ["v1"]
    v1 = spec["versions"][0]
    assert v1["served"] is True and v1["storage"] is True
    assert v1["subresources"] == {"status": {}}
    cols = {c["name"]: c for c in v1["additionalPrinterColumns"]}
    assert cols["Status"]["jsonPath"] == ".status.state" and cols["Status"]["type"] == "string"
    assert cols["Age"]["jsonPath"] == ".metadata.creationTimestamp"
    for c in v1["additionalPrinterColumns"]:
        assert c["type"] in ("integer", "number", "string", "boolean", "date")


def test_crd_against_the_official_schema():
    assert api_errors(load_crd()) == []


# Keywords a structural schema may not use (apiextensions.k8s.io/v1 rejects them).
FORBIDDEN = {"$ref", "$schema", "definitions", "dependencies", "id", "patternProperties", "additionalItems",
             "readOnly", "writeOnly", "xml", "externalDocs"}
# Keywords allowed inside anyOf/allOf/oneOf/not (value validation only: no type, no description).
VALUE_ONLY = {"type", "description", "default", "nullable", "additionalProperties", "x-kubernetes-preserve-unknown-fields",
              "x-kubernetes-embedded-resource", "x-kubernetes-list-type", "x-kubernetes-map-type"}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def structural_problems(node, path="", root_metadata=False):
    """What makes a schema non-structural, as a list of 'path: problem'."""
    out = []
    if not isinstance(node, dict):
        return [f"{path}: not an object"]
    for k in FORBIDDEN & node.keys():
        out.append(f"{path}: forbidden keyword {k}")
    if node.get("uniqueItems") is True:
        out.append(f"{path}: uniqueItems: true is forbidden")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    t = node.get("type")
    if int_or_string:
        if t is not None:
            out.append(f"{path}: int-or-string with a type")
        any_of = node.get("anyOf")
        if any_of not in (None, [{"type": "integer"}, {"type": "string"}]):
            out.append(f"{path}: int-or-string anyOf must be integer, string")
    elif t not in TYPES:
        out.append(f"{path}: type {t!r} is not one of {sorted(TYPES)}")
    else:
        for key in ("anyOf", "allOf", "oneOf"):
            for i, sub in enumerate(node.get(key, ())):
                bad = VALUE_ONLY & sub.keys()
                if bad:
                    out.append(f"{path}.{key}[{i}]: {sorted(bad)} not allowed in a value validation")
    if "x-kubernetes-preserve-unknown-fields" in node and node["x-kubernetes-preserve-unknown-fields"] is not True:
        out.append(f"{path}: x-kubernetes-preserve-unknown-fields must be true when set")
    if node.get("x-kubernetes-preserve-unknown-fields") and t not in (None, "object"):
        out.append(f"{path}: preserve-unknown-fields on a non-object")
    if t == "object":
        if "properties" in node and "additionalProperties" in node:
            out.append(f"{path}: properties and additionalProperties together")
        for name, sub in node.get("properties", {}).items():
            out += structural_problems(sub, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            out += structural_problems(node["additionalProperties"], f"{path}.*")
        for r in node.get("required", ()):
            if r not in node.get("properties", {}):
                out.append(f"{path}: required {r} is not a property")
    elif "properties" in node or "additionalProperties" in node:
        out.append(f"{path}: properties on a {t}")
    if t == "array":
        if not isinstance(node.get("items"), dict):
            out.append(f"{path}: array without a single items schema")
        else:
            out += structural_problems(node["items"], f"{path}[]")
            if node.get("x-kubernetes-list-type") == "map":
                item = node["items"]
                for key in node.get("x-kubernetes-list-map-keys", []) or ["<none>"]:
                    if key not in item.get("required", []) and "default" not in item.get("properties", {}).get(key, {}):
                        out.append(f"{path}: list map key {key} neither required nor defaulted")
    elif "items" in node:
        out.append(f"{path}: items on a {t}")
    for e in node.get("enum", ()):
        if not _of_type(e, t):
            out.append(f"{path}: enum value {e!r} is not a {t}")
    if "default" in node:
        errs = list(jsonschema.Draft202012Validator(crd_strict(node)).iter_errors(node["default"]))
        if errs:
            out.append(f"{path}: default {node['default']!r} does not validate: {errs[0].message}")
    if root_metadata:
        extra = set(node) - {"type"}
        if extra:
            out.append(f"{path}: metadata may only be type: object here, has {sorted(extra)}")
    return out


def _of_type(v, t):
    return {"string": isinstance(v, str), "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": isinstance(v, bool), "object": isinstance(v, dict),
            "array": isinstance(v, list)}.get(t, False)


def test_crd_schema_is_structural():
    schema = load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["type"] == "object"
    problems = structural_problems(schema, "openAPIV3Schema")
    problems += structural_problems(schema["properties"]["metadata"], "openAPIV3Schema.metadata",
                                    root_metadata=True)
    assert problems == []


def test_structural_check_finds_problems():
    """The checker is not vacuous: each kind of mistake is reported."""
    bad = {"type": "object", "properties": {
        "a": {"description": "no type"},
        "b": {"type": "array"},
        "c": {"type": "string", "enum": [1]},
        "d": {"type": "string", "default": 3},
        "e": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "f": {"type": "string", "anyOf": [{"type": "string"}]},
        "g": {"$ref": "#/x", "type": "object"},
        "h": {"type": "string", "x-kubernetes-preserve-unknown-fields": True},
    }}
    problems = "\n".join(structural_problems(bad, "s"))
    for what in ("s.a: type", "s.b: array without", "s.c: enum", "s.d: default", "s.e: properties and",
                 "s.f.anyOf[0]", "s.g: forbidden keyword $ref", "s.h: preserve-unknown-fields"):
        assert what in problems, what


def spec_props():
    schema = load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]


COMPONENTS = ["driver", "toolkit", "validator", "devicePlugin", "draDriver", "dcgmExporter", "gfd"]


@pytest.mark.parametrize("name", COMPONENTS)
def test_crd_component_fields(name):
    comp = spec_props()["properties"][name]
    assert comp["type"] == "object"
    assert comp.get("x-kubernetes-preserve-unknown-fields") is True
    p = comp["properties"]
    assert p["enabled"]["type"] == "boolean"
    for f in ("repository", "image", "version"):
        assert p[f]["type"] == "string"
    assert p["imagePullPolicy"]["enum"] == ["Always", "Never", "IfNotPresent"]
    assert p["imagePullSecrets"]["items"]["type"] == "string"
    assert p["args"]["items"]["type"] == "string"
    assert p["env"]["items"]["required"] == ["name"]
    assert set(p["resources"]["properties"]) == {"limits", "requests"}
    assert p["hostNetwork"]["type"] == "boolean"


def test_crd_sections_gpuplane_reads():
    s = spec_props()
    assert s.get("x-kubernetes-preserve-unknown-fields") is True
    p = s["properties"]
    ds = p["daemonsets"]["properties"]
    assert ds["updateStrategy"]["enum"] == ["RollingUpdate", "OnDelete"]
    assert ds["rollingUpdate"]["properties"]["maxUnavailable"]["type"] == "string"
    assert ds["tolerations"]["items"]["properties"]["tolerationSeconds"]["format"] == "int64"
    assert ds["labels"]["additionalProperties"] == {"type": "string"}
    assert ds["priorityClassName"]["type"] == "string"
    assert p["operator"]["properties"]["runtimeClass"]["type"] == "string"
    assert p["psa"]["properties"]["enabled"]["type"] == "boolean"
    assert set(p["cdi"]["properties"]) >= {"enabled", "default", "nriPluginEnabled"}
    assert set(p["hostPaths"]["properties"]) == {"rootFS", "driverInstallDir", "kubeletRootDir"}
    assert p["mig"]["properties"]["strategy"]["enum"] == ["none", "single", "mixed"]
    assert set(p["devicePlugin"]["properties"]["config"]["properties"]) == {"name", "default"}
    exp = p["dcgmExporter"]["properties"]
    for f in ("hostPID", "enablePodLabels", "enablePodUID"):
        assert exp[f]["type"] == "boolean"
    assert exp["podLabelAllowlistRegex"]["items"]["type"] == "string"
    assert set(exp["service"]["properties"]) == {"type", "internalTrafficPolicy"}
    assert exp["config"]["properties"]["name"]["type"] == "string"
    for check in ("driver", "toolkit", "cuda", "plugin"):
        assert p["validator"]["properties"][check]["properties"]["env"]["type"] == "array"
    # NVIDIA's sections gpuplane accepts and ignores are there too, keeping their fields.
    for name in ("dcgm", "migManager", "nodeStatusExporter", "sandboxWorkloads", "vgpuManager", "gds"):
        assert name in p


def test_crd_status():
    status = load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["state"]["enum"] == ["ignored", "ready", "notReady", "disabled"]
    assert status["properties"]["namespace"]["type"] == "string"
    cond = status["properties"]["conditions"]["items"]
    assert set(cond["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert cond["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


def test_cluster_policy_examples_against_the_crd():
    """Policies in the shape NVIDIA's users write validate; typed mistakes do not; unknown NVIDIA
    fields are kept."""
    good = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"operator": {"defaultRuntime": "containerd", "futureField": 1},
                     "daemonsets": {"updateStrategy": "OnDelete", "rollingUpdate": {"maxUnavailable": "25%"},
                                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                     "effect": "NoSchedule"}]},
                     "driver": {"enabled": False, "upgradePolicy": {"maxUnavailable": "25%"},
                                "manager": {"image": "k8s-driver-manager"}},
                     "devicePlugin": {"config": {"name": "plugins", "default": "any"},
                                      "resources": {"limits": {"cpu": "100m", "memory": 64}},
                                      "someNewNvidiaField": {"x": 1}},
                     "dcgmExporter": {"enablePodLabels": True, "podLabelAllowlistRegex": ["^app$"]},
                     "mig": {"strategy": "mixed"}, "dcgm": {"enabled": False}, "gfd": {},
                     "nodeStatusExporter": {}, "toolkit": {"env": [{"name": "A", "value": "b"}]}},
            "status": {"state": "ready", "namespace": "gpu-operator",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    assert object_errors(good) == []
    for path, value in [(("spec", "devicePlugin", "imagePullPolicy"), "Sometimes"),
                        (("spec", "mig", "strategy"), "half"),
                        (("spec", "daemonsets", "updateStrategy"), "Recreate"),
                        (("spec", "devicePlugin", "enabled"), "yes"),
                        (("spec", "devicePlugin", "resources", "limits", "cpu"), "lots"),
                        (("spec", "psa", "enforce"), True),
                        (("status", "state"), "running")]:
        bad = copy.deepcopy(good)
        node = bad
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = value
        assert object_errors(bad), path
