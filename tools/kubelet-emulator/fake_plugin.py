# SPDX-License-Identifier: Apache-2.0
"""A tiny device plugin (v1beta1) in Python, to test the kubelet emulator without gpuplane.

In-process:

    plugin = FakePlugin(directory, "example.com/dev", {"dev-0": "Healthy", "dev-1": "Healthy"})
    plugin.start()                 # serve <directory>/<endpoint>, then Register on kubelet.sock
    plugin.set_health("dev-1", "Unhealthy")   # a new ListAndWatch snapshot
    plugin.stop()

As a process (for tests that kill it):  fake_plugin.py --dir DIR --resource R --devices a,b[:numa]

Like a real plugin it watches its own socket and, once it was deleted (kubelet restart), restarts its
server and registers again as soon as kubelet.sock exists (auto_reregister=True).
"""
import argparse
import concurrent.futures
import os
import signal
import sys
import threading
import time

import grpc

import kubelet_emu
from kubelet_emu import pb, pb_grpc


class FakePlugin(pb_grpc.DevicePluginServicer):
    def __init__(self, directory, resource="example.com/dev", devices=None, endpoint="fake.sock",
                 preferred=True, pre_start=False, version="v1beta1", auto_reregister=True,
                 preferred_answer=None, numa=None):
        self.dir = str(directory)
        self.resource = resource
        self.endpoint = endpoint
        self.socket = os.path.join(self.dir, endpoint)
        self.version = version
        self.preferred = preferred
        self.pre_start = pre_start
        self.auto_reregister = auto_reregister
        # preferred_answer(available, must_include, size) -> ids; default: the last `size` ids
        self.preferred_answer = preferred_answer or (
            lambda avail, must, size: list(must) + [i for i in reversed(avail) if i not in must][: size - len(must)])
        self.numa = dict(numa or {})  # id -> NUMA node
        self.devices = dict(devices or {"dev-0": "Healthy", "dev-1": "Healthy"})
        self.cond = threading.Condition()
        self.generation = 0
        self.calls = []  # (method, request) in arrival order
        self.log = []  # (monotonic time, what)
        self.server = None
        self.inode = None
        self.stopping = False
        self.watcher = None
        self.kubelet_inode = None

    # ---- DevicePlugin service ----

    def GetDevicePluginOptions(self, request, context):
        self._record("GetDevicePluginOptions", request)
        return pb.DevicePluginOptions(pre_start_required=self.pre_start,
                                      get_preferred_allocation_available=self.preferred)

    def ListAndWatch(self, request, context):
        self._record("ListAndWatch", request)
        sent = -1
        while context.is_active() and not self.stopping:
            with self.cond:
                if sent == self.generation:
                    self.cond.wait(0.05)
                    continue
                sent = self.generation
                snapshot = pb.ListAndWatchResponse(devices=[self._device(i, h) for i, h in self.devices.items()])
            yield snapshot

    def GetPreferredAllocation(self, request, context):
        self._record("GetPreferredAllocation", request)
        out = pb.PreferredAllocationResponse()
        for r in request.container_requests:
            ids = self.preferred_answer(list(r.available_deviceIDs), list(r.must_include_deviceIDs),
                                        r.allocation_size)
            out.container_responses.add(deviceIDs=ids)
        return out

    def Allocate(self, request, context):
        self._record("Allocate", request)
        out = pb.AllocateResponse()
        for r in request.container_requests:
            for i in r.devices_ids:
                if i not in self.devices:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid request: unknown device {i}")
            c = out.container_responses.add()
            c.envs["FAKE_VISIBLE_DEVICES"] = ",".join(r.devices_ids)
            for i in r.devices_ids:
                c.devices.add(container_path=f"/dev/fake-{i}", host_path=f"/dev/fake-{i}", permissions="rw")
            c.mounts.add(container_path="/fake", host_path="/var/lib/fake", read_only=True)
            c.annotations["cdi.k8s.io/fake"] = ",".join(f"example.com/dev={i}" for i in r.devices_ids)
            for i in r.devices_ids:
                c.cdi_devices.add(name=f"example.com/dev={i}")
        return out

    def PreStartContainer(self, request, context):
        self._record("PreStartContainer", request)
        return pb.PreStartContainerResponse()

    # ---- control ----

    def _device(self, i, health):
        d = pb.Device(ID=i, health=health)
        if i in self.numa:
            d.topology.nodes.add(ID=self.numa[i])
        return d

    def _record(self, method, request):
        with self.cond:
            self.calls.append((method, request))
            self.cond.notify_all()

    def _note(self, what):
        with self.cond:
            self.log.append((time.monotonic(), what))
            self.cond.notify_all()

    def calls_of(self, method):
        with self.cond:
            return [r for m, r in self.calls if m == method]

    def set_health(self, device_id, health):
        with self.cond:
            self.devices[device_id] = health
            self.generation += 1
            self.cond.notify_all()

    def set_devices(self, devices):
        with self.cond:
            self.devices = dict(devices)
            self.generation += 1
            self.cond.notify_all()

    def serve(self):
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix:{self.socket}")
        self.server.start()
        self.inode = _inode(self.socket)
        self._note("serving")

    def register(self, timeout=10):
        """Register on kubelet.sock; raises grpc.RpcError as returned by the kubelet."""
        kubelet_sock = os.path.join(self.dir, kubelet_emu.KUBELET_SOCKET)
        with grpc.insecure_channel(f"unix:{kubelet_sock}") as ch:
            pb_grpc.RegistrationStub(ch).Register(pb.RegisterRequest(
                version=self.version, endpoint=self.endpoint, resource_name=self.resource,
                options=pb.DevicePluginOptions(pre_start_required=self.pre_start,
                                               get_preferred_allocation_available=self.preferred)),
                timeout=timeout)
        self.kubelet_inode = _inode(kubelet_sock)
        self._note("registered")

    def start(self, register=True):
        self.stopping = False
        self.serve()
        if register:
            self.register()
        if self.auto_reregister and self.watcher is None:
            self.watcher = threading.Thread(target=self._watch, daemon=True)
            self.watcher.start()

    def _socket_gone(self):
        return _inode(self.socket) != self.inode

    def _watch(self):
        kubelet_sock = os.path.join(self.dir, kubelet_emu.KUBELET_SOCKET)
        while not self.stopping:
            time.sleep(0.02)
            if not self._socket_gone():
                continue
            self._note("socket-deleted")
            self.server.stop(grace=None).wait(5)
            # Wait for a new kubelet.sock: a dead kubelet leaves its old one behind.
            while not self.stopping and _inode(kubelet_sock) in (None, self.kubelet_inode):
                time.sleep(0.02)
            if self.stopping:
                return
            self.serve()
            deadline = time.monotonic() + 10
            while not self.stopping:
                try:
                    self.register(timeout=2)
                    break
                except grpc.RpcError as e:
                    self._note(f"register-failed {e.code().name}")
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.1)

    def stop(self):
        self.stopping = True
        with self.cond:
            self.cond.notify_all()
        if self.server is not None:
            self.server.stop(grace=None).wait(5)
        if self.watcher is not None:
            self.watcher.join(5)
            self.watcher = None


def _inode(path):
    """Identity of a file: inode numbers alone are recycled at once on tmpfs."""
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_ctime_ns)
    except FileNotFoundError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--resource", default="example.com/dev")
    ap.add_argument("--endpoint", default="fake.sock")
    ap.add_argument("--devices", default="dev-0,dev-1", help="comma list of id[:numa]")
    ap.add_argument("--no-preferred", action="store_true")
    ap.add_argument("--pre-start", action="store_true")
    args = ap.parse_args(argv)
    devices, numa = {}, {}
    for item in args.devices.split(","):
        i, _, n = item.partition(":")
        devices[i] = "Healthy"
        if n:
            numa[i] = int(n)
    plugin = FakePlugin(args.dir, args.resource, devices, args.endpoint, preferred=not args.no_preferred,
                        pre_start=args.pre_start, numa=numa)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    plugin.start()
    print("registered", flush=True)
    done.wait()
    plugin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
