#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Benchmark of `gpuplane dra-driver`: NodePrepareResources / NodeUnprepareResources latency as the
kubelet sees it, and the driver's memory.

    bench/dra-driver/run.py                 # 300 rounds on the mock DGX H100, a table
    bench/dra-driver/run.py --rounds 50 --json -
    bench/dra-driver/run.py --quick         # a few seconds

Set-up: the fake API server (tests/integration/fakekube.py, HTTPS, in this process), the driver on
the mock NVML library with a fake driver root (mock-nvml/make-driver-root.sh), the DRA kubelet
emulator's plugin watcher (tools/kubelet-emulator/dra_emu.py) for the registration, one claim per
GPU allocated by `gpuplane allocate` against the slices the driver published and stored with
reservedFor. Then, over one gRPC channel on dra.sock, as the kubelet does:

  prepare      NodePrepareResources of one claim that is not prepared: GET of the claim from the API
               server, checkpoint "PrepareStarted" (written and fsync'ed), the claim's CDI spec
               (written and fsync'ed), checkpoint "PrepareCompleted" (fsync'ed)
  again        the same call for a claim already prepared (the answer from the checkpoint)
  unprepare    NodeUnprepareResources: CDI spec removed, checkpoint written (fsync'ed)
  prepare x8   one NodePrepareResources call with every GPU's claim

Each row gives p50, p99 and max over the rounds. The API server here is Python: its GET costs are
measured on their own (row `api GET`, the same HTTPS request from this process) so that the driver's
share can be read off. Peak RSS is the driver's VmHWM from /proc at the end.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tools" / "kubelet-emulator"))
sys.path.insert(0, str(ROOT / "bench"))

import grpc  # noqa: E402
import yaml  # noqa: E402

import dra_emu  # noqa: E402
from benchlib import describe, emit, machine, wait_until  # noqa: E402
from fakekube import FakeKube  # noqa: E402

DRIVER = "gpu.nvidia.com"
NODE = "bench-node"
CLASSES = ROOT / "examples" / "dra" / "deviceclasses.yaml"


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


class Node:
    """The driver on a mock node, the fake API server and the kubelet's plugin watcher."""

    def __init__(self, binary, profile, work, qps):
        self.binary, self.profile, self.work = binary, profile, work
        self.root = work / "root"
        subprocess.run([str(ROOT / "mock-nvml" / "make-driver-root.sh"),
                        str(ROOT / "examples" / "nodes" / f"{profile}.yaml"), str(self.root)],
                       check=True, capture_output=True)
        self.fk = FakeKube(work / "kube", bookmark_interval=5.0).start()
        self.reg_dir = work / "reg"
        self.plugins = work / "plugins"
        self.kubelet = dra_emu.DraKubelet(self.reg_dir)
        self.log = open(work / "driver.log", "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
        self.proc = subprocess.Popen(
            [str(binary), "dra-driver", f"--mock={profile}", f"--node-name={NODE}",
             f"--kubeconfig={self.fk.kubeconfig}", f"--kubelet-registrar-directory-path={self.reg_dir}",
             f"--kubelet-plugins-directory-path={self.plugins}", f"--cdi-root={work / 'cdi'}",
             f"--nvidia-driver-root={self.root}", f"--kube-api-qps={qps}",
             f"--kube-api-burst={max(10, int(qps * 2))}"],
            stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        self.kubelet.wait_registered(DRIVER, timeout=30)
        self.slices = wait_until(lambda: [s for s in self.fk.objects("resourceslices")
                                          if s["spec"]["nodeName"] == NODE], 30, "ResourceSlices")

    def claims(self, n):
        """n claims of one GPU each, allocated together by `gpuplane allocate` and stored with
        reservedFor, as kube-scheduler leaves them."""
        pending = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": f"bench-{i}", "namespace": "default"},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": DRIVER}}]}}} for i in range(n)]
        inputs = self.work / "alloc.json"
        inputs.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                      "items": self.slices + pending}))
        p = subprocess.run([str(self.binary), "allocate", "--node", NODE, "-o", "json", "-f",
                            str(inputs), "-f", str(CLASSES)], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"run.py: gpuplane allocate: {p.stderr.strip()}")
        out = []
        for c in json.loads(p.stdout)["items"]:
            c["status"]["reservedFor"] = [{"resource": "pods", "name": "pod-" + c["metadata"]["name"],
                                           "uid": str(uuid.uuid4())}]
            out.append(self.fk.put(c))
        return out

    def rss_kib(self):
        fields = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        return int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0])

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.kubelet.stop()
        self.fk.stop()
        self.log.close()


class Client:
    """The kubelet's side of dra.sock: one channel, v1."""

    def __init__(self, node):
        self.pb = dra_emu.dra_pb["v1"][0]
        self.channel = grpc.insecure_channel("unix:" + str(node.plugins / DRIVER / "dra.sock"),
                                             options=dra_emu.CHANNEL_OPTIONS)
        self.stub = dra_emu.dra_pb["v1"][1].DRAPluginStub(self.channel)

    def _wire(self, claims):
        return [self.pb.Claim(namespace=c["metadata"]["namespace"], name=c["metadata"]["name"],
                              uid=c["metadata"]["uid"]) for c in claims]

    def prepare(self, claims):
        t = time.perf_counter()
        r = self.stub.NodePrepareResources(
            self.pb.NodePrepareResourcesRequest(claims=self._wire(claims)), timeout=45)
        dt = time.perf_counter() - t
        bad = [u for u, a in r.claims.items() if a.error or not a.devices]
        if bad or len(r.claims) != len(claims):
            raise SystemExit(f"run.py: prepare failed: {r}")
        return dt

    def unprepare(self, claims):
        t = time.perf_counter()
        r = self.stub.NodeUnprepareResources(
            self.pb.NodeUnprepareResourcesRequest(claims=self._wire(claims)), timeout=45)
        dt = time.perf_counter() - t
        if any(a.error for a in r.claims.values()) or len(r.claims) != len(claims):
            raise SystemExit(f"run.py: unprepare failed: {r}")
        return dt

    def close(self):
        self.channel.close()


def api_get(fk, claim):
    """One GET of the claim from the fake API server over HTTPS, as the driver makes it."""
    cfg = yaml.safe_load(pathlib.Path(fk.kubeconfig).read_text())
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if "certificate-authority-data" in cluster:
        import base64
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    token = user.get("token") or pathlib.Path(user["tokenFile"]).read_text().strip()
    url = (f"{cluster['server']}/apis/resource.k8s.io/v1/namespaces/"
           f"{claim['metadata']['namespace']}/resourceclaims/{claim['metadata']['name']}")

    def one():
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        t = time.perf_counter()
        with urllib.request.urlopen(req, context=ctx) as r:
            r.read()
        return time.perf_counter() - t
    return one


def summary(samples):
    s = sorted(samples)
    return {"n": len(s), "p50_ms": statistics.median(s) * 1e3,
            "p99_ms": s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3, "max_ms": s[-1] * 1e3}


def measure(node, rounds):
    claims = node.claims(len([d for s in node.slices for d in s["spec"].get("devices", [])
                              if d["name"].startswith("gpu-") and "-mig-" not in d["name"]]))
    client = Client(node)
    get = api_get(node.fk, claims[0])
    rows = {"prepare": [], "again": [], "unprepare": [], f"prepare x{len(claims)}": [],
            f"unprepare x{len(claims)}": [], "api GET": []}
    try:
        for i in range(rounds):
            c = [claims[i % len(claims)]]
            rows["prepare"].append(client.prepare(c))
            rows["again"].append(client.prepare(c))
            rows["unprepare"].append(client.unprepare(c))
            rows["api GET"].append(get())
            if i % 10 == 0:
                rows[f"prepare x{len(claims)}"].append(client.prepare(claims))
                rows[f"unprepare x{len(claims)}"].append(client.unprepare(claims))
            if rounds >= 10 and (i + 1) % (rounds // 10) == 0:
                progress(f"  {i + 1}/{rounds} rounds")
    finally:
        client.close()
    hwm, rss = node.rss_kib()
    return {k: summary(v) for k, v in rows.items() if v}, {"peak_rss_kib": hwm, "rss_kib": rss}


def table(rows, mem):
    out = ["| call | n | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for k, v in rows.items():
        out.append(f"| {k} | {v['n']} | {v['p50_ms']:.3f} | {v['p99_ms']:.3f} | {v['max_ms']:.3f} |")
    out.append("")
    out.append(f"driver peak RSS {mem['peak_rss_kib'] / 1024:.1f} MiB, "
               f"RSS at the end {mem['rss_kib'] / 1024:.1f} MiB")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300, help="rounds of prepare/again/unprepare")
    ap.add_argument("--profile", default="dgx-h100", help="mock node profile (examples/nodes)")
    ap.add_argument("--build", default=os.environ.get("GPUPLANE_BUILD", str(ROOT / "build")),
                    help="the build directory holding gpuplane")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON ('-': stdout)")
    ap.add_argument("--quick", action="store_true", help="20 rounds")
    ap.add_argument("--kube-api-qps", type=float, default=1000.0,
                    help="the driver's client-side API rate limit (default 1000: the driver's own "
                    "latency; the driver's default, 5 as NVIDIA's, paces a GET per claim to 200 ms "
                    "once its burst of 10 is spent)")
    args = ap.parse_args()
    binary = pathlib.Path(args.build) / "gpuplane"
    if not binary.exists():
        raise SystemExit(f"run.py: {binary} is not built (make build)")
    os.environ.setdefault("GPUPLANE_BUILD", str(args.build))
    rounds = 20 if args.quick else args.rounds
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpdrb-", dir="/tmp"))
    head = describe(machine())
    progress(f"dra-driver on mock {args.profile}: {rounds} rounds ...")
    node = None
    try:
        node = Node(binary, args.profile, work, args.kube_api_qps)
        rows, mem = measure(node, rounds)
    finally:
        if node:
            node.close()
        shutil.rmtree(work, ignore_errors=True)
    result = {"machine": head, "profile": args.profile, "rounds": rounds,
              "kube_api_qps": args.kube_api_qps, "calls": rows, **mem}
    emit(f"machine: {head}; --kube-api-qps {args.kube_api_qps:g}\n\n{table(rows, mem)}", result,
         args.json)


if __name__ == "__main__":
    main()
