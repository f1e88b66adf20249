# SPDX-License-Identifier: Apache-2.0
"""`make demo` (scripts/demo.sh): the device plugin part runs to its end against the emulator and
shows what it announces — registration, 4 GPUs on one NUMA node, XID 79 taking one out, recovery."""
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
