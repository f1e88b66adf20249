# SPDX-License-Identifier: Apache-2.0
"""The Python (grpcio) interop peer: serves or calls the Interop service of interop.proto.

Same command line and output as the Go peer (go/src/interop-peer) and, for `serve` and `call`, the
C peer (rpc-peer), so the tests drive all of them alike:

  peer.py serve --socket PATH
      Serves Interop; prints "ready" once listening. SIGTERM: open Count streams end with OK, then
      the server stops and the process exits 0.
  peer.py call --socket PATH --method Echo|Fail|Sleep|Stats [--path /svc/Method] [--text S]
               [--payload-size N] [--reply-size N] [--code N] [--message S] [--ms N]
               [--timeout-ms N]
      One unary call; prints {"code", "name", "message", "reply"} as one JSON line (reply is null
      unless the code is OK; bytes fields are given as <name>_size).
  peer.py count --socket PATH [--count N] [--interval-ms N] [--streams K] [--cancel-after M]
      K concurrent Count streams on one connection; one JSON line per message
      {"stream", "n"} and one per stream end {"stream", "end": true, "code", "name", "message",
      "received"}. --cancel-after M cancels each stream after its M-th message.
  peer.py many --socket PATH --connections N
      N connections, each connected first, then one Echo each, all at once; prints
      {"ok", "codes"}.
  peer.py bench --socket PATH [--calls N] [--warmup W] [--connections C] [--payload-size B]
                [--time-limit-s S]
      For bench/rpc: C connections (one channel each), W untimed Echo calls on each, then N
      sequential Echo calls of a B-byte payload on each, all connections at once, every call timed
      on the monotonic clock. Prints {"client", "connections", "calls", "errors", "payload_size",
      "seconds", "calls_per_s", "p50_us", "p99_us", "p999_us", "max_us", "mean_us"} (percentiles
      nearest-rank over all timed calls). The time limit ends the run early.

Generated modules come from tests/integration/kubeproto.py (cached under $GPUPLANE_BUILD/pyproto).
"""
import argparse
import faulthandler
import json
import math
import os
import pathlib
import signal
import sys
import threading
import time
from concurrent import futures

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "integration"))

import grpc  # noqa: E402
import kubeproto  # noqa: E402

pb, pb_grpc = kubeproto.import_generated(kubeproto.compile_protos(HERE, ["interop.proto"]),
                                         "interop.proto")

SERVICE = "/gpuplane.interop.Interop/"
CODES = {c.value[0]: c for c in grpc.StatusCode}
MAX_WORKERS = 256


def emit(obj, lock=threading.Lock()):
    """Prints one JSON line, whole, from any thread."""
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


# ---- server ----

class Interop(pb_grpc.InteropServicer):
    """The Interop service; cancels counts calls that ended before their handler returned."""

    def __init__(self, stopping):
        self.stopping = stopping
        self.lock = threading.Lock()
        self.cancels = 0
        self.calls = 0

    def _start(self, context):
        """Counts the call; returns an event set when the call ends and a function the handler
        calls when it is done, so an end before that counts as a cancel."""
        ended = threading.Event()
        handled = threading.Event()

        def on_end():
            if not handled.is_set():
                with self.lock:
                    self.cancels += 1
            ended.set()

        with self.lock:
            self.calls += 1
        context.add_callback(on_end)
        return ended, handled.set

    def Echo(self, request, context):
        _, done = self._start(context)
        payload = b"x" * request.reply_size if request.reply_size else request.payload
        done()
        return pb.EchoReply(text=request.text, payload=payload)

    def Count(self, request, context):
        ended, done = self._start(context)
        n = 0
        try:
            while request.count == 0 or n < request.count:
                if n > 0 and request.interval_ms:
                    self.stopping.wait(request.interval_ms / 1000)
                if self.stopping.is_set() or ended.is_set() or not context.is_active():
                    break
                n += 1
                yield pb.CountReply(n=n)
        finally:
            if not ended.is_set():
                done()

    def Fail(self, request, context):
        _, done = self._start(context)
        done()
        context.abort(CODES.get(request.code, grpc.StatusCode.UNKNOWN), request.message)

    def Sleep(self, request, context):
        ended, done = self._start(context)
        if not ended.wait(request.ms / 1000):
            done()
        return pb.Empty()

    def Stats(self, request, context):
        _, done = self._start(context)
        done()
        with self.lock:
            return pb.StatsReply(cancels=self.cancels, calls=self.calls)


def serve(args):
    stopping = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=MAX_WORKERS))
    pb_grpc.add_InteropServicer_to_server(Interop(stopping), server)
    server.add_insecure_port(f"unix:{args.socket}")
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks on stderr, for hangs
    server.start()
    print("ready", flush=True)
    while not stopping.wait(1):
        pass
    server.stop(grace=5).wait()
    # Leave without the interpreter's exit handlers: grpcio 1.51 sometimes keeps them joining its
    # threads for ~10 s after a stopped server handled a large message.
    sys.stdout.flush()
    os._exit(0)


# ---- client ----

def channel(socket, local=False):
    options = [("grpc.use_local_subchannel_pool", 1)] if local else []
    return grpc.insecure_channel(f"unix:{socket}", options=options)


def reply_dict(msg):
    out = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if isinstance(value, bytes):
            out[field.name + "_size"] = len(value)
        else:
            out[field.name] = value
    return out


def request_for(args):
    """(method name, request, reply class) for `call`."""
    if args.method == "Echo":
        return pb.EchoRequest(text=args.text, payload=b"p" * args.payload_size,
                              reply_size=args.reply_size), pb.EchoReply
    if args.method == "Fail":
        return pb.FailRequest(code=args.code, message=args.message), pb.Empty
    if args.method == "Sleep":
        return pb.SleepRequest(ms=args.ms), pb.Empty
    if args.method == "Stats":
        return pb.Empty(), pb.StatsReply
    raise SystemExit(f"unknown method {args.method}")


def status_dict(code, message):
    return {"code": code.value[0], "name": code.name, "message": message}


def call(args):
    request, reply_type = request_for(args)
    path = args.path or SERVICE + args.method
    with channel(args.socket) as ch:
        fn = ch.unary_unary(path, request_serializer=type(request).SerializeToString,
                            response_deserializer=reply_type.FromString)
        timeout = args.timeout_ms / 1000 if args.timeout_ms else None
        try:
            reply = fn(request, timeout=timeout)
        except grpc.RpcError as e:
            emit({**status_dict(e.code(), e.details() or ""), "reply": None})
            return 0
    emit({**status_dict(grpc.StatusCode.OK, ""), "reply": reply_dict(reply)})
    return 0


def one_stream(stub, index, args):
    received = 0
    it = stub.Count(pb.CountRequest(count=args.count, interval_ms=args.interval_ms))
    try:
        for reply in it:
            received += 1
            emit({"stream": index, "n": reply.n})
            if args.cancel_after and received >= args.cancel_after:
                it.cancel()
        status = status_dict(grpc.StatusCode.OK, "")
    except grpc.RpcError as e:
        status = status_dict(e.code(), e.details() or "")
    emit({"stream": index, "end": True, **status, "received": received})


def count(args):
    with channel(args.socket) as ch:
        stub = pb_grpc.InteropStub(ch)
        threads = [threading.Thread(target=one_stream, args=(stub, i, args))
                   for i in range(args.streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return 0


def many(args):
    channels = [channel(args.socket, local=True) for _ in range(args.connections)]
    codes = {}
    try:
        ready = [grpc.channel_ready_future(ch) for ch in channels]
        for f in ready:
            try:
                f.result(timeout=10)
            except grpc.FutureTimeoutError:
                pass  # the call below reports it
        stubs = [pb_grpc.InteropStub(ch) for ch in channels]
        calls = [s.Echo.future(pb.EchoRequest(text=str(i)), timeout=20) for i, s in enumerate(stubs)]
        for i, f in enumerate(calls):
            try:
                ok = f.result().text == str(i)
                name = "OK" if ok else "WRONG_REPLY"
            except grpc.RpcError as e:
                name = e.code().name
            codes[name] = codes.get(name, 0) + 1
    finally:
        for ch in channels:
            ch.close()
    emit({"ok": codes.get("OK", 0), "codes": codes})
    return 0


def percentile_us(sorted_ns, p):
    """Nearest-rank percentile of sorted nanoseconds, in microseconds."""
    if not sorted_ns:
        return 0.0
    i = min(max(math.ceil(p * len(sorted_ns)) - 1, 0), len(sorted_ns) - 1)
    return sorted_ns[i] / 1e3


def bench(args):
    deadline = time.monotonic() + args.time_limit_s
    channels = [channel(args.socket, local=True) for _ in range(args.connections)]
    request = pb.EchoRequest(payload=b"p" * args.payload_size)
    latencies = [[] for _ in channels]
    errors = []
    try:
        for ch in channels:
            grpc.channel_ready_future(ch).result(timeout=max(deadline - time.monotonic(), 0.1))
        stubs = [pb_grpc.InteropStub(ch) for ch in channels]

        def run(i, n, record):
            echo, out = stubs[i].Echo, latencies[i]
            clock = time.perf_counter_ns  # monotonic
            try:
                for _ in range(n):
                    if time.monotonic() > deadline:
                        break
                    t = clock()
                    reply = echo(request, timeout=30)
                    d = clock() - t
                    if len(reply.payload) != args.payload_size:
                        raise ValueError(f"reply payload {len(reply.payload)} bytes")
                    if record:
                        out.append(d)
            except (grpc.RpcError, ValueError) as e:
                errors.append(str(e))

        def phase(n, record):
            threads = [threading.Thread(target=run, args=(i, n, record))
                       for i in range(len(stubs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        phase(args.warmup, False)
        start = time.perf_counter()
        phase(args.calls, True)
        seconds = time.perf_counter() - start
    finally:
        for ch in channels:
            ch.close()
    for e in errors:
        print("call:", e, file=sys.stderr)
    all_ns = sorted(d for out in latencies for d in out)
    emit({"client": "python", "connections": len(channels), "calls": len(all_ns),
          "errors": len(errors), "payload_size": args.payload_size, "seconds": seconds,
          "calls_per_s": len(all_ns) / seconds if seconds > 0 else 0.0,
          "p50_us": percentile_us(all_ns, 0.50), "p99_us": percentile_us(all_ns, 0.99),
          "p999_us": percentile_us(all_ns, 0.999), "max_us": percentile_us(all_ns, 1),
          "mean_us": sum(all_ns) / len(all_ns) / 1e3 if all_ns else 0.0})
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    for mode in ("serve", "call", "count", "many", "bench"):
        p = sub.add_parser(mode)
        p.add_argument("--socket", required=True)
        if mode == "call":
            p.add_argument("--method", default="Echo")
            p.add_argument("--path")
            p.add_argument("--text", default="")
            p.add_argument("--payload-size", type=int, default=0)
            p.add_argument("--reply-size", type=int, default=0)
            p.add_argument("--code", type=int, default=2)
            p.add_argument("--message", default="")
            p.add_argument("--ms", type=int, default=0)
            p.add_argument("--timeout-ms", type=int, default=0)
        elif mode == "count":
            p.add_argument("--count", type=int, default=3)
            p.add_argument("--interval-ms", type=int, default=10)
            p.add_argument("--streams", type=int, default=1)
            p.add_argument("--cancel-after", type=int, default=0)
        elif mode == "many":
            p.add_argument("--connections", type=int, default=100)
        elif mode == "bench":
            p.add_argument("--calls", type=int, default=10000)
            p.add_argument("--warmup", type=int, default=1000)
            p.add_argument("--connections", type=int, default=1)
            p.add_argument("--payload-size", type=int, default=64)
            p.add_argument("--time-limit-s", type=float, default=120)
    args = ap.parse_args()
    return {"serve": serve, "call": call, "count": count, "many": many,
            "bench": bench}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
