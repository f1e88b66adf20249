# SPDX-License-Identifier: Apache-2.0
"""The official resource.k8s.io/v1 OpenAPI v3 document (schemas/), and the CRDs of
node-feature-discovery (the reference folder's openapi/nfd-api-crds.yaml), as jsonschema validators.

Shared by the example checks (test_dra_examples.py) and the fake API server (fakekube.py). Validation
is strict, as the API server's strict field validation: every object schema with properties rejects
unknown fields. $refs resolve inside the document (#/components/schemas/...).
"""
import copy
import functools
import json
import pathlib

import jsonschema
import yaml

HERE = pathlib.Path(__file__).resolve().parent
SCHEMA_FILE = HERE / "schemas" / "resource.k8s.io_v1.json"
# In CI the shared reference data sits next to the repository (../shared).
NFD_CRDS = HERE.parents[2] / "shared" / "reference" / "openapi" / "nfd-api-crds.yaml"
PREFIX = "io.k8s.api.resource.v1."


def strict(node):
    """Reject unknown fields: every object schema with properties gets additionalProperties: false."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for v in node.values():
            strict(v)
    elif isinstance(node, list):
        for v in node:
            strict(v)
    return node


@functools.lru_cache(maxsize=1)
def load_components():
    """The document's components, made strict. Cached: callers must not modify the result."""
    doc = json.loads(SCHEMA_FILE.read_text())
    return strict(copy.deepcopy(doc["components"]))


def validator(components, kind):
    """A Draft 2020-12 validator for resource.k8s.io/v1 kind (e.g. "ResourceClaim")."""
    schema = {"$ref": f"#/components/schemas/{PREFIX}{kind}", "components": components}
    return jsonschema.Draft202012Validator(schema)


def kinds():
    """The kinds the document defines a schema for (lists included)."""
    return sorted(k[len(PREFIX):] for k in load_components()["schemas"] if k.startswith(PREFIX))


@functools.lru_cache(maxsize=None)
def crd_validator(group, version, kind):
    """A strict validator for a custom resource of node-feature-discovery's CRDs (e.g.
    "nfd.k8s-sigs.io", "v1alpha1", "NodeFeature"), from the version's openAPIV3Schema."""
    for doc in yaml.safe_load_all(NFD_CRDS.read_text()):
        spec = (doc or {}).get("spec", {})
        if spec.get("group") != group or spec.get("names", {}).get("kind") != kind:
            continue
        for v in spec["versions"]:
            if v["name"] == version:
                schema = strict(copy.deepcopy(v["schema"]["openAPIV3Schema"]))
                return jsonschema.Draft202012Validator(schema)
    raise KeyError(f"{kind}.{group}/{version} is not in {NFD_CRDS}")


REFERENCE_OPENAPI = HERE.parents[2] / "shared" / "reference" / "openapi"
# apiVersion -> (the reference document, the schemas' name prefix)
API_DOCUMENTS = {
    "v1": ("core_v1.json", "io.k8s.api.core.v1."),
    "apps/v1": ("apps_v1.json", "io.k8s.api.apps.v1."),
    "rbac.authorization.k8s.io/v1": ("rbac_v1.json", "io.k8s.api.rbac.v1."),
    "node.k8s.io/v1": ("node_v1.json", "io.k8s.api.node.v1."),
    "coordination.k8s.io/v1": ("coordination_v1.json", "io.k8s.api.coordination.v1."),
    "apiextensions.k8s.io/v1": ("apiextensions_v1.json",
                                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."),
}


@functools.lru_cache(maxsize=None)
def _reference_components(name):
    doc = json.loads((REFERENCE_OPENAPI / name).read_text())
    return strict(copy.deepcopy(doc["components"]))


@functools.lru_cache(maxsize=None)
def api_validator(api_version, kind):
    """A strict validator for a built-in kind from the official OpenAPI documents in the reference
    folder (core, apps, rbac, node, coordination, apiextensions)."""
    name, prefix = API_DOCUMENTS[api_version]
    schema = {"$ref": f"#/components/schemas/{prefix}{kind}", "components": _reference_components(name)}
    return jsonschema.Draft202012Validator(schema)


def api_errors(obj):
    """What api_validator() finds wrong with a built-in object, as "path: message" lines."""
    v = api_validator(obj["apiVersion"], obj["kind"])
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]
