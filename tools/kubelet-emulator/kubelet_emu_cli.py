# SPDX-License-Identifier: Apache-2.0
"""Command line of the kubelet emulator: `kubelet-emu serve` and `kubelet-emu run STEP...`."""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

import kubelet_emu as ke

STEPS_HELP = """\
steps (each one argument, "name" or "name:argument"):
  say:TEXT                         print a narration line
  spawn:COMMAND                    start a process (output to a log file; ended at exit)
  sh:COMMAND                       run a shell command, wait for it, print its output
  wait-registered:RES[:TIMEOUT]    wait for RES to register and send its devices
  wait:RES:FIELD=N[:TIMEOUT]       wait until FIELD (capacity, allocatable, allocated, registrations)
                                   of RES is N; prints how long after the last sh step the
                                   ListAndWatch update arrived
  show                             table of all resources
  devices:RES                      table of the devices of RES
  allocate:RES=N[:POD]             admit a pod with one container asking for N of RES; prints the
                                   GetPreferredAllocation exchange and the Allocate response
  free:POD                         release a pod's devices
  restart                          kubelet restart (sockets deleted, plugins must re-register)
  kill[:SIGNAL]                    signal the last spawned process (default TERM) and wait for it
  sleep:SECONDS                    pause (for humans; tests use wait)
  serve                            keep running until interrupted
Timeouts default to 30 s. The exit status is 1 when a step failed."""


class Output:
    def __init__(self, json_mode, events=True, stream=sys.stdout):
        self.json = json_mode
        self.events = events
        self.stream = stream
        self.t0 = time.monotonic()
        self.lock = threading.Lock()

    def stamp(self, t=None):
        return f"[{(t or time.monotonic()) - self.t0:8.3f}]"

    def line(self, text="", t=None, stamp=True):
        with self.lock:
            print(f"{self.stamp(t)} {text}" if stamp else text, file=self.stream, flush=True)

    def block(self, text):
        with self.lock:
            print(text, file=self.stream, flush=True)

    def record(self, kind, **data):
        with self.lock:
            print(json.dumps({"t": round(time.monotonic() - self.t0, 6), "kind": kind, **data}),
                  file=self.stream, flush=True)

    def event(self, ev):
        if not self.events:
            return
        if self.json:
            return self.record("event:" + ev.kind, resource=ev.resource, **ev.data)
        d = ev.data
        if ev.kind == "register":
            opts = ", ".join(n for n, on in (("GetPreferredAllocation", d["options"]["get_preferred_allocation_available"]),
                                             ("PreStartContainer", d["options"]["pre_start_required"])) if on)
            again = f" (registration #{d['registration']})" if d["registration"] > 1 else ""
            self.line(f"registered   {ev.resource}  endpoint {d['endpoint']}  options: {opts or 'none'}{again}", ev.t)
        elif ev.kind == "reject":
            self.line(f"rejected     {ev.resource or '(empty name)'}: {d['message']}", ev.t)
        elif ev.kind == "update" and (d.get("changed") or d.get("update") == 1):
            if d.get("disconnected"):
                self.line(f"plugin gone  {ev.resource}  capacity {d['capacity']}  allocatable 0 "
                          f"(ListAndWatch ended; grace period started)", ev.t)
            else:
                bad = ", ".join(d["unhealthy"]) or "-"
                self.line(f"devices      {ev.resource}  capacity {d['capacity']}  allocatable "
                          f"{d['allocatable']}  unhealthy {bad}", ev.t)
        elif ev.kind == "stream-end" and d.get("current"):
            why = d["code"] + (f": {d['details']}" if d.get("details") else "")
            self.line(f"stream end   {ev.resource}  ({why})", ev.t)
        elif ev.kind == "grace-expired":
            self.line(f"removed      {ev.resource}  (no re-registration within the grace period)", ev.t)
        elif ev.kind == "start" and d.get("deleted_sockets"):
            self.line(f"kubelet start: deleted sockets {', '.join(d['deleted_sockets'])}", ev.t)


def table(rows, header):
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i])
              for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(header)] + [fmt(r) for r in rows])


def resources_table(kubelet):
    rows = []
    for name in kubelet.resources():
        ep = kubelet.endpoint(name)
        state = "registered" if kubelet.registered(name) else ("disconnected" if ep else "checkpointed")
        rows.append([name, os.path.basename(ep) if ep else "-", state, kubelet.capacity(name),
                     kubelet.allocatable(name), len(kubelet.allocated(name)),
                     ", ".join(kubelet.unhealthy(name)) or "-"])
    return table(rows, ["RESOURCE", "PLUGIN", "STATE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "UNHEALTHY"])


def devices_table(kubelet, resource):
    owners = {}
    for a in kubelet.allocations(resource=resource):
        for i in a.device_ids:
            owners.setdefault(i, []).append(f"{a.pod}/{a.container}")
    rows = [[d.id, d.health, ",".join(map(str, d.numa)) or "-", " ".join(owners.get(d.id, [])) or "-"]
            for d in kubelet.devices(resource)]
    return table(rows, ["ID", "HEALTH", "NUMA", "ALLOCATED TO"])


def allocation_text(a):
    out = []
    if a.preferred_request is not None:
        r = a.preferred_request
        out.append(f"GetPreferredAllocation  available {len(r['available'])}, must include "
                   f"{len(r['must_include'])}, size {r['size']}")
        out.append(f"  plugin prefers        {', '.join(a.preferred_answer) or '(nothing)'}")
        for issue in a.preferred_issues:
            out.append(f"  ! {issue}")
    else:
        out.append("GetPreferredAllocation  not offered by the plugin; the kubelet picks")
    out.append(f"Allocate                pod {a.pod}, container {a.container}: {len(a.device_ids)} x {a.resource}")
    for i in a.device_ids:
        out.append(f"  {i}")
    resp = a.response
    out.append("AllocateResponse")
    items = [("envs", f"{k}={v}") for k, v in resp["envs"].items()]
    items += [("mounts", f"{m['host_path']} -> {m['container_path']}{' (ro)' if m['read_only'] else ''}")
              for m in resp["mounts"]]
    items += [("devices", f"{d['host_path']} -> {d['container_path']} {d['permissions']}") for d in resp["devices"]]
    items += [("annotations", f"{k}={v}") for k, v in resp["annotations"].items()]
    items += [("cdi_devices", n) for n in resp["cdi_devices"]]
    last = None
    for key, text in items:
        out.append(f"  {key if key != last else '':<12} {text}")
        last = key
    if not items:
        out.append("  (empty)")
    if a.prestart:
        out.append("PreStartContainer       called (plugin requires it)")
    return "\n".join(out)


class Runner:
    def __init__(self, kubelet, out, log_dir):
        self.kubelet = kubelet
        self.out = out
        self.log_dir = log_dir
        self.children = []  # (Popen, log path)
        self.last_sh = None  # monotonic end of the last sh step
        self.stop = threading.Event()

    def run(self, step):
        name, _, arg = step.partition(":")
        fn = getattr(self, "step_" + name.replace("-", "_"), None)
        if fn is None:
            raise SystemExit(f"kubelet-emu: unknown step {step!r} (see --help)")
        return fn(arg)

    def _heading(self, text):
        if self.out.json:
            return
        self.out.block(f"\n\033[1m{text}\033[0m" if sys.stdout.isatty() else f"\n{text}")

    def step_say(self, arg):
        if self.out.json:
            self.out.record("say", text=arg)
        else:
            self._heading(arg)

    def step_spawn(self, arg):
        n = len(self.children) + 1
        log = os.path.join(self.log_dir, f"spawn-{n}.log")
        with open(log, "wb") as f:
            p = subprocess.Popen(shlex.split(arg), stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.children.append((p, log))
        if self.out.json:
            self.out.record("spawn", pid=p.pid, command=arg, log=log)
        else:
            self.out.line(f"started      pid {p.pid}: {arg}  (output: {log})")

    def step_sh(self, arg):
        p = subprocess.run(["/bin/bash", "-c", arg], capture_output=True, text=True)
        self.last_sh = time.monotonic()
        if self.out.json:
            self.out.record("sh", command=arg, status=p.returncode, stdout=p.stdout, stderr=p.stderr)
        else:
            self.out.line(f"$ {arg}")
            for line in (p.stdout + p.stderr).splitlines():
                self.out.block(f"           {line}")
        if p.returncode != 0:
            raise StepFailed(f"sh step exited with {p.returncode}")

    def _check_children(self):
        for p, log in self.children:
            if p.poll() is not None and p.returncode != 0 and p.returncode > 0:
                tail = open(log, errors="replace").read()[-2000:]
                raise StepFailed(f"pid {p.pid} exited with {p.returncode}; its output:\n{tail}")

    def _wait(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            self._check_children()
            try:
                return self.kubelet.wait_for(predicate, min(0.5, max(deadline - time.monotonic(), 0.01)), what)
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise StepFailed(f"timed out after {timeout:g} s waiting for {what}") from None

    def step_wait_registered(self, arg):
        res, _, timeout = arg.partition(":")
        t0 = time.monotonic()
        self._wait(lambda: self.kubelet.registered(res) and self.kubelet.updates(res) > 0,
                   float(timeout or 30), f"registration of {res}")
        if self.out.json:
            self.out.record("registered", resource=res, seconds=time.monotonic() - t0)

    def step_wait(self, arg):
        parts = arg.split(":")
        if len(parts) < 2 or "=" not in parts[1]:
            raise SystemExit(f"kubelet-emu: wait:RES:FIELD=N[:TIMEOUT], not {arg!r}")
        res, (field, value) = parts[0], parts[1].split("=", 1)
        timeout = float(parts[2]) if len(parts) > 2 else 30.0
        getters = {"capacity": self.kubelet.capacity, "allocatable": self.kubelet.allocatable,
                   "allocated": lambda r: len(self.kubelet.allocated(r)),
                   "registrations": self.kubelet.registrations}
        if field not in getters:
            raise SystemExit(f"kubelet-emu: wait: field must be one of {', '.join(getters)}")
        get, want = getters[field], int(value)
        self._wait(lambda: get(res) == want, timeout, f"{field} of {res} == {want}")
        latency = None
        if self.last_sh is not None:  # measured once, for the first wait after an sh step
            ups = [e for e in self.kubelet.events("update", res) if e.t >= self.last_sh]
            latency = ups[-1].t - self.last_sh if ups else None
            self.last_sh = None
        if self.out.json:
            self.out.record("wait", resource=res, field=field, value=want, latency=latency)
        elif latency is not None:
            self.out.line(f"{field} of {res} is {want}: ListAndWatch update {latency * 1000:.0f} ms "
                          f"after the last sh step")
        else:
            self.out.line(f"{field} of {res} is {want}")

    def step_show(self, arg):
        if self.out.json:
            self.out.record("show", resources=[{
                "resource": r, "endpoint": self.kubelet.endpoint(r), "registered": self.kubelet.registered(r),
                "capacity": self.kubelet.capacity(r), "allocatable": self.kubelet.allocatable(r),
                "allocated": self.kubelet.allocated(r), "unhealthy": self.kubelet.unhealthy(r)}
                for r in self.kubelet.resources()])
        else:
            self.out.block(resources_table(self.kubelet))

    def step_devices(self, arg):
        if self.out.json:
            self.out.record("devices", resource=arg, devices=[
                {"id": d.id, "health": d.health, "numa": list(d.numa), "allocated": d.allocated}
                for d in self.kubelet.devices(arg)])
        else:
            self.out.block(devices_table(self.kubelet, arg))

    def step_allocate(self, arg):
        spec, _, pod = arg.partition(":")
        res, _, count = spec.rpartition("=")
        if not res:
            raise SystemExit(f"kubelet-emu: allocate:RES=N[:POD], not {arg!r}")
        try:
            a = self.kubelet.allocate(res, int(count), pod=pod or None)
        except ke.AdmissionError as e:
            if self.out.json:
                self.out.record("allocate", resource=res, count=int(count), error=e.message)
            else:
                self.out.line(f"admission failed: {e.message}")
            raise StepFailed(e.message) from None
        if self.out.json:
            self.out.record("allocate", resource=res, count=int(count), pod=a.pod, container=a.container,
                            preferred_request=a.preferred_request, preferred_answer=a.preferred_answer,
                            preferred_issues=a.preferred_issues, device_ids=a.device_ids,
                            response=a.response, prestart=a.prestart)
        else:
            self.out.block(allocation_text(a))

    def step_free(self, arg):
        freed = self.kubelet.free(arg)
        if self.out.json:
            self.out.record("free", pod=arg, device_ids=sorted({i for a in freed for i in a.device_ids}))
        else:
            self.out.line(f"freed        pod {arg}: {sum(len(a.device_ids) for a in freed)} devices")

    def step_restart(self, arg):
        if not self.out.json:
            self.out.line("kubelet restart")
        self.kubelet.restart()

    def step_kill(self, arg):
        if not self.children:
            raise StepFailed("kill: nothing was spawned")
        p, _ = self.children[-1]
        sig = getattr(signal, "SIG" + (arg or "TERM").upper().removeprefix("SIG"))
        p.send_signal(sig)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if self.out.json:
            self.out.record("kill", pid=p.pid, signal=sig.name, status=p.returncode)
        else:
            self.out.line(f"pid {p.pid} ended by {sig.name} (status {p.returncode})")

    def step_sleep(self, arg):
        self.stop.wait(float(arg))

    def step_serve(self, arg):
        while not self.stop.is_set():
            self.stop.wait(0.5)
            self._check_children()

    def end_children(self):
        for p, _ in self.children:
            if p.poll() is None:
                p.terminate()
        for p, _ in self.children:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class StepFailed(Exception):
    pass


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["dra"]:  # the DRA half has its own parser
        import dra_emu_cli
        return dra_emu_cli.main(argv[1:])
    ap = argparse.ArgumentParser(prog="kubelet-emu", formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description="Kubelet emulator for device plugins (API v1beta1).")
    sub = ap.add_subparsers(dest="mode", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", default=ke.DEFAULT_DIR, help=f"device-plugin directory (default {ke.DEFAULT_DIR})")
    common.add_argument("--json", action="store_true", help="JSON lines instead of tables")
    common.add_argument("--grace", type=float, default=ke.GRACE_PERIOD,
                        help="seconds a disconnected resource is kept (default 300)")
    common.add_argument("--quiet", action="store_true", help="do not print registration/device events")
    common.add_argument("--log-dir", help="where spawned processes write their output (default: a temp dir)")
    sub.add_parser("serve", parents=[common], help="serve and print registrations and device changes")
    sub.add_parser("dra", help="DRA drivers: plugin watcher and NodePrepare/UnprepareResources "
                   "(see kubelet-emu dra --help)")
    run = sub.add_parser("run", parents=[common], help="serve and run scripted steps",
                         formatter_class=argparse.RawDescriptionHelpFormatter, epilog=STEPS_HELP)
    run.add_argument("steps", nargs="+", metavar="STEP")
    args = ap.parse_args(argv)
    steps = ["serve"] if args.mode == "serve" else args.steps

    out = Output(args.json, events=not args.quiet)
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="kubelet-emu-logs-")
    os.makedirs(log_dir, exist_ok=True)
    try:
        kubelet = ke.KubeletEmulator(args.dir, grace_period=args.grace, on_event=out.event)
    except RuntimeError as e:
        print(f"kubelet-emu: {e}", file=sys.stderr)
        return 2
    runner = Runner(kubelet, out, log_dir)
    signal.signal(signal.SIGTERM, lambda *_: runner.stop.set())
    signal.signal(signal.SIGINT, lambda *_: runner.stop.set())
    if not args.json:
        out.line(f"kubelet-emu serving {kubelet.socket}")
    status = 0
    try:
        for step in steps:
            if runner.stop.is_set():
                break
            runner.run(step)
    except StepFailed as e:
        print(f"kubelet-emu: step failed: {e}", file=sys.stderr)
        status = 1
    finally:
        runner.end_children()
        kubelet.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
