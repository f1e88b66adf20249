# SPDX-License-Identifier: Apache-2.0
"""The kubelet's pod-resources API (v1.PodResourcesLister: List, Get, GetAllocatableResources) on a
unix socket, served by python3-grpcio from a model the test edits: pods with containers holding
device-plugin devices and DRA claim results. It can be stopped (the socket goes away, as when the
kubelet restarts) and started again on the same path.

    emu = PodResourcesEmulator(path).start()
    emu.set_pod("ml", "job-0", {"trainer": {"devices": {"nvidia.com/gpu": ["GPU-..."]}}})
    emu.remove_pod("ml", "job-0")
    emu.stop(); emu.start()

Every call is counted per method (emu.calls) so a test can see how often the exporter asks.
"""
import concurrent.futures
import importlib.util
import os
import pathlib
import sys
import threading

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = "podresources/v1/api.proto"


def _kubeproto():
    helper = ROOT / "tests" / "integration" / "kubeproto.py"
    mod = sys.modules.get("kubeproto")
    if mod is not None and getattr(mod, "__file__", None) == str(helper):
        return mod
    spec = importlib.util.spec_from_file_location("kubeproto", helper)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules.setdefault("kubeproto", mod)
    return mod


pb, pb_grpc = _kubeproto().load(PROTO)


class PodResourcesEmulator:
    def __init__(self, socket_path):
        self.socket = pathlib.Path(socket_path)
        self.lock = threading.Lock()
        self.pods = {}  # (namespace, name) -> {container: {"devices": {res: [ids]}, "claims": [...]}}
        self.allocatable = {}  # resource -> [ids]
        self.calls = {"List": 0, "Get": 0, "GetAllocatableResources": 0}
        self.server = None

    # ---- the model ----

    def set_pod(self, namespace, name, containers):
        """containers: {name: {"devices": {resource: [device ids]},
        "claims": [{"name", "namespace", "driver", "pool", "device"}]}}."""
        with self.lock:
            self.pods[(namespace, name)] = containers

    def remove_pod(self, namespace, name):
        with self.lock:
            self.pods.pop((namespace, name), None)

    def _pod(self, key, containers):
        out = pb.PodResources(name=key[1], namespace=key[0])
        for cname, c in containers.items():
            cr = pb.ContainerResources(name=cname)
            for res, ids in (c.get("devices") or {}).items():
                cr.devices.append(pb.ContainerDevices(resource_name=res, device_ids=list(ids)))
            for cl in c.get("claims") or []:
                dr = pb.DynamicResource(claim_name=cl["name"], claim_namespace=cl["namespace"])
                dr.claim_resources.append(pb.ClaimResource(driver_name=cl["driver"], pool_name=cl["pool"],
                                                           device_name=cl["device"]))
                cr.dynamic_resources.append(dr)
            out.containers.append(cr)
        return out

    # ---- the service ----

    def List(self, request, context):
        with self.lock:
            self.calls["List"] += 1
            return pb.ListPodResourcesResponse(
                pod_resources=[self._pod(k, v) for k, v in sorted(self.pods.items())])

    def Get(self, request, context):
        with self.lock:
            self.calls["Get"] += 1
            key = (request.pod_namespace, request.pod_name)
            if key not in self.pods:
                context.abort(grpc.StatusCode.NOT_FOUND, f"pod {key[0]}/{key[1]} not found")
            return pb.GetPodResourcesResponse(pod_resources=self._pod(key, self.pods[key]))

    def GetAllocatableResources(self, request, context):
        with self.lock:
            self.calls["GetAllocatableResources"] += 1
            return pb.AllocatableResourcesResponse(devices=[
                pb.ContainerDevices(resource_name=r, device_ids=list(ids))
                for r, ids in sorted(self.allocatable.items())])

    # ---- lifecycle ----

    def start(self):
        """Serves on the socket (mode 0600 is the kubelet's; the test runs as the same user)."""
        if self.server is not None:
            return self
        try:
            self.socket.unlink()
        except FileNotFoundError:
            pass
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        handlers = {
            "List": grpc.unary_unary_rpc_method_handler(
                self.List, request_deserializer=pb.ListPodResourcesRequest.FromString,
                response_serializer=pb.ListPodResourcesResponse.SerializeToString),
            "Get": grpc.unary_unary_rpc_method_handler(
                self.Get, request_deserializer=pb.GetPodResourcesRequest.FromString,
                response_serializer=pb.GetPodResourcesResponse.SerializeToString),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                self.GetAllocatableResources,
                request_deserializer=pb.AllocatableResourcesRequest.FromString,
                response_serializer=pb.AllocatableResourcesResponse.SerializeToString),
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("v1.PodResourcesLister", handlers),))
        if server.add_insecure_port(f"unix:{self.socket}") == 0:
            raise RuntimeError(f"cannot listen on {self.socket}")
        server.start()
        os.chmod(self.socket, 0o600)
        self.server = server
        return self

    def stop(self):
        """Stops serving and removes the socket, as a kubelet going down."""
        if self.server is not None:
            self.server.stop(grace=None).wait(5)
            self.server = None
        try:
            self.socket.unlink()
        except FileNotFoundError:
            pass
