#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Generate DRA scheduling benchmarks: a cluster of N nodes x G GPUs as gpuplane's DRA driver
(gpu.nvidia.com) publishes them, and pod/claim workloads, as multi-document YAML (or JSON Lists).

    bench/dra/gen.py --nodes 5000 --out /tmp/dra-5k                    # cluster.yaml + workload.yaml
    bench/dra/gen.py --nodes 5000 --workload single --pods 50000 --out /tmp/dra-5k
    bench/dra/gen.py --nodes 1 --workload worst --out /tmp/dra-worst   # Kubernetes issue 131730
    bench/dra/gen.py --nodes 100 --what cluster > cluster.yaml

Cluster (cluster.yaml): the DeviceClasses gpu.nvidia.com / mig.nvidia.com (NVIDIA's selectors),
one Node per node (node-00000 ...), and per node one ResourceSlice (pool = node name, nodeName =
node) with G full GPUs gpu-0..gpu-<G-1> carrying NVIDIA's attributes (type, uuid, productName,
brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion, pciBusID, pcieRoot)
and capacity memory. GPUs are grouped --gpus-per-root to a PCIe root (DGX H100: 2). With
--nvlink-domain-attr NAME each GPU also gets a string attribute NAME naming its NVLink domain
(NVIDIA publishes none on GPU devices; this is for benchmarking topology constraints).

Workloads (workload.yaml): per pod one ResourceClaim <pod>-gpu and one Pod using it
(spec.resourceClaims[].resourceClaimName), or with --templates one ResourceClaimTemplate per kind
and Pods referencing it.
  single  one GPU per pod
  pcie4   four GPUs on one PCIe root (matchAttribute resource.kubernetes.io/pcieRoot; needs
          --gpus-per-root >= 4, else every pod is unschedulable)
  nvlink4 four GPUs in one NVLink domain (matchAttribute on --nvlink-domain-attr)
  worst   the worst case of Kubernetes issue 131730: each pod asks for n GPUs (--worst-n,
          default G) with a matchAttribute constraint that only n-1 GPUs of any node can meet
          (the NVLink domain attribute: G-1 GPUs share one domain, the last GPU is alone; with
          --worst-attr pcieRoot instead n = gpus-per-root + 1 on the PCIe root)
  mixed   --mix single=0.8,pcie4=0.1,nvlink4=0.1 (fractions of --pods)

Only the standard library; the output is written with string templates so 5,000 nodes take a few
seconds. python3-yaml is used only by --check (re-parse the output). Nothing is random: the same
arguments always give the same bytes. --what all writes the cluster and the workload as one file,
all.<fmt> (the input of `gpuplane schedule -f all.json`).
"""
import argparse
import itertools
import json
import os
import sys
import time

DRIVER = "gpu.nvidia.com"
CLASSES = [
    ("gpu.nvidia.com", "gpu", "nvidia.com/gpu"),
    ("mig.nvidia.com", "mig", None),
]
PRODUCTS = {
    "h100": dict(name="NVIDIA H100 80GB HBM3", arch="Hopper", cc="9.0.0", mem="81559Mi", brand="Nvidia"),
    "a100": dict(name="NVIDIA A100-SXM4-80GB", arch="Ampere", cc="8.0.0", mem="81920Mi", brand="Nvidia"),
}
# DGX H100 bus ids; other slots get synthetic ones.
DGX_BUS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
DEFAULT_NVLINK_ATTR = "gpuplane.dev/nvlinkDomain"


def q(s):
    """A YAML double-quoted scalar (JSON string syntax is valid YAML)."""
    return json.dumps(s)


# ---- cluster ----------------------------------------------------------------------------------

def node_name(i):
    return f"node-{i:05d}"


def gpu_devices(args, ni):
    """The device dicts of node ni (plain Python, also used for JSON output)."""
    p = PRODUCTS[args.product]
    devs = []
    for g in range(args.gpus_per_node):
        bus = DGX_BUS[g] if g < len(DGX_BUS) else f"{(0x20 + 16 * g) & 0xff:02x}"
        root = g // args.gpus_per_root
        attrs = {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{ni:08x}-{g:04x}-4000-8000-{(ni * 64 + g):012x}"},
            "productName": {"string": p["name"]},
            "brand": {"string": p["brand"]},
            "architecture": {"string": p["arch"]},
            "cudaComputeCapability": {"version": p["cc"]},
            "driverVersion": {"version": args.driver_version},
            "cudaDriverVersion": {"version": "12.4.0"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{bus}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{(0x10 + 0x20 * root) & 0xff:02x}"},
        }
        if args.nvlink_domain_attr:
            dom = 0
            if args.worst_split and g == args.gpus_per_node - 1:
                dom = 1
            attrs[args.nvlink_domain_attr] = {"string": f"{node_name(ni)}-nvl{dom}"}
        devs.append({"name": f"gpu-{g}", "attributes": attrs, "capacity": {"memory": {"value": p["mem"]}}})
    return devs


def cluster_objects(args, nodes=None, classes=True):
    """Yields the cluster's objects as dicts (for JSON)."""
    for name, typ, ext in (CLASSES if classes else []):
        spec = {"selectors": [{"cel": {"expression":
                f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{typ}'"}}]}
        if ext:
            spec["extendedResourceName"] = ext
        yield {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    for ni in (range(args.nodes) if nodes is None else nodes):
        n = node_name(ni)
        yield {"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, "nvidia.com/gpu.present": "true",
                                                   "topology.kubernetes.io/zone": f"zone-{ni % args.zones}"}}}
        yield {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": f"{n}-{DRIVER}-0"},
               "spec": {"driver": DRIVER, "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                        "nodeName": n, "devices": gpu_devices(args, ni)}}


def write_cluster_yaml(args, out, nodes=None, classes=True):
    """The same objects as cluster_objects, emitted with templates (fast)."""
    w = out.write
    for name, typ, ext in (CLASSES if classes else []):
        w("---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: %s\nspec:\n  selectors:\n"
          "  - cel:\n      expression: %s\n" % (name, q(f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{typ}'")))
        if ext:
            w(f"  extendedResourceName: {ext}\n")
    p = PRODUCTS[args.product]
    # Per-GPU constant part of a device, built once.
    const = ("      type: {string: gpu}\n"
             f"      productName: {{string: {q(p['name'])}}}\n"
             f"      brand: {{string: {p['brand']}}}\n"
             f"      architecture: {{string: {p['arch']}}}\n"
             f"      cudaComputeCapability: {{version: {q(p['cc'])}}}\n"
             f"      driverVersion: {{version: {q(args.driver_version)}}}\n"
             "      cudaDriverVersion: {version: \"12.4.0\"}\n")
    cap = f"    capacity:\n      memory: {{value: {p['mem']}}}\n"
    per_gpu = []
    for g in range(args.gpus_per_node):
        bus = DGX_BUS[g] if g < len(DGX_BUS) else f"{(0x20 + 16 * g) & 0xff:02x}"
        root = g // args.gpus_per_root
        per_gpu.append((g, f"      resource.kubernetes.io/pciBusID: {{string: \"0000:{bus}:00.0\"}}\n"
                           f"      resource.kubernetes.io/pcieRoot: {{string: \"pci0000:{(0x10 + 0x20 * root) & 0xff:02x}\"}}\n"))
    nv = args.nvlink_domain_attr
    last = args.gpus_per_node - 1
    for ni in (range(args.nodes) if nodes is None else nodes):
        n = node_name(ni)
        parts = [f"---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n  labels:\n"
                 f"    kubernetes.io/hostname: {n}\n    nvidia.com/gpu.present: \"true\"\n"
                 f"    topology.kubernetes.io/zone: zone-{ni % args.zones}\n"
                 f"---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: {n}-{DRIVER}-0\nspec:\n"
                 f"  driver: {DRIVER}\n  pool: {{name: {n}, generation: 1, resourceSliceCount: 1}}\n"
                 f"  nodeName: {n}\n  devices:\n"]
        for g, pci in per_gpu:
            parts.append(f"  - name: gpu-{g}\n    attributes:\n{const}"
                         f"      uuid: {{string: GPU-{ni:08x}-{g:04x}-4000-8000-{(ni * 64 + g):012x}}}\n{pci}")
            if nv:
                dom = 1 if (args.worst_split and g == last) else 0
                parts.append(f"      {nv}: {{string: {n}-nvl{dom}}}\n")
            parts.append(cap)
        w("".join(parts))


# ---- workloads --------------------------------------------------------------------------------

def claim_spec(args, kind):
    """(count, constraint attribute or None) for a workload kind."""
    if kind == "single":
        return 1, None
    if kind == "pcie4":
        return 4, "resource.kubernetes.io/pcieRoot"
    if kind == "nvlink4":
        return 4, args.nvlink_domain_attr
    if kind == "worst":
        if args.worst_attr == "pcieRoot":
            return args.gpus_per_root + 1, "resource.kubernetes.io/pcieRoot"
        return args.worst_n or args.gpus_per_node, args.nvlink_domain_attr
    raise SystemExit(f"unknown workload kind {kind}")


def device_claim_spec(args, kind):
    count, attr = claim_spec(args, kind)
    exactly = {"deviceClassName": "gpu.nvidia.com"}
    if count != 1:
        exactly["count"] = count
    spec = {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}
    if attr:
        spec["devices"]["constraints"] = [{"matchAttribute": attr}]
    return spec


def pod_kinds(args):
    if args.workload != "mixed":
        return [(args.workload, args.pods)]
    out, total = [], 0
    parts = [p.split("=") for p in args.mix.split(",") if p]
    for i, (k, f) in enumerate(parts):
        n = args.pods - total if i == len(parts) - 1 else int(round(args.pods * float(f)))
        out.append((k, n))
        total += n
    return out


def workload_objects(args):
    pod_index = 0
    for kind, n in pod_kinds(args):
        spec = device_claim_spec(args, kind)
        tmpl = f"gpu-{kind}"
        if args.templates:
            yield {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": tmpl, "namespace": args.namespace}, "spec": {"spec": spec}}
        for _ in range(n):
            pod = f"pod-{kind}-{pod_index:06d}"
            pod_index += 1
            if args.templates:
                ref = {"name": "gpus", "resourceClaimTemplateName": tmpl}
            else:
                yield {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": f"{pod}-gpus", "namespace": args.namespace}, "spec": spec}
                ref = {"name": "gpus", "resourceClaimName": f"{pod}-gpus"}
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": args.namespace,
                                                                   "labels": {"workload": kind}},
                   "spec": {"resourceClaims": [ref],
                            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                            "resources": {"claims": [{"name": "gpus"}]}}]}}


def write_workload_yaml(args, out):
    w = out.write
    ns = args.namespace
    pod_index = 0
    for kind, n in pod_kinds(args):
        count, attr = claim_spec(args, kind)
        req = ("    requests:\n    - name: gpus\n      exactly:\n        deviceClassName: gpu.nvidia.com\n"
               + (f"        count: {count}\n" if count != 1 else ""))
        if attr:
            req += f"    constraints:\n    - matchAttribute: {attr}\n"
        tmpl = f"gpu-{kind}"
        if args.templates:
            w(f"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {tmpl}\n"
              f"  namespace: {ns}\nspec:\n  spec:\n    devices:\n" + "".join("  " + l + "\n" for l in req.splitlines()))
        claim_body = "spec:\n  devices:\n" + req
        chunk = []
        for _ in range(n):
            pod = f"pod-{kind}-{pod_index:06d}"
            pod_index += 1
            if args.templates:
                ref = f"resourceClaimTemplateName: {tmpl}"
            else:
                chunk.append(f"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n"
                             f"  name: {pod}-gpus\n  namespace: {ns}\n{claim_body}")
                ref = f"resourceClaimName: {pod}-gpus"
            chunk.append(f"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: {ns}\n"
                         f"  labels: {{workload: {kind}}}\nspec:\n  resourceClaims:\n  - name: gpus\n    {ref}\n"
                         "  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n"
                         "    resources:\n      claims:\n      - name: gpus\n")
            if len(chunk) >= 4096:
                w("".join(chunk))
                chunk = []
        w("".join(chunk))


# ---- main -------------------------------------------------------------------------------------

def emit(args, what, out, nodes=None, classes=True):
    """Writes the cluster, the workload or both ("all": the cluster's objects, then the
    workload's, in one List or one stream)."""
    if args.format == "json":
        objs = []
        if what in ("cluster", "all"):
            objs = itertools.chain(objs, cluster_objects(args, nodes, classes))
        if what in ("workload", "all"):
            objs = itertools.chain(objs, workload_objects(args))
        out.write('{"apiVersion": "v1", "kind": "List", "items": [\n')
        for i, o in enumerate(objs):
            out.write((",\n" if i else "") + json.dumps(o, separators=(",", ":")))
        out.write("\n]}\n")
        return
    if what in ("cluster", "all"):
        write_cluster_yaml(args, out, nodes, classes)
    if what in ("workload", "all"):
        write_workload_yaml(args, out)


def check(path, fmt):
    import yaml
    with open(path) as f:
        docs = [json.load(f)] if fmt == "json" else [d for d in yaml.safe_load_all(f) if d]
    kinds = {}
    for d in (docs[0]["items"] if fmt == "json" else docs):
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    return kinds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--gpus-per-root", type=int, default=2, help="GPUs per PCIe root (DGX H100: 2)")
    ap.add_argument("--product", choices=sorted(PRODUCTS), default="h100")
    ap.add_argument("--driver-version", default="550.54.15")
    ap.add_argument("--zones", type=int, default=4)
    ap.add_argument("--nvlink-domain-attr", default=None,
                    help=f"publish an NVLink-domain string attribute (e.g. {DEFAULT_NVLINK_ATTR}); "
                         "default: none, except for the nvlink4/worst workloads which use "
                         f"{DEFAULT_NVLINK_ATTR}")
    ap.add_argument("--workload", choices=["single", "pcie4", "nvlink4", "worst", "mixed"], default="single")
    ap.add_argument("--mix", default="single=0.8,pcie4=0.1,nvlink4=0.1")
    ap.add_argument("--pods", type=int, default=None, help="default: one per GPU for single, else one per node")
    ap.add_argument("--worst-n", type=int, default=None, help="devices per worst-case pod (default: gpus per node)")
    ap.add_argument("--worst-attr", choices=["nvlink", "pcieRoot"], default="nvlink")
    ap.add_argument("--templates", action="store_true", help="ResourceClaimTemplates instead of per-pod claims")
    ap.add_argument("--namespace", default="bench")
    ap.add_argument("--format", choices=["yaml", "json"], default="yaml")
    ap.add_argument("--what", choices=["cluster", "workload", "both", "all"], default="both",
                    help="both: cluster.<fmt> and workload.<fmt>; all: both in one file, all.<fmt>")
    ap.add_argument("--out", help="directory for cluster.<fmt> and workload.<fmt> (default: stdout)")
    ap.add_argument("--nodes-per-file", type=int, default=0,
                    help="split the cluster into cluster-NNN.<fmt> files of this many nodes (the first also "
                         "holds the DeviceClasses); 0: one cluster file")
    ap.add_argument("--check", action="store_true", help="re-parse the written files (python3-yaml) and count kinds")
    args = ap.parse_args()

    kinds = {args.workload} if args.workload != "mixed" else {p.split("=")[0] for p in args.mix.split(",")}
    if kinds & {"nvlink4"} or (kinds & {"worst"} and args.worst_attr == "nvlink"):
        args.nvlink_domain_attr = args.nvlink_domain_attr or DEFAULT_NVLINK_ATTR
    # The 131730 worst case: one GPU per node sits in its own NVLink domain, so only n-1 match.
    args.worst_split = "worst" in kinds and args.worst_attr == "nvlink"
    if args.pods is None:
        args.pods = args.nodes * args.gpus_per_node if args.workload == "single" else args.nodes
    if "pcie4" in kinds and args.gpus_per_root < 4:
        print(f"gen.py: note: pcie4 pods need 4 GPUs per PCIe root, --gpus-per-root is {args.gpus_per_root}: "
              "they are unschedulable", file=sys.stderr)

    whats = ["cluster", "workload"] if args.what == "both" else [args.what]
    if args.what == "all" and args.nodes_per_file > 0:
        ap.error("--what all writes one file: no --nodes-per-file")
    t0 = time.monotonic()
    if not args.out:
        for what in whats:
            emit(args, what, sys.stdout)
        return
    os.makedirs(args.out, exist_ok=True)
    jobs = []
    for what in whats:
        if what == "cluster" and args.nodes_per_file > 0:
            k = args.nodes_per_file
            for i, lo in enumerate(range(0, max(args.nodes, 1), k)):
                jobs.append((what, f"cluster-{i:03d}", range(lo, min(lo + k, args.nodes)), i == 0))
        else:
            jobs.append((what, what, None, True))
    for what, base, nodes, classes in jobs:
        path = os.path.join(args.out, f"{base}.{args.format}")
        with open(path, "w", buffering=1 << 20) as f:
            emit(args, what, f, nodes, classes)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB", file=sys.stderr)
        if args.check:
            print(f"  {check(path, args.format)}", file=sys.stderr)
    print(f"gen.py: {time.monotonic() - t0:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
