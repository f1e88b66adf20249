# SPDX-License-Identifier: Apache-2.0
"""`gpuplane operator render` through the binary: the example ClusterPolicies render to a List whose
every object the official OpenAPI schemas accept (strictly: no unknown fields), in the states'
order, the same bytes on every run, with owner references when the policy has a uid; the image
fallbacks from the environment; the errors (file:line:col of a malformed field, exit 1; usage, exit
2). The examples are also checked against the ClusterPolicy CRD's schema when deploy/ has it."""
import json
import pathlib

import jsonschema
import pytest
import yaml

from openapi_schema import api_errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "operator"
CRD_FILE = ROOT / "deploy" / "helm" / "gpuplane" / "crds" / "nvidia.com_clusterpolicies.yaml"

# The states' objects in apply order (kind, name) for the default example.
DEFAULT_ORDER = [
    ("RuntimeClass", "nvidia"), ("RuntimeClass", "nvidia-cdi"), ("RuntimeClass", "nvidia-legacy"),
    ("Service", "gpu-operator"),
    ("ServiceAccount", "nvidia-driver"), ("ClusterRole", "nvidia-driver"),
    ("ClusterRoleBinding", "nvidia-driver"), ("ConfigMap", "nvidia-driver-startup-probe"),
    ("DaemonSet", "nvidia-driver-daemonset"),
    ("ServiceAccount", "nvidia-container-toolkit"),
    ("ConfigMap", "nvidia-container-toolkit-entrypoint"),
    ("DaemonSet", "nvidia-container-toolkit-daemonset"),
    ("ServiceAccount", "nvidia-operator-validator"), ("Role", "nvidia-operator-validator"),
    ("ClusterRole", "nvidia-operator-validator"), ("RoleBinding", "nvidia-operator-validator"),
    ("ClusterRoleBinding", "nvidia-operator-validator"), ("DaemonSet", "nvidia-operator-validator"),
    ("ServiceAccount", "nvidia-device-plugin"), ("DaemonSet", "nvidia-device-plugin-daemonset"),
    ("ServiceAccount", "nvidia-dcgm-exporter"), ("Service", "nvidia-dcgm-exporter"),
    ("DaemonSet", "nvidia-dcgm-exporter"),
    ("ServiceAccount", "nvidia-gpu-feature-discovery"), ("Role", "nvidia-gpu-feature-discovery"),
    ("RoleBinding", "nvidia-gpu-feature-discovery"), ("DaemonSet", "gpu-feature-discovery"),
]


def schema_errors(obj):
    return [f"{obj['kind']}/{obj['metadata']['name']}: {e}" for e in api_errors(obj)]


def render(gp, path, *args, env=None):
    p = gp.run("operator", "render", "-f", path, *args, env=env)
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.parametrize("example", ["clusterpolicy.yaml", "clusterpolicy-dra.yaml"])
def test_examples_validate_against_official_schemas(gp, example):
    p = render(gp, EXAMPLES / example)
    doc = yaml.safe_load(p.stdout)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    items = doc["items"]
    assert items
    errors = [e for obj in items for e in schema_errors(obj)]
    assert not errors, "\n".join(errors)
    for obj in items:
        meta = obj["metadata"]
        # the hash annotation on every object; no owner reference without a uid in the file
        assert meta["annotations"]["nvidia.com/last-applied-hash"].isdigit()
        assert "ownerReferences" not in meta
        if obj["kind"] in ("RuntimeClass", "ClusterRole", "ClusterRoleBinding", "Namespace"):
            assert "namespace" not in meta
        else:
            assert meta["namespace"] == "gpu-operator"
    # JSON and YAML say the same
    as_json = json.loads(render(gp, EXAMPLES / example, "-o", "json").stdout)
    assert as_json == doc


def test_default_example_order_and_daemonsets(gp):
    doc = yaml.safe_load(render(gp, EXAMPLES / "clusterpolicy.yaml").stdout)
    assert [(o["kind"], o["metadata"]["name"]) for o in doc["items"]] == DEFAULT_ORDER
    daemonsets = {o["metadata"]["name"]: o for o in doc["items"] if o["kind"] == "DaemonSet"}
    deploy = {
        "nvidia-driver-daemonset": "driver",
        "nvidia-container-toolkit-daemonset": "container-toolkit",
        "nvidia-operator-validator": "operator-validator",
        "nvidia-device-plugin-daemonset": "device-plugin",
        "nvidia-dcgm-exporter": "dcgm-exporter",
        "gpu-feature-discovery": "gpu-feature-discovery",
    }
    for name, ds in daemonsets.items():
        pod = ds["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {f"nvidia.com/gpu.deploy.{deploy[name]}": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
            pod["tolerations"]
        assert pod["priorityClassName"] == "system-node-critical"
        assert ds["spec"]["template"]["metadata"]["labels"]["app"] == name
        for k, v in ds["spec"]["selector"]["matchLabels"].items():
            assert ds["spec"]["template"]["metadata"]["labels"][k] == v
    images = {c["image"] for ds in daemonsets.values()
              for c in ds["spec"]["template"]["spec"]["containers"]}
    assert "nvcr.io/nvidia/driver:595.91.07" in images
    assert "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0" in images
    assert "ghcr.io/gpuplane/gpuplane:0.1.0" in images
    dp = daemonsets["nvidia-device-plugin-daemonset"]["spec"]["template"]["spec"]
    assert "affinity" not in dp
    env = {e["name"]: e.get("value") for e in dp["containers"][0]["env"]}
    assert env["MIG_STRATEGY"] == "single"
    assert daemonsets["nvidia-driver-daemonset"]["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert daemonsets["gpu-feature-discovery"]["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    driver = daemonsets["nvidia-driver-daemonset"]["spec"]["template"]["spec"]
    assert [c["name"] for c in driver["initContainers"]] == ["k8s-driver-manager"]


def test_dra_example(gp):
    doc = yaml.safe_load(render(gp, EXAMPLES / "clusterpolicy-dra.yaml").stdout)
    objs = {(o["kind"], o["metadata"]["name"]): o for o in doc["items"]}
    ns = objs[("Namespace", "gpu-operator")]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    dra = objs[("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]["spec"]["template"]["spec"]
    assert dra["nodeSelector"] == {"nvidia.com/gpu.deploy.dra-driver": "true"}
    gpus = dra["containers"][0]
    assert gpus["args"] == ["--healthcheck-port=-1"]
    assert {"name": "GPUPLANE_HEALTH_RECOVERY_WINDOW", "value": "120"} in gpus["env"]
    assert gpus["resources"]["limits"] == {"memory": "64Mi"}
    dp = objs[("DaemonSet", "nvidia-device-plugin-daemonset")]["spec"]["template"]["spec"]
    term = dp["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "nvidia.com/gpu.deploy.dra-driver", "operator": "NotIn", "values": ["true"]}]}]
    rules = objs[("ClusterRole", "nvidia-dra-driver-gpu-kubelet-plugin")]["rules"]
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
            "verbs": ["get", "list", "watch"]} in rules
    read_pods = objs[("ClusterRole", "nvidia-dcgm-exporter-read-pods")]
    # Pods for their labels, and the DRA driver's slices to map claims to GPUs.
    assert read_pods["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                                   "verbs": ["get", "list", "watch"]},
                                  {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                                   "verbs": ["get", "list", "watch"]}]
    exporter = objs[("DaemonSet", "nvidia-dcgm-exporter")]["spec"]["template"]["spec"]
    assert exporter["automountServiceAccountToken"] is True
    ctr = exporter["containers"][0]
    assert {"name": "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "value": "true"} in ctr["env"]
    assert {"name": "DCGM_EXPORTER_KUBERNETES_ENABLE_DRA", "value": "true"} in ctr["env"]
    assert ctr["livenessProbe"]["httpGet"] == {"port": 9400, "path": "/health"}


def test_deterministic(gp, tmp_path):
    """Two runs print the same bytes; the hash of an object does not depend on the run."""
    for example in ("clusterpolicy.yaml", "clusterpolicy-dra.yaml"):
        a = render(gp, EXAMPLES / example).stdout
        b = render(gp, EXAMPLES / example).stdout
        assert a == b
        c = render(gp, EXAMPLES / example, "-o", "json").stdout
        d = render(gp, EXAMPLES / example, "-o", "json").stdout
        assert c == d


def test_owner_references_and_namespace(gp, tmp_path):
    cp = yaml.safe_load((EXAMPLES / "clusterpolicy.yaml").read_text())
    cp["metadata"]["uid"] = "0b6c1f2e-6a3b-4c1d-9a58-2f7d1b0d9e11"
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(cp))
    doc = json.loads(render(gp, path, "-o", "json", "-n", "gpuplane").stdout)
    for obj in doc["items"]:
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy",
            "uid": "0b6c1f2e-6a3b-4c1d-9a58-2f7d1b0d9e11", "controller": True,
            "blockOwnerDeletion": True}]
        if "namespace" in obj["metadata"]:
            assert obj["metadata"]["namespace"] == "gpuplane"
        assert not schema_errors(obj)
    # RBAC subjects follow the namespace
    bindings = [o for o in doc["items"] if o["kind"].endswith("Binding")]
    assert bindings and all(s["namespace"] == "gpuplane" for b in bindings for s in b["subjects"])
    # OPERATOR_NAMESPACE is the default namespace, -n wins over it
    doc = json.loads(render(gp, path, "-o", "json", env={"OPERATOR_NAMESPACE": "from-env"}).stdout)
    assert {o["metadata"].get("namespace") for o in doc["items"]} == {None, "from-env"}
    doc = json.loads(render(gp, path, "-o", "json", "-n", "flag",
                            env={"OPERATOR_NAMESPACE": "from-env"}).stdout)
    assert {o["metadata"].get("namespace") for o in doc["items"]} == {None, "flag"}


def test_image_fallbacks(gp, tmp_path):
    path = tmp_path / "cp.yaml"
    path.write_text("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cp}\n"
                    "spec: {}\n")
    env = {"GPUPLANE_IMAGE": "registry.local/gpuplane:9", "DRIVER_IMAGE": "nvcr.io/nvidia/driver:1",
           "CONTAINER_TOOLKIT_IMAGE": "nvcr.io/nvidia/k8s/container-toolkit:2",
           "GFD_IMAGE": "registry.local/gfd:3"}
    doc = json.loads(render(gp, path, "-o", "json", "--os-tag", "ubuntu22.04", env=env).stdout)
    images = {o["metadata"]["name"]: [c["image"] for c in
                                      o["spec"]["template"]["spec"]["containers"]]
              for o in doc["items"] if o["kind"] == "DaemonSet"}
    assert images["nvidia-driver-daemonset"] == ["nvcr.io/nvidia/driver:1-ubuntu22.04"]
    assert images["nvidia-container-toolkit-daemonset"] == ["nvcr.io/nvidia/k8s/container-toolkit:2"]
    assert images["nvidia-device-plugin-daemonset"] == ["registry.local/gpuplane:9"]
    assert images["gpu-feature-discovery"] == ["registry.local/gfd:3"]
    # without the gpuplane image nothing names the validator's
    env.pop("GPUPLANE_IMAGE")
    p = gp.run("operator", "render", "-f", path, env=env)
    assert p.returncode == 1
    assert "spec.validator: no image" in p.stderr


def test_malformed_policy(gp, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: nvidia.com/v1\n"
                    "kind: ClusterPolicy\n"
                    "metadata:\n"
                    "  name: cluster-policy\n"
                    "spec:\n"
                    "  devicePlugin:\n"
                    "    env:\n"
                    "      - name: A\n"
                    "        value: 1\n")
    p = gp.run("operator", "render", "-f", path)
    assert p.returncode == 1
    assert f"{path}:9:16: spec.devicePlugin.env[0].value: expected a string, got integer" in p.stderr
    assert p.stdout == ""
    path.write_text("spec:\n  mig:\n    strategy: double\n")
    p = gp.run("operator", "render", "-f", path)
    assert p.returncode == 1
    assert f"{path}:3:15: spec.mig.strategy: invalid value \"double\"" in p.stderr
    path.write_text("spec: {driver: [}\n")
    p = gp.run("operator", "render", "-f", path)
    assert p.returncode == 1 and f"{path}:1:" in p.stderr
    p = gp.run("operator", "render", "-f", tmp_path / "missing.yaml")
    assert p.returncode == 1 and "missing.yaml" in p.stderr


def test_usage(gp):
    p = gp.run("operator", "render", "--help")
    assert p.returncode == 0 and "Usage: gpuplane operator render -f FILE" in p.stdout
    for args in (["operator", "render"], ["operator", "render", "-f"],
                 ["operator", "render", "-f", EXAMPLES / "clusterpolicy.yaml", "-o", "xml"],
                 ["operator", "render", "-f", EXAMPLES / "clusterpolicy.yaml", "extra"],
                 ["operator", "render", "--bogus"]):
        p = gp.run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stdout == ""
    p = gp.run("operator", "render", "-f", EXAMPLES / "clusterpolicy.yaml", "-n", "Not_A_Namespace")
    assert p.returncode == 1 and "Not_A_Namespace" in p.stderr


def _crd_schema():
    doc = next(d for d in yaml.safe_load_all(CRD_FILE.read_text()) if d)
    version = next(v for v in doc["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


@pytest.mark.skipif(not CRD_FILE.exists(), reason="deploy/ has no ClusterPolicy CRD")
@pytest.mark.parametrize("example", ["clusterpolicy.yaml", "clusterpolicy-dra.yaml"])
def test_examples_match_the_crd(example):
    """The examples are valid ClusterPolicies for the CRD gpuplane installs."""
    cp = yaml.safe_load((EXAMPLES / example).read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(_crd_schema()).iter_errors(cp)]
    assert not errors, "\n".join(errors)
