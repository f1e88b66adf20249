# SPDX-License-Identifier: Apache-2.0
"""deploy/ on the test API server (fakekube.py), which validates like kube-apiserver: the objects of
deploy/gpuplane.yaml are all accepted, and the ClusterPolicy CRD serves, prunes, defaults and
validates ClusterPolicies as the real server would. The rendering itself is test_deploy_chart.py's."""
import pytest
import yaml

import fakekube as fakekube_module
from test_deploy_chart import CRD_FILE, DEPLOY_FILE

pytestmark = pytest.mark.skipif(not hasattr(fakekube_module.FakeKube, "apply_crd"),
                                reason="this fakekube.py serves no custom resources")


def test_deploy_yaml_on_the_api_server(fakekube):
    """deploy/gpuplane.yaml as `kubectl apply` sends it to an API server that validates like the
    real one (fakekube.py): every object is accepted, the CRD serves ClusterPolicies at once and the
    chart's ClusterPolicy is stored whole (nothing pruned; the CRD's defaults added)."""
    stored = fakekube.apply(DEPLOY_FILE)
    docs = [d for d in yaml.safe_load_all(DEPLOY_FILE.read_text()) if d]
    assert [(o["kind"], o["metadata"]["name"]) for o in stored] == \
        [(d["kind"], d["metadata"]["name"]) for d in docs]
    cp = fakekube.get("clusterpolicies", "cluster-policy")
    (want,) = [d for d in docs if d["kind"] == "ClusterPolicy"]
    assert missing_from(want["spec"], cp["spec"]) == []     # stored whole; the CRD's defaults added
    assert cp["spec"]["cdi"]["nriPluginEnabled"] is False
    assert cp["metadata"]["labels"] == want["metadata"]["labels"]


def missing_from(want, got, path="spec"):
    """The paths of want whose value got does not have (got may have more)."""
    if isinstance(want, dict) and isinstance(got, dict):
        return [p for k, v in want.items()
                for p in (missing_from(v, got[k], f"{path}.{k}") if k in got else [f"{path}.{k}"])]
    return [] if want == got else [path]


def test_cluster_policies_on_the_api_server(fakekube):
    """The CRD on the test API server: NVIDIA's fields it does not type are kept where NVIDIA's
    CRD keeps them, unknown fields of typed-only sections are pruned, defaults are applied, typed
    mistakes are refused with 422."""
    fakekube.apply_crd(CRD_FILE)
    cp = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"},
          "spec": {"operator": {"futureField": {"a": 1}},
                   "devicePlugin": {"enabled": True, "newNvidiaField": "x"},
                   "daemonsets": {"priorityClassName": "p"},
                   "psa": {"enabled": True, "notAField": 1}}}
    stored = fakekube.create(cp)
    s = stored["spec"]
    assert s["operator"]["futureField"] == {"a": 1}
    assert s["devicePlugin"]["newNvidiaField"] == "x"
    assert s["psa"] == {"enabled": True}
    assert s["daemonsets"]["updateStrategy"] == "RollingUpdate"    # the CRD's default
    assert s["operator"]["runtimeClass"] == "nvidia"
    for spec in ({"devicePlugin": {"imagePullPolicy": "Sometimes"}}, {"mig": {"strategy": "half"}},
                 {"draDriver": {"enabled": "yes"}}):
        with pytest.raises(fakekube_module.ApiError) as e:
            fakekube.create({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                             "metadata": {"name": "bad"}, "spec": spec})
        assert e.value.code == 422, spec
