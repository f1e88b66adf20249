# SPDX-License-Identifier: Apache-2.0
"""What the benchmark runners under bench/ share: the description of the machine a run was made on,
recorded with every result (docs/benchmarks.md quotes it), polling for a condition, a process's
memory figures, and where the results go."""
import datetime
import json
import os
import pathlib
import platform
import subprocess
import time


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


def wait_until(fn, timeout, what, every=0.05):
    """fn()'s first true value, polled every `every` seconds; exits the run when `timeout` seconds
    pass first."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit(f"run.py: timed out waiting for {what} ({timeout} s)")
        time.sleep(every)


def memory(pid, rollup=False):
    """{"VmRSS", "VmHWM"} of process pid in KiB, and with rollup its {"Pss", "Private_Dirty"}
    (/proc/PID/smaps_rollup)."""
    out = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])
    if rollup:
        for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            k, _, v = line.partition(":")
            if k in ("Pss", "Private_Dirty"):
                out[k] = int(v.split()[0])
    return out


def emit(report, results, json_to):
    """The human report on stdout, and the results as JSON to json_to (a file; "-": stdout
    instead of the report; None: nowhere)."""
    if json_to == "-":
        print(json.dumps(results, indent=1))
        return
    print(report)
    if json_to:
        pathlib.Path(json_to).write_text(json.dumps(results, indent=1) + "\n")
