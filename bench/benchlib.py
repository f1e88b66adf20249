# SPDX-License-Identifier: Apache-2.0
"""What the benchmark runners under bench/ share: the description of the machine a run was made on,
recorded with every result (docs/benchmarks.md quotes it)."""
import datetime
import os
import platform
import subprocess


def machine():
    """{"nproc", "cpu", "kernel", "date", "load1"}: the CPU model from lscpu ("" when unknown), the
    one-minute load average at the start (None when unknown)."""
    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "date": datetime.date.today().isoformat(), "load1": load}


def describe(m):
    """One line for a table's heading: "2 CPUs, AMD EPYC, Linux 6.1, 2026-11-22, load 0.42"."""
    load = f", load {m['load1']:.2f} at the start" if m.get("load1") is not None else ""
    return f"{m['nproc']} CPUs, {m['cpu'] or 'unknown CPU'}, Linux {m['kernel']}, {m['date']}{load}"
