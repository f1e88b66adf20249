#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the fake driver root of a mock node profile.

The mock NVML library creates no files. Tests and the demo that need what a node with the NVIDIA
driver has on disk (device nodes, /proc/driver/nvidia, the driver's libraries and tools) run this
first: it reads the same profile the library reads and lays out DIR as docs/mock-nvml.md describes,
with empty regular files standing in for device nodes, so no privileges are needed.

    make-driver-root.py PROFILE DIR [--mock-lib PATH]

The profile is not validated here beyond what the layout needs; the library does the strict check.
"""
import argparse
import os
import shutil
import sys

import yaml

LIBDIR = "usr/lib/x86_64-linux-gnu"
MIG_GIS = 15  # GPU instances per GPU in the driver's capability numbering
MIG_CIS = 8   # compute instances per GPU instance
CAP_MODE = 292  # 0444, as the driver writes it

# GPU instance profiles by name, for the default GI id and the GI slice count (see mock-mig.c).
MEM_SLICES = {
    "1g.5gb": 1, "1g.5gb+me": 1, "1g.10gb": 2, "2g.10gb": 2, "3g.20gb": 4, "4g.20gb": 4,
    "7g.40gb": 8,
}
MEM_SLICES_H100 = {
    "1g.10gb": 1, "1g.10gb+me": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4,
    "7g.80gb": 8,
}
STARTS = {1: list(range(7)), 2: [0, 2, 4, 6], 4: [0, 4], 8: [0]}
STARTS_2G = [0, 2, 4]


def gi_minor(gpu_minor, gi):
    return 3 + 135 * gpu_minor + 9 * gi


def ci_minor(gpu_minor, gi, ci):
    return gi_minor(gpu_minor, gi) + 1 + ci


def touch(root, rel, text=""):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def symlink(root, rel, target):
    path = os.path.join(root, rel)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(target, path)


def cap_text(minor):
    return f"DeviceFileMinor: {minor}\nDeviceFileMode: {CAP_MODE}\nDeviceFileModify: 1\n"


def gpu_value(gpu, defaults, key, default=None):
    if key in gpu:
        return gpu[key]
    return defaults.get(key, default)


def table_for(name, mig):
    table = mig.get("table")
    if table == "h100-80gb" or (table is None and "H100" in name and "80GB" in name):
        return MEM_SLICES_H100
    return MEM_SLICES


def gi_default_id(mem_slices, start):
    if mem_slices == 8:
        return 0
    if mem_slices == 4:
        return 1 + start // 4
    if mem_slices == 2:
        return 3 + start // 2
    return 7 + start


def instances(name, mig):
    """(gi id, [ci ids]) of each GPU instance, placed as the library places them."""
    table = table_for(name, mig)
    used = 0
    out = []
    for inst in mig.get("instances") or []:
        prof = inst["profile"]
        size = table[prof]
        starts = STARTS_2G if prof.startswith("2g.") else STARTS[size]
        start = inst.get("placement")
        if start is None:
            start = next(s for s in starts if not used & (((1 << size) - 1) << s))
        used |= ((1 << size) - 1) << start
        gi = inst.get("id", gi_default_id(size, start))
        cis = inst.get("computeInstances")
        n_ci = 1 if cis is None else len(cis)
        out.append((gi, list(range(n_ci))))
    return out


def make_proc(root, version, gpus):
    touch(root, "proc/driver/nvidia/version",
          f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  (mock-nvml)\n"
          "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    touch(root, "proc/driver/nvidia/capabilities/mig/config", cap_text(1))
    touch(root, "proc/driver/nvidia/capabilities/mig/monitor", cap_text(2))
    lines = ["config 1", "monitor 2"]
    for g in sorted(gpu["minor"] for gpu in gpus):
        for gi in range(MIG_GIS):
            lines.append(f"gpu{g}/gi{gi}/access {gi_minor(g, gi)}")
            for ci in range(MIG_CIS):
                lines.append(f"gpu{g}/gi{gi}/ci{ci}/access {ci_minor(g, gi, ci)}")
    touch(root, "proc/driver/nvidia-caps/mig-minors", "\n".join(lines) + "\n")


def make_gpu(root, gpu):
    minor = gpu["minor"]
    touch(root, f"dev/nvidia{minor}")
    bdf = gpu["busId"].lower()
    if len(bdf.split(":")[0]) == 8:
        bdf = bdf[4:]
    touch(root, f"proc/driver/nvidia/gpus/{bdf}/information",
          f"Model: \t\t {gpu['name']}\nIRQ:   \t\t 0\nGPU UUID: \t {gpu.get('uuid', '')}\n"
          f"Video BIOS: \t {gpu.get('vbios', '??.??.??.??.??')}\nBus Type: \t PCIe\n"
          f"DMA Size: \t 47 bits\nBus Location: \t {bdf}\nDevice Minor: \t {minor}\n"
          "GPU Excluded:\t No\n")
    for gi, cis in gpu["instances"]:
        base = f"proc/driver/nvidia/capabilities/gpu{minor}/mig/gi{gi}"
        touch(root, f"{base}/access", cap_text(gi_minor(minor, gi)))
        touch(root, f"dev/nvidia-caps/nvidia-cap{gi_minor(minor, gi)}")
        for ci in cis:
            touch(root, f"{base}/ci{ci}/access", cap_text(ci_minor(minor, gi, ci)))
            touch(root, f"dev/nvidia-caps/nvidia-cap{ci_minor(minor, gi, ci)}")


def make_libs(root, version, mock_lib):
    for base in ("libnvidia-ml.so", "libcuda.so", "libnvidia-ptxjitcompiler.so"):
        real = f"{base}.{version}"
        path = os.path.join(root, LIBDIR, real)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if base == "libnvidia-ml.so" and mock_lib:
            shutil.copyfile(mock_lib, path)
        else:
            touch(root, os.path.join(LIBDIR, real))
        symlink(root, os.path.join(LIBDIR, f"{base}.1"), real)
    symlink(root, os.path.join(LIBDIR, "libcuda.so"), "libcuda.so.1")
    for tool in ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"):
        os.chmod(touch(root, f"usr/bin/{tool}", "#!/bin/sh\necho mock-nvml: no real GPU >&2\n"
                       "exit 1\n"), 0o755)


def load_gpus(profile):
    defaults = profile.get("defaults") or {}
    gpus = []
    for i, gpu in enumerate(profile.get("gpus") or []):
        mig = gpu_value(gpu, defaults, "mig", {}) or {}
        name = gpu_value(gpu, defaults, "name", "")
        gpus.append({
            "minor": gpu_value(gpu, defaults, "minor", i),
            "busId": gpu_value(gpu, defaults, "busId"),
            "name": name,
            "uuid": gpu_value(gpu, defaults, "uuid"),
            "vbios": gpu_value(gpu, defaults, "vbios"),
            "instances": instances(name, mig) if mig.get("enabled") else [],
        })
    return gpus


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("dir")
    ap.add_argument("--mock-lib", help="copy this file as libnvidia-ml.so.<version>")
    args = ap.parse_args()
    with open(args.profile) as f:
        profile = yaml.safe_load(f)
    version = (profile.get("driver") or {}).get("version", "550.54.15")
    gpus = load_gpus(profile)
    root = args.dir
    for node in ("nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools",
                 "nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap2"):
        touch(root, f"dev/{node}")
    make_proc(root, version, gpus)
    for gpu in gpus:
        make_gpu(root, gpu)
    make_libs(root, version, args.mock_lib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
