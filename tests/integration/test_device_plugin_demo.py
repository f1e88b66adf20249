# SPDX-License-Identifier: Apache-2.0
"""`make demo` (scripts/demo.sh): the device plugin part runs to its end against the emulator and
shows what it announces — registration, 4 GPUs on one NUMA node, XID 79 taking one out, recovery;
the DRA driver part registers, publishes, prepares a claim with its CDI spec and unprepares it; the
scheduling simulation places the example pods."""
import re
import subprocess

from dp_harness import BUILD, H100, ROOT, clean_env


def test_demo_script():
    p = subprocess.run([str(ROOT / "scripts" / "demo.sh"), str(BUILD / "gpuplane")], capture_output=True,
                       text=True, timeout=60, env=clean_env())
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout)
    assert p.returncode == 0, out + p.stderr
    assert "registered   nvidia.com/gpu  endpoint nvidia-gpu.sock" in out
    assert f"NVIDIA_VISIBLE_DEVICES={','.join(H100[:4])}" in out or \
        f"NVIDIA_VISIBLE_DEVICES={','.join(H100[4:])}" in out
    assert f"capacity 8  allocatable 7  unhealthy {H100[6]}" in out
    assert "capacity 8  allocatable 8  unhealthy -" in out.split("it is healthy again")[1]
    log = re.search(r"The daemon's log \(klog\): (\S+)", out).group(1)
    text = open(log).read()
    assert f'"device healthy again" uuid="{H100[6]}" was="xid"' in text
    subprocess.run(["rm", "-rf", log.rsplit("/", 1)[0]], check=False)
    dra = out.split("gpuplane dra-driver: the DRA kubelet driver")[1]
    assert "registered: gpu.nvidia.com over v1.DRAPlugin" in dra
    assert "published: ['gpu-0', 'gpu-1'" in dra
    assert re.search(r"NodePrepareResources: ok=True cdi ids=\['k8s.gpu.nvidia.com/claim=[0-9a-f-]{36}-gpu-", dra)
    assert 'kind: "k8s.gpu.nvidia.com/claim"' in dra
    assert "NodeUnprepareResources: ok=True; spec still there: False" in dra
    assert '/gpuplane-mock-' in dra and "removed on SIGTERM: True" in dra
    assert "scheduled 5 of 6 pods, 1 unschedulable" in dra
