# SPDX-License-Identifier: Apache-2.0
"""`gpuplane operator` end to end against fakekube (the chart's ClusterPolicy CRD, Nodes, the
DaemonSet emulator, owner-reference GC, Leases): a fresh install reaching ready in state order, node
labels and an admin's opt-outs, a state that never becomes available, spec changes rolling exactly
one DaemonSet, an idle operator writing nothing, ClusterPolicy deletion cleaning up, a second
ClusterPolicy ignored, a malformed one reported, API server restarts and 410s, leader election, the
metrics (promtool) and probes.

Intervals are short through the operator's own flags (operator_harness.FAST): --requeue-after=1s
and a 50 ms → 500 ms back-off. The idle window here is 10 s; the issue's 60 s is measured by
bench/operator.
"""
import signal
import time

import pytest

import operator_harness as oh
from fakekube import NEVER
from prometheus import promtool_check_metrics

IDLE_WINDOW = 10.0


@pytest.fixture
def cluster(fakekube):
    oh.install(fakekube)
    return fakekube


@pytest.fixture
def operators(gp, cluster, tmp_path):
    """A factory of operator processes, all stopped at teardown (by PID)."""
    started = []

    def start(*args, **kw):
        op = oh.Operator(gp, cluster, tmp_path, *args, name=f"operator-{len(started)}", **kw)
        started.append(op)
        return op
    yield start
    for op in started:
        killed = not op.alive()
        rc = op.stop()
        log = op.log()
        assert "Sanitizer" not in log and "runtime error" not in log, log
        assert killed or rc == 0, f"operator exited {rc}:\n{log}"


def test_fresh_install_reaches_ready_in_order_then_idles(cluster, operators):
    fk = cluster
    op = operators()
    assert op.get("/healthz")[0] == 200
    fk.create(oh.cluster_policy())
    st = oh.wait_state(fk, "ready", reason="Reconciled", timeout=40)
    fk.wait_for(lambda: oh.daemonsets_ready(fk), what="DaemonSets available")
    st = oh.wait_state(fk, "ready", reason="Reconciled")
    assert st["namespace"] == oh.NAMESPACE
    assert oh.condition(st, "Error")["status"] == "False"
    assert oh.condition(st, "Ready")["status"] == "True"

    # the states' objects were created in state order (DaemonSets in particular)
    made = oh.creations(fk)
    ds_order = [name for res, ns, name in made if res == "daemonsets"]
    assert ds_order == oh.DAEMONSETS
    assert ("runtimeclasses", "", "nvidia") in made
    assert ("services", oh.NAMESPACE, "gpu-operator") in made
    first = {name: i for i, (res, ns, name) in enumerate(made)}
    assert first["nvidia"] < first["gpu-operator"] < first["nvidia-driver-daemonset"]
    # nothing of the disabled DRA driver
    assert fk.get("daemonsets", "nvidia-dra-driver-gpu-kubelet-plugin", oh.NAMESPACE) is None

    # every object is the ClusterPolicy's, with its hash
    cp = fk.get("clusterpolicies", "cluster-policy")
    for name in oh.DAEMONSETS:
        ds = fk.get("daemonsets", name, oh.NAMESPACE)
        refs = ds["metadata"]["ownerReferences"]
        assert refs[0]["uid"] == cp["metadata"]["uid"] and refs[0]["controller"] is True
        assert ds["metadata"]["annotations"]["nvidia.com/last-applied-hash"]
        assert ds["status"]["desiredNumberScheduled"] == 2  # the GPU nodes only

    # labels on the GPU nodes, none on the CPU node
    for n in ("gpu-1", "gpu-2"):
        labels = oh.node_labels(fk, n)
        assert labels["nvidia.com/gpu.present"] == "true"
        for key in oh.DEPLOY_LABELS:
            assert labels[key] == "true"
        assert "nvidia.com/gpu.deploy.dra-driver" not in labels
    assert oh.node_labels(fk, "cpu-1") == {}

    # Events: the ClusterPolicy became ready
    reasons = [e["reason"] for e in fk.events_for("ClusterPolicy", "cluster-policy")]
    assert "Reconciled" in reasons

    # probes and metrics
    assert op.get("/readyz") == (200, "ok")
    text = op.metrics()
    # NVIDIA's gauge gpu_operator_gpu_nodes_total keeps its name (alerts key on it)
    assert promtool_check_metrics(text) == [
        'gpu_operator_gpu_nodes_total non-counter metrics should not have "_total" suffix']
    assert op.metric("gpu_operator_reconciliation_status") == 1
    assert op.metric("gpu_operator_gpu_nodes_total") == 2
    assert op.metric("gpuplane_operator_state_ready", 'state="state-device-plugin"') == 1
    assert op.metric("gpuplane_operator_state_ready", 'state="state-dra-driver"') == -1
    assert op.metric("gpuplane_operator_leader") == 1

    # idle: no write at all over the window (a SIGHUP changes nothing)
    since = time.time()
    op.proc.send_signal(signal.SIGHUP)
    time.sleep(IDLE_WINDOW)
    assert fk.writes(since=since) == []
    assert op.alive()


def test_a_state_never_available_keeps_the_policy_not_ready(cluster, operators):
    fk = cluster
    fk.daemonset_available("nvidia-device-plugin-daemonset", after=NEVER)
    op = operators()
    fk.create(oh.cluster_policy())
    st = oh.wait_state(fk, "notReady", reason="OperandNotReady", timeout=40)

    def names_plugin():
        st = oh.status(fk)
        msg = (oh.condition(st, "Error") or {}).get("message", "")
        return st.get("state") == "notReady" and "state-device-plugin: 0 of 2 pods available" in msg \
            and msg
    msg = fk.wait_for(names_plugin, timeout=20, what="the message naming the plugin")
    assert "states not ready: [state-device-plugin]" in msg
    assert oh.condition(oh.status(fk), "Ready")["status"] == "False"
    assert op.metric("gpu_operator_reconciliation_status") == 0
    assert op.metric("gpuplane_operator_state_ready", 'state="state-device-plugin"') == 0
    # requeued every second, but an unchanged status is not written again
    since = time.time()
    passes = op.metric("gpu_operator_reconciliation_total")
    time.sleep(3)
    assert op.metric("gpu_operator_reconciliation_total") >= passes + 2
    assert fk.writes(since=since, resource="clusterpolicies.nvidia.com") == []
    # the pods come: ready
    fk.daemonset_available("nvidia-device-plugin-daemonset", after=0)
    oh.wait_state(fk, "ready", reason="Reconciled", timeout=20)
    events = [e["reason"] for e in fk.events_for("ClusterPolicy", "cluster-policy")]
    assert "OperandNotReady" in events and "Reconciled" in events
    assert "StateReady" in events


def test_new_gpu_node_labelled_and_admin_labels_kept(cluster, operators):
    fk = cluster
    operators()
    fk.create(oh.cluster_policy())
    oh.wait_state(fk, "ready", timeout=40)
    fk.add_node("gpu-3", labels=dict(oh.GPU_LABELS, **{
        "nvidia.com/gpu.deploy.driver": "false",
        "nvidia.com/gpu.deploy.container-toolkit": "pre-installed",
        "nvidia.com/gpu.deploy.device-plugin": "",
        "team": "ml"}))

    def labelled():
        labels = oh.node_labels(fk, "gpu-3")
        return labels.get("nvidia.com/gpu.present") == "true" and labels
    labels = fk.wait_for(labelled, what="gpu-3 labelled")
    assert labels["nvidia.com/gpu.deploy.driver"] == "false"
    assert labels["nvidia.com/gpu.deploy.container-toolkit"] == "pre-installed"
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"  # empty counts as absent
    assert labels["nvidia.com/gpu.deploy.gpu-feature-discovery"] == "true"
    node = fk.get("nodes", "gpu-3")
    assert node["metadata"]["labels"]["team"] == "ml"
    owned = node["metadata"]["annotations"][oh.OWNED_ANNOTATION].split(",")
    assert "nvidia.com/gpu.deploy.driver" not in owned
    assert "nvidia.com/gpu.deploy.device-plugin" in owned
    # only merge patches of nodes, never a full update
    assert not fk.writes(resource="nodes", verb="update")
    # the plugin runs there, the driver does not
    fk.wait_for(lambda: (fk.daemonset_status("nvidia-device-plugin-daemonset", oh.NAMESPACE) or {})
                .get("desiredNumberScheduled") == 3, what="the plugin on gpu-3")
    assert fk.daemonset_status("nvidia-driver-daemonset", oh.NAMESPACE)["desiredNumberScheduled"] == 2
    # opting out takes every deploy label away; the GPU leaving sets present=false
    fk.label_node("gpu-3", {"nvidia.com/gpu.deploy.operands": "false"})
    fk.wait_for(lambda: not any(k for k in oh.node_labels(fk, "gpu-3", "nvidia.com/gpu.deploy.")
                                if k != "nvidia.com/gpu.deploy.operands"), what="opt-out")
    fk.label_node("gpu-2", {"feature.node.kubernetes.io/pci-10de.present": None})
    fk.wait_for(lambda: oh.node_labels(fk, "gpu-2") == {"nvidia.com/gpu.present": "false"},
                what="gpu-2 without its GPU")


def test_spec_change_rolls_exactly_the_changed_daemonset(cluster, operators):
    fk = cluster
    operators()
    fk.create(oh.cluster_policy())
    oh.wait_state(fk, "ready", timeout=40)
    fk.wait_for(lambda: oh.daemonsets_ready(fk), what="DaemonSets available")
    oh.wait_state(fk, "ready", reason="Reconciled")
    before = {n: fk.get("daemonsets", n, oh.NAMESPACE)["metadata"]["generation"] for n in oh.DAEMONSETS}
    since = time.time()
    fk.patch("clusterpolicies", "cluster-policy",
             {"spec": {"devicePlugin": {"env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}]}}})
    fk.wait_for(lambda: fk.get("daemonsets", "nvidia-device-plugin-daemonset", oh.NAMESPACE)
                ["metadata"]["generation"] == before["nvidia-device-plugin-daemonset"] + 1,
                timeout=20, what="the plugin rolled")
    updated = fk.wait_for(lambda: [w["name"] for w in fk.writes(since=since, verb="update",
                                                                resource="daemonsets")],
                          what="the update logged")
    fk.wait_for(lambda: oh.daemonsets_ready(fk), what="DaemonSets available")
    oh.wait_state(fk, "ready", reason="Reconciled", timeout=20)
    assert updated == ["nvidia-device-plugin-daemonset"]
    assert [w["name"] for w in fk.writes(since=since, verb="update", resource="daemonsets")] == updated
    assert not fk.writes(since=since, verb="create")
    for n in oh.DAEMONSETS:
        if n != "nvidia-device-plugin-daemonset":
            assert fk.get("daemonsets", n, oh.NAMESPACE)["metadata"]["generation"] == before[n]
    env = fk.get("daemonsets", "nvidia-device-plugin-daemonset", oh.NAMESPACE)["spec"]["template"][
        "spec"]["containers"][0].get("env", [])
    assert {"name": "FAIL_ON_INIT_ERROR", "value": "false"} in env
    # disabling a component deletes its objects
    fk.patch("clusterpolicies", "cluster-policy", {"spec": {"gfd": {"enabled": False}}})
    fk.wait_for(lambda: fk.get("daemonsets", "gpu-feature-discovery", oh.NAMESPACE) is None,
                timeout=20, what="GFD deleted")
    assert fk.get("serviceaccounts", "nvidia-gpu-feature-discovery", oh.NAMESPACE) is None
    oh.wait_state(fk, "ready", reason="Reconciled", timeout=20)
    # RBAC that only some settings need comes and goes with them
    fk.patch("clusterpolicies", "cluster-policy", {"spec": {"dcgmExporter": {"enablePodLabels": True}}})
    fk.wait_for(lambda: fk.get("clusterroles", "nvidia-dcgm-exporter-read-pods"), timeout=20,
                what="the read-pods ClusterRole")
    fk.patch("clusterpolicies", "cluster-policy", {"spec": {"dcgmExporter": {"enablePodLabels": False}}})
    fk.wait_for(lambda: fk.get("clusterroles", "nvidia-dcgm-exporter-read-pods") is None and
                fk.get("clusterrolebindings", "nvidia-dcgm-exporter-read-pods") is None,
                timeout=20, what="the read-pods ClusterRole deleted")


def test_deleting_the_policy_cleans_up(cluster, operators):
    fk = cluster
    op = operators()
    fk.create(oh.cluster_policy())
    oh.wait_state(fk, "ready", timeout=40)
    fk.label_node("gpu-1", {"nvidia.com/gpu.deploy.dcgm": "true", "team": "ml"})
    fk.wait_for(lambda: oh.daemonsets_ready(fk), what="DaemonSets available")
    oh.wait_state(fk, "ready", reason="Reconciled")
    since = time.time()
    fk.delete("clusterpolicies", "cluster-policy")
    # the garbage collector takes the objects
    fk.wait_for(lambda: not fk.objects("daemonsets", oh.NAMESPACE), timeout=20, what="DaemonSets gone")
    fk.wait_for(lambda: fk.get("runtimeclasses", "nvidia") is None, what="RuntimeClass gone")
    # the operator takes its labels back, and only those
    for n in ("gpu-1", "gpu-2"):
        fk.wait_for(lambda: not oh.node_labels(fk, n, "nvidia.com/gpu.present"), timeout=20,
                    what=f"{n} cleaned")
        node = fk.get("nodes", n)
        assert oh.OWNED_ANNOTATION not in node["metadata"].get("annotations", {})
    labels = fk.get("nodes", "gpu-1")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.dcgm"] == "true" and labels["team"] == "ml"
    assert not [k for k in labels if k.startswith("nvidia.com/gpu.deploy.") and k != "nvidia.com/gpu.deploy.dcgm"]
    # Nothing is re-created: only label patches (a pass still in flight when the policy went may
    # write its status and Events about it).
    writes = [w for w in fk.writes(since=since)
              if "/clusterpolicies/" not in w["path"] and not w["path"].endswith("/events")]
    assert {w["verb"] for w in writes} <= {"patch"}, [(w["verb"], w["path"]) for w in writes]
    fk.wait_for(lambda: op.metric("gpu_operator_reconciliation_status") == -1,
                what="no ClusterPolicy in the metrics")


def test_second_policy_is_ignored(cluster, operators):
    fk = cluster
    operators()
    fk.create(oh.cluster_policy())
    oh.wait_state(fk, "ready", timeout=40)
    time.sleep(1.1)  # creationTimestamp has second resolution: make the second one younger
    fk.create(oh.cluster_policy("second"))
    st = oh.wait_state(fk, "ignored", name="second")
    assert "cluster-policy" in oh.condition(st, "Ready")["message"]
    assert oh.status(fk)["state"] == "ready"
    fk.wait_for(lambda: [e["reason"] for e in fk.events_for("ClusterPolicy", "second")] == ["Ignored"],
                what="an Ignored event")
    # the first goes: the second takes over
    fk.delete("clusterpolicies", "cluster-policy")
    oh.wait_state(fk, "ready", name="second", timeout=30)


def test_malformed_policy_is_reported_not_crashed_on(cluster, operators):
    fk = cluster
    op = operators()
    bad = oh.cluster_policy()
    bad["spec"]["devicePlugin"]["imagePullSecrets"] = ["Not_A/Secret"]  # the CRD's schema allows it
    fk.create(bad)
    st = oh.wait_state(fk, "notReady", reason="ReconcileFailed", timeout=30)
    msg = oh.condition(st, "Error")["message"]
    assert "spec.devicePlugin.imagePullSecrets[0]" in msg
    events = fk.wait_for(lambda: fk.events_for("ClusterPolicy", "cluster-policy"), what="an event")
    assert [e["reason"] for e in events] == ["ReconcileFailed"]
    assert events[0]["type"] == "Warning"
    # no storm: no more passes until the policy changes
    passes = op.metric("gpu_operator_reconciliation_failed_total")
    time.sleep(2)
    assert op.metric("gpu_operator_reconciliation_failed_total") == passes
    assert op.alive()
    # fixed: ready
    fk.patch("clusterpolicies", "cluster-policy", {"spec": {"devicePlugin": {"imagePullSecrets": None}}})
    oh.wait_state(fk, "ready", timeout=40)


def test_api_server_restart_and_expired_watches(cluster, operators):
    fk = cluster
    op = operators()
    fk.create(oh.cluster_policy())
    oh.wait_state(fk, "ready", timeout=40)
    fk.restart(down=0.5)
    fk.add_node("gpu-3", labels=dict(oh.GPU_LABELS))
    fk.wait_for(lambda: oh.node_labels(fk, "gpu-3").get("nvidia.com/gpu.present") == "true",
                timeout=40, what="gpu-3 labelled after the restart")
    fk.expire_watches()
    fk.add_node("gpu-4", labels=dict(oh.GPU_LABELS))
    fk.wait_for(lambda: oh.node_labels(fk, "gpu-4").get("nvidia.com/gpu.present") == "true",
                timeout=40, what="gpu-4 labelled after 410")
    fk.wait_for(lambda: (fk.daemonset_status("nvidia-driver-daemonset", oh.NAMESPACE) or {})
                .get("desiredNumberScheduled") == 4, timeout=20, what="the driver on 4 nodes")
    oh.wait_state(fk, "ready", reason="Reconciled", timeout=30)
    assert op.metric("gpu_operator_gpu_nodes_total") == 4
    # a node deleted while the watch is down is found missing by the next list
    fk.inject(method="GET", path="/api/v1/nodes", status=500, count=2)
    fk.expire_watches()
    fk.remove("nodes", "gpu-2")
    fk.wait_for(lambda: op.metric("gpu_operator_gpu_nodes_total") == 3, timeout=20,
                what="gpu-2 forgotten")
    assert op.alive()


def lease(fk):
    return fk.get("leases", "53822513.nvidia.com", oh.NAMESPACE)


LEASE_FLAGS = ["--leader-elect", "--leader-lease-duration=3s", "--leader-lease-renew-deadline=2s",
               "--leader-lease-retry-period=250ms"]


def test_leader_election(cluster, operators):
    fk = cluster
    a = operators(*LEASE_FLAGS)
    fk.wait_for(lambda: (lease(fk) or {}).get("spec", {}).get("holderIdentity"), what="a leader")
    b = operators(*LEASE_FLAGS)
    fk.create(oh.cluster_policy())
    oh.wait_state(fk, "ready", timeout=40)
    spec = lease(fk)["spec"]
    assert spec["leaseDurationSeconds"] == 3
    assert spec["holderIdentity"].split("_")[0]  # hostname_uuid
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]
    leader, follower = (a, b) if a.metric("gpuplane_operator_leader") == 1 else (b, a)
    assert follower.metric("gpuplane_operator_leader") == 0
    fk.wait_for(lambda: leader.get("/readyz")[0] == 200 and follower.get("/readyz")[0] == 200,
                what="both ready")
    assert follower.metric("gpu_operator_reconciliation_total") == 0  # only the leader reconciles
    holder = spec["holderIdentity"]
    transitions = spec.get("leaseTransitions", 0)
    # the leader dies without a word: the follower takes over once the lease expires
    leader.proc.send_signal(signal.SIGKILL)
    leader.proc.wait()
    killed = time.monotonic()
    fk.wait_for(lambda: lease(fk)["spec"]["holderIdentity"] not in (holder, ""), timeout=10,
                what="a new leader")
    assert time.monotonic() - killed < 3 + 1.5  # the lease duration, and one retry period
    assert lease(fk)["spec"]["leaseTransitions"] == transitions + 1
    fk.wait_for(lambda: follower.metric("gpuplane_operator_leader") == 1, what="follower leads")
    # and reconciles: a new GPU node gets labels
    fk.add_node("gpu-3", labels=dict(oh.GPU_LABELS))
    fk.wait_for(lambda: oh.node_labels(fk, "gpu-3").get("nvidia.com/gpu.present") == "true",
                what="gpu-3 labelled by the new leader")
    # the leader loses the API server: it stops, as controller-runtime's manager does
    fk.inject(path=r"/apis/coordination\.k8s\.io/.*", hang=True, count=None)
    assert follower.wait_exit(timeout=10) == 1
    assert "leader election lost" in follower.log()


def test_sigterm_releases_the_lease(cluster, operators):
    fk = cluster
    a = operators(*LEASE_FLAGS)
    fk.wait_for(lambda: a.metric("gpuplane_operator_leader") == 1, what="a leads")
    b = operators(*LEASE_FLAGS)
    fk.wait_for(lambda: b.get("/readyz")[0] == 200, what="b ready")
    assert a.stop() == 0
    assert lease(fk)["spec"]["holderIdentity"] in ("", None) or \
        lease(fk)["spec"]["leaseDurationSeconds"] == 1
    t = time.monotonic()
    fk.wait_for(lambda: b.metric("gpuplane_operator_leader") == 1, timeout=5, what="b leads")
    assert time.monotonic() - t < 2  # no lease expiry to wait for


def test_usage(gp):
    p = gp.run("operator", "--help")
    assert p.returncode == 0 and "--leader-elect" in p.stdout
    p = gp.run("operator", "--no-such-flag")
    assert p.returncode == 2 and "unknown option" in p.stderr
    p = gp.run("operator", "--leader-lease-renew-deadline=soon")
    assert p.returncode == 2 and "want a duration" in p.stderr
    p = gp.run("operator", "--kubeconfig=/nonexistent/kubeconfig", env={"OPERATOR_NAMESPACE": "x"})
    assert p.returncode == 1 and "/nonexistent/kubeconfig" in p.stderr
