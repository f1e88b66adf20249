#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpuplane dra-driver end to end on one machine: the test API server (tests/integration/fakekube.py),
# the driver on the simulated dgx-h100 node, a claim allocated with `gpuplane allocate` against the
# slices the driver published and stored with reservedFor, then NodePrepareResources and
# NodeUnprepareResources through the kubelet emulator, with the CDI spec shown in between. The
# simulated node brings its own driver root (a private directory the driver removes on exit), so
# the spec's host paths are under it.
# Usage: run-local.sh [BUILD_DIR]   (default: build/ of the source tree)
set -eu
src=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
work=$(mktemp -d /tmp/gpdra-example-XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$src" "$build" "$work" <<'PY'
import json, pathlib, signal, subprocess, sys, time, uuid
src, build, work = (pathlib.Path(a) for a in sys.argv[1:4])
sys.path[:0] = [str(src / "tests" / "integration"), str(src / "tools" / "kubelet-emulator")]
from fakekube import FakeKube
import dra_emu

gp = str(build / "gpuplane")
with FakeKube(work / "api") as api, dra_emu.DraKubelet(work / "reg") as kubelet:
    driver = subprocess.Popen([gp, "dra-driver", "--mock=dgx-h100", "--node-name=node-1",
                               f"--kubeconfig={api.kubeconfig}",
                               f"--kubelet-registrar-directory-path={work / 'reg'}",
                               f"--kubelet-plugins-directory-path={work / 'plugins'}",
                               f"--cdi-root={work / 'cdi'}"],
                              stderr=open(work / "driver.log", "w"))
    try:
        reg = kubelet.wait_registered("gpu.nvidia.com", timeout=15)
        print(f"registered: {reg.info['name']} over {reg.service}, endpoint {reg.endpoint}")
        deadline = time.monotonic() + 15
        while not api.objects("resourceslices") and time.monotonic() < deadline:
            time.sleep(0.05)
        slices = api.objects("resourceslices")
        print(f"published: {[d['name'] for s in slices for d in s['spec']['devices']]}")
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "claim-a", "namespace": "default"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "gpu.nvidia.com", "count": 2}}]}}}
        (work / "in.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                  "items": slices + [claim]}))
        out = subprocess.run([gp, "allocate", "--node", "node-1", "-o", "json", "-f", work / "in.json",
                              "-f", src / "examples" / "dra" / "deviceclasses.yaml"],
                             check=True, capture_output=True, text=True).stdout
        claim = json.loads(out)["items"][0]
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "pod-a", "uid": str(uuid.uuid4())}]
        claim = api.put(claim)
        uid = claim["metadata"]["uid"]
        print(f"allocated: {[r['device'] for r in claim['status']['allocation']['devices']['results']]}")
        r = kubelet.prepare("gpu.nvidia.com", [("default", "claim-a", uid)])
        print(f"NodePrepareResources: ok={r.ok} cdi ids={r.cdi_ids(uid)}")
        spec = work / "cdi" / f"k8s.gpu.nvidia.com-claim_{uid}.yaml"
        print(f"--- {spec.name}\n{spec.read_text()}---")
        r = kubelet.unprepare("gpu.nvidia.com", [("default", "claim-a", uid)])
        print(f"NodeUnprepareResources: ok={r.ok}; spec still there: {spec.exists()}")
        ok = r.ok and not spec.exists()
    finally:
        driver.send_signal(signal.SIGTERM)
        driver.wait(15)
# The simulated node's driver root, as the driver logged it, is gone with the driver.
for line in (work / "driver.log").read_text().splitlines():
    if "the simulated node's driver root" in line:
        root = pathlib.Path(line.split(' path="', 1)[1].split('"', 1)[0])
        print(f"the simulated node's driver root {root}: removed on SIGTERM: {not root.exists()}")
        ok = ok and not root.exists()
sys.exit(0 if ok else 1)
PY
