# SPDX-License-Identifier: Apache-2.0
"""`gpuplane exporter -k` with --kubernetes-enable-pod-labels and --kubernetes-enable-pod-uid: the
pods come from the pod-resources emulator, their objects from fakekube (the exporter's kubeconfig
points at it). The pod's labels and UID appear on its GPU's series, renamed and filtered as
dcgm-exporter does, minus the names that would make the page invalid; a change of the pod object
shows at the next collection, a deleted object takes them away; the allowlist filters (a bad
pattern skipped with a warning); without an API server, or with one that does not answer, the series
stay, without those labels, and the exporter says why; promtool parses every page; PCRE2 and
OpenSSL are mapped only when the options need them."""
import pathlib
import re
import tempfile

import pytest

import prometheus as prom
from test_exporter import Exporter, wait_until

T = 20.0
NODE = "gpu-node-1"  # Exporter's NODE_NAME


@pytest.fixture
def kubelet():
    import podresources_emu as pre
    sock_dir = pathlib.Path(tempfile.mkdtemp(prefix="pr-"))
    emu = pre.PodResourcesEmulator(sock_dir / "kubelet.sock").start()
    try:
        yield emu
    finally:
        emu.stop()
        sock_dir.rmdir()


@pytest.fixture
def exporters(gp, tmp_path, monkeypatch):
    """Starts exporters with no API server configuration but what the test passes (KUBECONFIG);
    stops every one at the end, by its process, and checks that each exits cleanly."""
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    started = []
    yield lambda *a, **kw: started.append(Exporter(gp, tmp_path, *a, **kw)) or started[-1]
    codes = []
    for e in started:
        try:
            codes.append(e.stop())  # SIGTERM: a clean exit (the sanitizers check it)
        finally:
            if e.proc.poll() is None:
                e.proc.kill()
                e.proc.wait()
    for e, code in zip(started, codes):
        assert code == 0, e.log()
        assert "runtime error" not in e.log() and "Sanitizer" not in e.log(), e.log()


def pod_object(ns, name, labels, node=NODE):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "cuda"}]}}


def sample_lines(text, metric):
    return [l for l in text.splitlines() if l.startswith(metric + "{")]


def parse_labels(line):
    """The label pairs of one sample line, in order."""
    inside = line[line.index("{") + 1:line.rindex("}")]
    return re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', inside)


def gpu_series(e, gpu="0", metric="DCGM_FI_DEV_GPU_UTIL"):
    """The labels (ordered pairs) of the GPU's series in a fresh scrape, or None."""
    for line in sample_lines(e.scrape()[1], metric):
        pairs = parse_labels(line)
        if ("gpu", gpu) in pairs and not any(k == "GPU_I_ID" for k, _ in pairs):
            return pairs
    return None


def check_page(text):
    """Every sample has distinct label names, and promtool parses the page with no complaint beyond
    dcgm-exporter's own names."""
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names = [k for k, _ in parse_labels(line)]
            assert len(names) == len(set(names)), line
    if prom.available() is None:
        problems = prom.promtool_check_metrics(text)
        assert prom.unexpected_complaints(problems) == [], problems


def start(exporters, kubelet, *args, env=None):
    return exporters("--mock", "dgx-h100", "-c", "200", "-k",
                     "--pod-resources-kubelet-socket", kubelet.socket, *args, env=env)


def uuid_of(gp, index):
    return gp.json("info", "--mock", "dgx-h100", "--json")["gpus"][index]["uuid"]


def test_pod_labels_and_uid_follow_the_pod_object(gp, fakekube, kubelet, exporters):
    labels = {"app.kubernetes.io/name": "trainer", "team": "vision",
              # names the exporter writes itself, and two keys with one name: left out
              "gpu": "7", "hostname": "elsewhere", "pod": "x", "a.b": "1", "a_b": "2"}
    obj = fakekube.put(pod_object("ml", "trainer-0", labels))
    fakekube.put(pod_object("ml", "elsewhere-0", {"team": "other"}, node="gpu-node-2"))
    kubelet.set_pod("ml", "trainer-0", {"main": {"devices": {"nvidia.com/gpu": [uuid_of(gp, 0)]}}})
    e = start(exporters, kubelet, "--kubernetes-enable-pod-labels", "--kubernetes-enable-pod-uid",
              env={"KUBECONFIG": str(fakekube.kubeconfig)})

    pairs = wait_until(lambda: (p := gpu_series(e)) and ("team", "vision") in p and p, T,
                       "the pod's labels on GPU 0")
    d = dict(pairs)
    assert d["app_kubernetes_io_name"] == "trainer"
    assert d["pod_uid"] == obj["metadata"]["uid"]
    assert d["pod"] == "trainer-0" and d["gpu"] == "0" and d["hostname"] == NODE
    assert "a_b" not in d
    names = [k for k, _ in pairs]
    # the Labels (label fields and pod labels) sorted together, before the attributes
    labels_part = names[names.index("hostname") + 1:names.index("container")]
    assert labels_part == sorted(labels_part) == ["DCGM_FI_DRIVER_VERSION", "app_kubernetes_io_name",
                                                  "team"]
    assert names[names.index("container"):] == ["container", "namespace", "pod", "pod_uid"]
    # the other GPUs have no pod, so no pod labels
    assert "team" not in dict(gpu_series(e, "1"))
    check_page(e.scrape()[1])
    # only the node's pods are watched
    lists = fakekube.requests("GET", r"^/api/v1/pods$")
    assert lists and all(r["query"].get("fieldSelector") == [f"spec.nodeName={NODE}"] for r in lists)
    assert '"watching pods for their metadata"' in e.log()

    # the object changes: the next collection has the new labels
    fakekube.put(pod_object("ml", "trainer-0", {"team": "nlp", "stage": "eval"}))
    d = dict(wait_until(lambda: (p := gpu_series(e)) and ("team", "nlp") in p and p, T,
                        "the changed labels"))
    assert d["stage"] == "eval" and "app_kubernetes_io_name" not in d
    assert d["pod_uid"] == obj["metadata"]["uid"]
    check_page(e.scrape()[1])

    # the object is deleted (the kubelet still reports the pod): pod labels and pod_uid go
    fakekube.remove("pods", "trainer-0", "ml")
    d = dict(wait_until(lambda: (p := gpu_series(e)) and ("team", "nlp") not in p and p, T,
                        "the labels to go"))
    assert d["pod"] == "trainer-0" and "stage" not in d and "pod_uid" not in d
    assert e.proc.poll() is None


def test_allowlist_and_flags_off(gp, fakekube, kubelet, exporters):
    """The allowlist from the variable as dcgm-exporter splits it: "^team$" keeps team, "(" is
    skipped with a warning; without --kubernetes-enable-pod-uid there is no pod_uid."""
    fakekube.put(pod_object("ml", "p0", {"team": "a", "teams": "b", "app": "c"}))
    kubelet.set_pod("ml", "p0", {"main": {"devices": {"nvidia.com/gpu": [uuid_of(gp, 2)]}}})
    e = start(exporters, kubelet, "--kubernetes-enable-pod-labels",
              env={"KUBECONFIG": str(fakekube.kubeconfig),
                   "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX": "^team$, ("})
    d = dict(wait_until(lambda: (p := gpu_series(e, "2")) and ("team", "a") in p and p, T,
                        "team on GPU 2"))
    assert "teams" not in d and "app" not in d and "pod_uid" not in d
    log = e.log()
    assert '"pod label allowlist pattern skipped" pattern="("' in log, log
    assert '"pod labels filtered by the allowlist" patterns=1' in log, log

    # the flag replaces the variable; a pattern matches anywhere in the name
    e2 = start(exporters, kubelet, "--kubernetes-enable-pod-labels", "--kubernetes-enable-pod-uid",
               "--kubernetes-pod-label-allowlist-regex", "eam",
               env={"KUBECONFIG": str(fakekube.kubeconfig),
                    "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX": "^app$"})
    d = dict(wait_until(lambda: (p := gpu_series(e2, "2")) and dict(p).get("pod_uid") and p, T,
                        "pod_uid on GPU 2"))
    assert d["team"] == "a" and d["teams"] == "b" and "app" not in d


def test_whole_cluster_without_node_name(gp, fakekube, kubelet, exporters):
    fakekube.put(pod_object("ml", "p1", {"team": "a"}, node="another-node"))
    kubelet.set_pod("ml", "p1", {"main": {"devices": {"nvidia.com/gpu": [uuid_of(gp, 1)]}}})
    e = start(exporters, kubelet, "--kubernetes-enable-pod-labels",
              env={"KUBECONFIG": str(fakekube.kubeconfig), "NODE_NAME": ""})
    wait_until(lambda: (p := gpu_series(e, "1")) and ("team", "a") in p, T, "team on GPU 1")
    assert "NODE_NAME is not set: watching every pod of the cluster" in e.log()
    lists = fakekube.requests("GET", r"^/api/v1/pods$")
    assert lists and all("fieldSelector" not in r["query"] for r in lists)


def test_no_api_server_configuration(gp, kubelet, exporters):
    kubelet.set_pod("ml", "p0", {"main": {"devices": {"nvidia.com/gpu": [uuid_of(gp, 0)]}}})
    e = start(exporters, kubelet, "--kubernetes-enable-pod-labels", "--kubernetes-enable-pod-uid")
    d = dict(wait_until(lambda: (p := gpu_series(e)) and ("pod", "p0") in p and p, T, "p0 on GPU 0"))
    assert "pod_uid" not in d
    assert "pod labels and pod_uid will not be available" in e.log()
    assert len(sample_lines(e.scrape()[1], "DCGM_FI_DEV_GPU_UTIL")) == 8
    check_page(e.scrape()[1])
    assert e.proc.poll() is None


def test_api_server_that_does_not_answer(gp, fakekube, kubelet, exporters):
    """The first list hangs: after 10 s a warning, the series go on without pod labels; when the
    server answers, they come."""
    fakekube.put(pod_object("ml", "p0", {"team": "late"}))
    kubelet.set_pod("ml", "p0", {"main": {"devices": {"nvidia.com/gpu": [uuid_of(gp, 0)]}}})
    fakekube.inject("GET", r"/api/v1/pods", hang=True, count=1)
    e = start(exporters, kubelet, "--kubernetes-enable-pod-labels",
              env={"KUBECONFIG": str(fakekube.kubeconfig)})
    wait_until(lambda: "has not listed the pods yet" in e.log(), T, "the warning")
    d = dict(gpu_series(e))
    assert d["pod"] == "p0" and "team" not in d
    assert e.proc.poll() is None
    fakekube.release()
    wait_until(lambda: (p := gpu_series(e)) and ("team", "late") in p, T, "the labels at last")
    assert '"pods listed on the API server: pod metadata available" pods=1' in e.log()


def test_libraries_only_when_needed(gp, fakekube, kubelet, exporters):
    """OpenSSL with the API server (https), PCRE2 only with an allowlist; -k alone maps neither."""
    from test_daemon_maps import mapped_libraries, soname
    kubeconfig = {"KUBECONFIG": str(fakekube.kubeconfig)}

    def names(e):
        e.scrape()
        return {soname(p) for p in mapped_libraries(e.proc.pid)}
    plain = names(start(exporters, kubelet))
    assert not {"libssl.so.3", "libcrypto.so.3", "libpcre2-8.so.0"} & plain, plain
    e = start(exporters, kubelet, "--kubernetes-enable-pod-uid", env=kubeconfig)
    wait_until(lambda: fakekube.requests("GET", r"^/api/v1/pods$"), T, "the list")
    uid_only = names(e)
    assert "libssl.so.3" in uid_only and "libpcre2-8.so.0" not in uid_only, uid_only
    e = start(exporters, kubelet, "--kubernetes-enable-pod-labels",
              "--kubernetes-pod-label-allowlist-regex", "^team$", env=kubeconfig)
    assert "libpcre2-8.so.0" in names(e)
