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
from openapi_schema import api_errors  # noqa: E402

CHART = ROOT / "deploy" / "helm" / "gpuplane"
CRD_FILE = CHART / "crds" / "nvidia.com_clusterpolicies.yaml"
DEPLOY_FILE = ROOT / "deploy" / "gpuplane.yaml"
PY = "/usr/bin/python3"

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


# -- the renderer -------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def renderer():
    p = subprocess.run([str(ROOT / "tests" / "deploy-render" / "build.sh"), str(BUILD)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def run_render(renderer, *args, chart=CHART, check=True):
    p = subprocess.run([renderer, *map(str, args), str(chart)], capture_output=True, text=True, timeout=60)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def render_chart(renderer, *args, chart=CHART, release="gpuplane", namespace="gpu-operator"):
    """The chart's objects as `helm template` prints them: [(source, object)]."""
    out = run_render(renderer, "--name", release, "-n", namespace, *args, chart=chart).stdout
    return parse_stream(out)


def parse_stream(text):
    """[(source, object)] of a `helm template` stream; every document must have a Source line."""
    docs = []
    for chunk in re.split(r"(?m)^---\s*$", text):
        if not chunk.strip():
            continue
        m = re.search(r"(?m)^# Source: (\S+)$", chunk)
        obj = yaml.safe_load(chunk)
        if obj is None:
            continue
        docs.append((m.group(1) if m else None, obj))
    return docs


def by_kind(docs):
    out = {}
    for _, o in docs:
        out.setdefault(o["kind"], []).append(o)
    return out


def write_chart(tmp_path, templates, values="", chart_yaml=None):
    c = tmp_path / "mini"
    (c / "templates").mkdir(parents=True)
    (c / "Chart.yaml").write_text(chart_yaml or "apiVersion: v2\nname: mini\nversion: 1.2.3\nappVersion: \"4.5\"\n")
    (c / "values.yaml").write_text(values)
    for name, text in templates.items():
        (c / "templates" / name).write_text(text)
    return c


def test_renderer_helm_semantics(renderer, tmp_path):
    """What Helm's engine adds to text/template+sprig, on a small chart: the built-in objects,
    include/define across files, toYaml (sorted keys, quoted strings that would change type),
    required, tpl, fromYaml, missing keys render empty, values typing, the kind order and the
    Source lines."""
    chart = write_chart(tmp_path, {
        "_h.tpl": '{{- define "mini.name" -}}{{ .Chart.Name }}-{{ .Release.Name }}{{- end -}}',
        "b.yaml": ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"mini.name\" . }}\n"
                   "  namespace: {{ .Release.Namespace }}\n  annotations:\n"
                   "    chart: {{ .Chart.Version }}/{{ .Chart.AppVersion }}/{{ .Release.Service }}\n"
                   "    port: {{ .Values.port | quote }}\n"
                   "    tpl: {{ tpl .Values.tplText . | quote }}\n"
                   "    missing: \"{{ .Values.nothing }}\"\n"
                   "    fromYaml: {{ (fromYaml \"a: 1\").a | quote }}\n"
                   "  labels:\n    {{- toYaml .Values.labels | nindent 4 }}\n"),
        "a.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n---\n# empty\n---\n"
                  "apiVersion: example.com/v1\nkind: Zebra\nmetadata:\n  name: z\n",
        "c.yaml": "{{- if .Values.off }}\napiVersion: v1\nkind: ConfigMap\n{{- end }}\n",
    }, values="port: 8080\ntplText: '{{ .Release.Name }}!'\nlabels:\n  z: 'true'\n  a: '1'\n  m: x\n")
    docs = render_chart(renderer, chart=chart, release="rel", namespace="ns")
    assert [(s, o["kind"]) for s, o in docs] == [("mini/templates/a.yaml", "ServiceAccount"),
                                                   ("mini/templates/b.yaml", "Deployment"),
                                                   ("mini/templates/a.yaml", "Zebra")]
    d = docs[1][1]
    assert d["metadata"]["name"] == "mini-rel"
    assert d["metadata"]["namespace"] == "ns"
    a = d["metadata"]["annotations"]
    assert a == {"chart": "1.2.3/4.5/Helm", "port": "8080", "tpl": "rel!", "missing": "", "fromYaml": "1"}
    assert d["metadata"]["labels"] == {"a": "1", "m": "x", "z": "true"}
    out = run_render(renderer, "--name", "rel", chart=chart).stdout
    assert "  labels:\n    a: \"1\"\n    m: x\n    z: \"true\"\n" in out


def test_renderer_values_overrides(renderer, tmp_path):
    chart = write_chart(tmp_path, {"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
                                              "data:\n  all: {{ toJson .Values | quote }}\n"},
                        values="a:\n  b: 1\n  c: keep\n  gone: x\nlist: [1, 2]\n")
    over = tmp_path / "over.yaml"
    over.write_text("a:\n  b: 2\n  gone: null\nlist: [3]\n")
    docs = render_chart(renderer, "-f", over, "--set", "a.d=true,a.e=007,a.f=12", "--set-string", "a.g=false",
                        "--set", "x\\.y=1", chart=chart)
    values = json.loads(docs[0][1]["data"]["all"])
    assert values == {"a": {"b": 2, "c": "keep", "d": True, "e": "007", "f": 12, "g": "false"},
                      "list": [3], "x.y": 1}


def test_renderer_errors(renderer, tmp_path):
    chart = write_chart(tmp_path, {"x.yaml": "a: {{ required \"x.name is required\" .Values.x.name }}\n"},
                        values="x:\n  name: \"\"\n")
    p = run_render(renderer, chart=chart, check=False)
    assert p.returncode == 1 and "x.name is required" in p.stderr
    chart2 = write_chart(tmp_path / "2", {"x.yaml": "a: {{ env \"HOME\" }}\n"})
    p = run_render(renderer, chart=chart2, check=False)
    assert p.returncode == 1 and "env" in p.stderr   # Helm removes env from sprig
    chart3 = write_chart(tmp_path / "3", {"x.yaml": "a: [\n"})
    p = run_render(renderer, chart=chart3, check=False)
    assert p.returncode == 1 and "does not parse" in p.stderr
    p = run_render(renderer, "--bogus", chart=chart, check=False)
    assert p.returncode == 2


# -- the chart ----------------------------------------------------------------------------------

def cmake_version():
    m = re.search(r"^project\(gpuplane VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text(), re.M)
    return m.group(1)


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "gpuplane"
    assert chart["version"] == cmake_version()
    assert chart["appVersion"] == cmake_version()


def test_deploy_yaml_is_the_default_rendering(renderer):
    """deploy/gpuplane.yaml = the Namespace + the chart with default values and its CRD."""
    rendered = run_render(renderer, "--name", "gpuplane", "-n", "gpu-operator", "--include-crds").stdout
    committed = DEPLOY_FILE.read_text()
    head, sep, rest = committed.partition("\n---\n# Source: ")
    assert sep, "deploy/gpuplane.yaml has no rendered objects"
    assert "---\n# Source: " + rest == rendered, \
        "deploy/gpuplane.yaml is not the chart's default rendering: run scripts/render-deploy.sh"
    ns = [d for d in yaml.safe_load_all(head) if d]
    assert ns == [{"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "gpu-operator", "labels": {"app.kubernetes.io/part-of": "gpu-operator"}}}]


def test_render_deploy_check(renderer):
    env = dict(os.environ, BUILD=str(BUILD))
    p = subprocess.run([str(ROOT / "scripts" / "render-deploy.sh"), "--check"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr


OVERRIDES = {
    "defaults": [],
    "dra": ["--set", "draDriver.enabled=true"],
    "registry": ["--set", "operator.repository=registry.local:5000/gp,operator.version=1.2.3"],
    "everything": ["--set", "psa.enabled=true,draDriver.enabled=true,dcgmExporter.enablePodLabels=true,"
                   "dcgmExporter.enablePodUID=true,dcgmExporter.hostPID=true,daemonsets.updateStrategy=OnDelete,"
                   "devicePlugin.config.create=true,devicePlugin.config.name=plugin-configs,"
                   "devicePlugin.config.default=any,devicePlugin.config.data.any=version: v1,"
                   "dcgmExporter.config.create=true,dcgmExporter.config.name=metrics,"
                   "dcgmExporter.config.data=DCGM_FI_DEV_GPU_TEMP\\, gauge\\, temp,"
                   "mig.strategy=mixed,cdi.enabled=false,driver.enabled=false"],
}


@pytest.mark.parametrize("case", sorted(OVERRIDES))
def test_every_object_against_its_schema(renderer, case):
    docs = render_chart(renderer, "--include-crds", *OVERRIDES[case])
    assert docs
    for source, obj in docs:
        assert source and source.startswith("gpuplane/")
        assert object_errors(obj) == [], (source, obj["kind"], object_errors(obj)[:5])
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ClusterPolicy"):
            assert obj["metadata"]["namespace"] == "gpu-operator", source


def test_default_objects(renderer):
    kinds = by_kind(render_chart(renderer))
    assert sorted(kinds) == ["ClusterPolicy", "ClusterRole", "ClusterRoleBinding", "Deployment", "Role",
                             "RoleBinding", "ServiceAccount"]
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Deployment"):
        assert [o["metadata"]["name"] for o in kinds[kind]] == ["gpu-operator"], kind
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        b = kinds[kind][0]
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-operator", "namespace": "gpu-operator"}]
        assert b["roleRef"]["name"] == "gpu-operator"
    assert kinds["ClusterRoleBinding"][0]["roleRef"]["kind"] == "ClusterRole"
    assert kinds["RoleBinding"][0]["roleRef"]["kind"] == "Role"


def values_file(tmp_path, text):
    f = tmp_path / "values.yaml"
    f.write_text(text)
    return f


def operator_container(docs):
    dep = by_kind(docs)["Deployment"][0]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, c


def test_operator_deployment(renderer):
    dep, c = operator_container(render_chart(renderer))
    spec = dep["spec"]
    assert spec["replicas"] == 1
    pod = spec["template"]
    assert pod["metadata"]["labels"]["app"] == "gpu-operator"
    for k, v in spec["selector"]["matchLabels"].items():
        assert pod["metadata"]["labels"][k] == v
    ps = pod["spec"]
    assert ps["serviceAccountName"] == "gpu-operator"
    assert ps["securityContext"]["runAsNonRoot"] is True and ps["securityContext"]["runAsUser"] == 65532
    assert c["image"] == f"ghcr.io/gpuplane/gpuplane:{cmake_version()}"
    assert c["command"] == ["/usr/bin/gpuplane"] and c["args"] == ["operator", "--leader-elect"]
    env = {e["name"]: e for e in c["env"]}
    assert env["OPERATOR_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["GPUPLANE_IMAGE"]["value"] == c["image"]
    # NVIDIA's fallbacks would take precedence over GPUPLANE_IMAGE for gpuplane's components.
    assert not {"VALIDATOR_IMAGE", "DEVICE_PLUGIN_IMAGE", "GFD_IMAGE", "DCGM_EXPORTER_IMAGE"} & env.keys()
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8081}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}
    assert {"name": "metrics", "containerPort": 8080} in c["ports"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["cpu"]


def test_operator_image_overrides(renderer, tmp_path):
    _, c = operator_container(render_chart(renderer, *OVERRIDES["registry"]))
    assert c["image"] == "registry.local:5000/gp/gpuplane:1.2.3"
    assert {"name": "GPUPLANE_IMAGE", "value": "registry.local:5000/gp/gpuplane:1.2.3"} in c["env"]
    _, c = operator_container(render_chart(renderer, "--set", "operator.version=sha256:" + "ab" * 32))
    assert c["image"] == "ghcr.io/gpuplane/gpuplane@sha256:" + "ab" * 32
    dep, c = operator_container(render_chart(renderer, "--set",
                                             "operator.imagePullPolicy=Always,operator.labels.team=gpu"))
    assert c["imagePullPolicy"] == "Always"
    assert dep["metadata"]["labels"]["team"] == "gpu"
    over = render_chart(renderer, "-f", values_file(tmp_path,
        "operator:\n  imagePullSecrets: [regcred]\n  env:\n  - name: DRIVER_IMAGE\n    value: my/driver:1\n"
        "  args: [--zap-log-level=debug]\n"))
    dep, c = operator_container(over)
    assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert {"name": "DRIVER_IMAGE", "value": "my/driver:1"} in c["env"]
    assert c["args"] == ["operator", "--leader-elect", "--zap-log-level=debug"]


def cluster_policy(docs):
    (cp,) = by_kind(docs)["ClusterPolicy"]
    return cp


def test_default_cluster_policy(renderer):
    cp = cluster_policy(render_chart(renderer))
    assert cp["metadata"]["name"] == "cluster-policy"
    assert "namespace" not in cp["metadata"]
    s = cp["spec"]
    # NVIDIA's images for the driver and the toolkit (its Helm defaults).
    assert {k: s["driver"][k] for k in ("repository", "image", "version")} == \
        {"repository": "nvcr.io/nvidia", "image": "driver", "version": "595.91.07"}
    assert {k: s["toolkit"][k] for k in ("repository", "image", "version")} == \
        {"repository": "nvcr.io/nvidia/k8s", "image": "container-toolkit", "version": "v1.20.0"}
    # gpuplane's components name no image: the operator gives them its own (GPUPLANE_IMAGE).
    for comp in ("validator", "devicePlugin", "draDriver", "dcgmExporter", "gfd"):
        assert not {"repository", "image", "version"} & s[comp].keys(), comp
    assert s["draDriver"]["enabled"] is False
    for comp in ("driver", "toolkit", "devicePlugin", "dcgmExporter", "gfd"):
        assert s[comp]["enabled"] is True, comp
    for comp in ("dcgm", "migManager", "nodeStatusExporter"):
        assert s[comp] == {"enabled": False}, comp
    assert s["daemonsets"] == {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                "effect": "NoSchedule"}],
                               "priorityClassName": "system-node-critical", "updateStrategy": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": "1"}}
    assert s["operator"] == {"runtimeClass": "nvidia"}
    assert s["mig"] == {"strategy": "single"}
    assert s["hostPaths"] == {"rootFS": "/", "driverInstallDir": "/run/nvidia/driver",
                              "kubeletRootDir": "/var/lib/kubelet"}
    assert s["psa"] == {"enabled": False} and s["cdi"] == {"enabled": True}


def test_cluster_policy_overrides(renderer, tmp_path):
    docs = render_chart(renderer, *OVERRIDES["everything"])
    s = cluster_policy(docs)["spec"]
    assert s["draDriver"]["enabled"] is True
    assert s["psa"] == {"enabled": True} and s["cdi"] == {"enabled": False}
    assert s["driver"]["enabled"] is False
    assert s["daemonsets"]["updateStrategy"] == "OnDelete"
    assert s["mig"] == {"strategy": "mixed"}
    assert s["devicePlugin"]["config"] == {"name": "plugin-configs", "default": "any"}
    e = s["dcgmExporter"]
    assert e["enablePodLabels"] is True and e["enablePodUID"] is True and e["hostPID"] is True
    assert e["config"] == {"name": "metrics"}
    cms = {c["metadata"]["name"]: c for c in by_kind(docs)["ConfigMap"]}
    assert cms["plugin-configs"]["data"] == {"any": "version: v1"}
    assert cms["metrics"]["data"] == {"dcgm-metrics.csv": "DCGM_FI_DEV_GPU_TEMP, gauge, temp\n"}

    over = render_chart(renderer, "-f", values_file(tmp_path,
        "devicePlugin:\n  repository: my.reg/gp\n  image: gpuplane\n  version: '2.0'\n  imagePullSecrets: [s1]\n"
        "  args: [--fail-on-init-error=false]\n  env:\n  - {name: A, value: b}\n"
        "  resources:\n    limits: {memory: 64Mi}\n"
        "validator:\n  plugin:\n    env:\n    - {name: WITH_WORKLOAD, value: 'false'}\n"
        "daemonsets:\n  labels: {team: gpu}\n  annotations: {a: b}\n  rollingUpdate: {maxUnavailable: 25%}\n"))
    s = cluster_policy(over)["spec"]
    dp = s["devicePlugin"]
    assert (dp["repository"], dp["image"], dp["version"]) == ("my.reg/gp", "gpuplane", "2.0")
    assert dp["imagePullSecrets"] == ["s1"] and dp["args"] == ["--fail-on-init-error=false"]
    assert dp["env"] == [{"name": "A", "value": "b"}] and dp["resources"] == {"limits": {"memory": "64Mi"}}
    assert s["validator"]["plugin"] == {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}
    assert s["daemonsets"]["labels"] == {"team": "gpu"} and s["daemonsets"]["annotations"] == {"a": "b"}
    assert s["daemonsets"]["rollingUpdate"] == {"maxUnavailable": "25%"}
    assert object_errors(cluster_policy(over)) == []


def test_no_cluster_policy_without_deploy_cr(renderer):
    kinds = by_kind(render_chart(renderer, "--set", "clusterPolicy.deployCR=false"))
    assert "ClusterPolicy" not in kinds and "Deployment" in kinds


def test_chart_refuses_incomplete_configs(renderer):
    p = run_render(renderer, "--set", "devicePlugin.config.create=true", check=False)
    assert p.returncode == 1 and "devicePlugin.config.name is required" in p.stderr
    p = run_render(renderer, "--set", "devicePlugin.config.create=true,devicePlugin.config.name=x", check=False)
    assert p.returncode == 1 and "devicePlugin.config.data" in p.stderr
    p = run_render(renderer, "--set", "operator.image=", check=False)
    assert p.returncode == 1 and "operator.image is required" in p.stderr


# -- the image ----------------------------------------------------------------------------------

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
# Essential packages of debian:12-slim that a binary may need.
BASE_PACKAGES = {"libc6", "libgcc-s1"}
DLIB = re.compile(r'DLIB_INIT\(\s*"([^"]+)"\s*,\s*"([^"]+)"')


def dockerfile_stages():
    """[(FROM line, [apt packages installed in that stage], [other instructions])]."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append((line, [], []))
            continue
        assert stages, "an instruction before FROM"
        m = re.search(r"apt-get install ((?:-\S+\s+)*)([^&]+)", line)
        if m:
            stages[-1][1].extend(m.group(2).split())
        stages[-1][2].append(line)
    return stages


def package_of(soname):
    """The Debian package shipping soname on this (Debian 12) machine."""
    p = subprocess.run(["dpkg-query", "-S", f"*/{soname}"], capture_output=True, text=True)
    assert p.returncode == 0, f"no installed package ships {soname}: {p.stderr}"
    pkgs = {line.split(":")[0].strip() for line in p.stdout.splitlines() if not line.startswith("diversion")}
    pkgs = {x.split(",")[0].strip() for x in pkgs}
    return pkgs


def dt_needed(binary):
    p = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)


def dlopened():
    """{soname: package} of every library the sources load at first use (src/base/base-dlib.h)."""
    out = {}
    for f in (ROOT / "src").rglob("*.c"):
        for so, pkg in DLIB.findall(f.read_text()):
            out[so] = pkg
    return out


def test_dockerfile_shape():
    stages = dockerfile_stages()
    assert [s[0] for s in stages] == ["FROM debian:12 AS build", "FROM debian:12-slim"]
    final = stages[-1][2]
    assert "USER 65532:65532" in final
    assert 'ENTRYPOINT ["/usr/bin/gpuplane"]' in final
    assert any(i.startswith("COPY --from=build") and i.endswith(" /usr/bin/gpuplane") for i in final)
    # Only runtime libraries in the final stage: no compilers, no headers.
    for pkg in stages[-1][1]:
        assert not pkg.endswith("-dev") and pkg not in ("build-essential", "cmake", "gcc"), pkg


def test_dockerfile_runtime_packages_cover_the_binary():
    """Every DT_NEEDED library of the built binary and every library it loads at run time comes
    from a package the runtime stage installs (libc6 and libgcc-s1 are in the base image)."""
    binary = BUILD / "gpuplane"
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    runtime = set(dockerfile_stages()[-1][1])
    needed = dt_needed(binary)
    if any(so.startswith(("libasan", "libubsan", "liblsan", "libtsan")) for so in needed):
        pytest.skip("a sanitizer build: the image builds without sanitizers")
    assert "libjansson.so.4" in needed   # the check reads real data
    for so in needed:
        pkgs = package_of(so)
        assert pkgs & (runtime | BASE_PACKAGES), f"{so} ({pkgs}) is not installed by the runtime stage"
    loaded = dlopened()
    assert {"libssl.so.3", "libfyaml.so.0", "libpcre2-8.so.0", "libz.so.1", "libcrypt.so.1"} <= loaded.keys()
    data = binary.read_bytes()
    in_binary = [so for so in loaded if so.encode() + b"\0" in data]
    assert "libfyaml.so.0" in in_binary
    for so in in_binary:
        pkg = loaded[so]
        assert pkg in runtime, f"{so} is loaded at run time; its package {pkg} is not in the runtime stage"
        assert pkg in package_of(so), f"{so} is not shipped by {pkg}"


def test_dockerfile_build_packages_cover_the_build():
    """The build stage installs the -dev package of every pkg-config module CMakeLists.txt requires
    and of the headers of the libraries loaded at run time."""
    build = set(dockerfile_stages()[0][1])
    cmake = (ROOT / "CMakeLists.txt").read_text()
    modules = re.findall(r"pkg_check_modules\(\w+ REQUIRED IMPORTED_TARGET ([\w.+-]+)\)", cmake)
    assert "jansson" in modules
    for mod in modules:
        p = subprocess.run(["pkg-config", "--variable=pcfiledir", mod], capture_output=True, text=True)
        assert p.returncode == 0, mod
        pc = pathlib.Path(p.stdout.strip()) / f"{mod}.pc"
        pkgs = package_of(pc.name) if not pc.exists() else _owner(pc)
        assert pkgs & build, f"pkg-config module {mod} ({pkgs}) is not installed by the build stage"
    for header in ("zlib.h", "crypt.h"):
        assert package_of(header) & build, header
    assert "protobuf-c-compiler" in build


def _owner(path):
    p = subprocess.run(["dpkg-query", "-S", str(path.resolve())], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return {line.split(":")[0].strip() for line in p.stdout.splitlines()}


def test_build_image_script(tmp_path):
    """scripts/build-image.sh builds deploy/Dockerfile with podman (or buildah), tagged
    gpuplane:<version> plus the tags given, and says what to install when neither is there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "sed", "dirname"):
        (bin_dir / tool).symlink_to(subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                                                   text=True, check=True).stdout.strip())
    script = str(ROOT / "scripts" / "build-image.sh")
    env = {"PATH": str(bin_dir)}
    p = subprocess.run([script], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "apt-get install podman" in p.stderr
    for tool, verb in (("buildah", "bud"), ("podman", "build")):
        (bin_dir / tool).write_text('#!/bin/sh\necho "$0 $*" >"$(dirname "$0")/called"\n')
        (bin_dir / tool).chmod(0o755)
        p = subprocess.run([script, "registry.example.com/gpu/gpuplane:1"], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        called = (bin_dir / "called").read_text().split()
        assert pathlib.Path(called[0]).name == tool and called[1] == verb
        assert called[2:] == ["-f", "deploy/Dockerfile", "-t", f"gpuplane:{cmake_version()}",
                              "-t", "registry.example.com/gpu/gpuplane:1", "."]


# -- RBAC: the operator holds what it grants and what it applies --------------------------------

# kind -> (API group, resource) of what the operator renders
RESOURCES = {
    "ServiceAccount": ("", "serviceaccounts"), "ConfigMap": ("", "configmaps"), "Service": ("", "services"),
    "Namespace": ("", "namespaces"), "DaemonSet": ("apps", "daemonsets"),
    "Role": ("rbac.authorization.k8s.io", "roles"), "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
    "RuntimeClass": ("node.k8s.io", "runtimeclasses"),
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "RuntimeClass"}


def allows(rules, group, resource, verb, name=None):
    for r in rules:
        if group not in r.get("apiGroups", []) and "*" not in r.get("apiGroups", []):
            continue
        if resource not in r.get("resources", []) and "*" not in r.get("resources", []):
            continue
        if verb not in r["verbs"] and "*" not in r["verbs"]:
            continue
        names = r.get("resourceNames")
        if names and name not in names:
            continue
        return True
    return False


def uncovered(holder, rules):
    """The (group, resource, verb) triples of rules that holder's rules do not allow."""
    out = []
    for r in rules:
        assert not r.get("nonResourceURLs"), r
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    names = r.get("resourceNames") or [None]
                    if not all(allows(holder, g, res, v, n) for n in names):
                        out.append((g, res, v))
    return out


def operator_rules(docs):
    kinds = by_kind(docs)
    return kinds["ClusterRole"][0]["rules"], kinds["Role"][0]["rules"]


def test_rbac_rule_checker():
    holder = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
              {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get"]},
              {"apiGroups": ["x"], "resources": ["leases"], "resourceNames": ["a"], "verbs": ["update"]}]
    assert uncovered(holder, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]) == []
    assert uncovered(holder, [{"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]}]) == []
    assert uncovered(holder, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]}]) == [("", "pods", "watch")]
    assert uncovered(holder, [{"apiGroups": ["x"], "resources": ["leases"], "verbs": ["update"]}])
    assert not uncovered(holder, [{"apiGroups": ["x"], "resources": ["leases"], "resourceNames": ["a"],
                                   "verbs": ["update"]}])


def operator_render(gp_binary, docs, tmp_path, name):
    """What `gpuplane operator render` makes of the chart's ClusterPolicy, in the environment the
    chart gives the operator."""
    cp = cluster_policy(docs)
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(dict(cp, metadata=dict(cp["metadata"], uid="0000-1111"))))
    _, c = operator_container(docs)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_IMAGE")}
    env.update({e["name"]: e["value"] for e in c["env"] if "value" in e})
    p = subprocess.run([str(gp_binary), "operator", "render", "-f", str(f), "-n", "gpu-operator", "-o", "json"],
                       capture_output=True, text=True, timeout=60, env=env)
    if p.returncode == 2 and "render" not in (p.stdout + p.stderr):
        pytest.skip("this build has no `gpuplane operator render`")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["kind"] == "List"
    return doc["items"]


RBAC_CASES = {
    "defaults": [],
    "everything": ["--set", "psa.enabled=true,draDriver.enabled=true,dcgmExporter.enablePodLabels=true,"
                   "dcgmExporter.enablePodUID=true,devicePlugin.config.name=plugin-configs,"
                   "devicePlugin.config.default=any,dcgmExporter.config.name=metrics"],
    "node-feature-files": ["-f", None],
}


@pytest.mark.parametrize("case", sorted(RBAC_CASES))
def test_operator_holds_what_it_grants_and_applies(renderer, tmp_path, case):
    """Every rule of every Role/ClusterRole `gpuplane operator render` makes from the chart's
    ClusterPolicy is held by the operator (the API server's escalation check), and the operator may
    get, create, update and delete every kind it applies (a ServiceAccount is never updated, the
    namespace only patched)."""
    binary = BUILD / "gpuplane"
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    args = list(RBAC_CASES[case])
    if None in args:
        args[args.index(None)] = str(values_file(tmp_path, "gfd:\n  env:\n  - {name: USE_NODE_FEATURE_API, "
                                                           "value: 'false'}\n"))
    docs = render_chart(renderer, *args)
    cluster, ns = operator_rules(docs)
    objects = operator_render(binary, docs, tmp_path, case)
    assert objects
    problems = []
    for o in objects:
        kind, meta = o["kind"], o["metadata"]
        if kind == "ClusterRole":
            problems += [(kind, meta["name"], t) for t in uncovered(cluster, o["rules"])]
        elif kind == "Role":
            assert meta["namespace"] == "gpu-operator"
            problems += [(kind, meta["name"], t) for t in uncovered(cluster + ns, o["rules"])]
        assert kind in RESOURCES, f"the operator renders a {kind}: add it to the chart's RBAC and RESOURCES"
        group, resource = RESOURCES[kind]
        holder = cluster if kind in CLUSTER_SCOPED else cluster + ns
        verbs = {"Namespace": ["get", "patch"], "ServiceAccount": ["get", "create", "delete"]}.get(
            kind, ["get", "create", "update", "delete"])
        for v in verbs:
            if not allows(holder, group, resource, v, meta["name"]):
                problems.append((kind, meta["name"], (group, resource, v)))
    assert problems == []


def test_operator_rbac_is_least_privilege(renderer):
    """No wildcard, no secrets, no escalate/bind/impersonate, nothing outside the operator's work."""
    cluster, ns = operator_rules(render_chart(renderer))
    for r in cluster + ns:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in r[field], r
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(r["verbs"]), r
        assert "secrets" not in r["resources"], r
    assert allows(cluster, "nvidia.com", "clusterpolicies", "watch")
    assert allows(cluster, "nvidia.com", "clusterpolicies/status", "update")
    assert not allows(cluster, "nvidia.com", "clusterpolicies", "update")
    assert allows(cluster, "", "nodes", "patch") and allows(cluster, "", "namespaces", "patch")
    assert not allows(cluster, "", "namespaces", "delete")
    assert allows(ns, "coordination.k8s.io", "leases", "update", "53822513.nvidia.com")
    assert not allows(ns, "coordination.k8s.io", "leases", "update", "other")
    assert allows(ns, "apps", "daemonsets", "watch") and not allows(cluster, "apps", "daemonsets", "create")


def test_chart_notes(renderer):
    notes = run_render(renderer, "--notes", "-n", "gpu-operator").stdout
    assert "kubectl get clusterpolicy cluster-policy" in notes
    assert f"ghcr.io/gpuplane/gpuplane:{cmake_version()}" in notes
    notes = run_render(renderer, "--notes", "--set", "clusterPolicy.deployCR=false").stdout
    assert "No ClusterPolicy was created" in notes


def example_cluster_policies():
    out = []
    for f in sorted((ROOT / "examples").rglob("*.yaml")):
        try:
            docs = list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError:
            continue
        out += [(f.relative_to(ROOT), i, d) for i, d in enumerate(docs)
                if isinstance(d, dict) and d.get("kind") == "ClusterPolicy"]
    return out


def test_example_cluster_policies_against_the_crd():
    """Every ClusterPolicy under examples/ is one the API server accepts with this CRD."""
    examples = example_cluster_policies()
    if not examples:
        pytest.skip("no ClusterPolicy under examples/")
    for path, i, doc in examples:
        assert doc["apiVersion"] == "nvidia.com/v1", path
        assert object_errors(doc) == [], (str(path), i, object_errors(doc)[:5])
