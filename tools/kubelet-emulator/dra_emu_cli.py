# SPDX-License-Identifier: Apache-2.0
"""Command line of the DRA half of the kubelet emulator: `kubelet-emu dra ...`."""
import argparse
import json
import signal
import sys
import threading

import dra_emu

EPILOG = """\
Without --prepare / --unprepare it serves: every registration attempt, rejection and
deregistration is printed as a JSON line until interrupted. With them it waits for the driver to
register, makes the calls (prepare first) and prints each call's outcome as a JSON document:
{"method", "driver", "version", "endpoint", "ok", "error", "errors", "code", "seconds",
 "claims": {UID: {"namespace", "name", "requested", "answered", "error", "devices": [...]}}}.
Exit status: 0 when the kubelet would accept every call, 1 when one failed, 2 when the driver did
not register in time."""


def _event_line(ev):
    return json.dumps({"t": round(ev.t, 6), "kind": ev.kind, "driver": ev.driver, **ev.data})


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kubelet-emu dra", description="Kubelet emulator for DRA "
                                 "drivers: plugin watcher (pluginregistration) and DRA client (v1, v1beta1).",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    ap.add_argument("--registrar-dir", default=dra_emu.DEFAULT_REGISTRAR_DIR,
                    help=f"directory to watch for registration sockets (default {dra_emu.DEFAULT_REGISTRAR_DIR})")
    ap.add_argument("--driver", help="driver name to wait for (default: the first that registers)")
    ap.add_argument("--old-kubelet", action="store_true",
                    help="speak only v1beta1.DRAPlugin, as kubelet 1.32/1.33 (default: v1 and v1beta1, as 1.36)")
    ap.add_argument("--services", help="comma-separated DRA services the kubelet speaks, in its order "
                    "of preference (overrides --old-kubelet)")
    ap.add_argument("--version", choices=sorted(dra_emu.DRA_PROTOS),
                    help="call this API version (default: the one chosen at registration)")
    ap.add_argument("--prepare", metavar="NS/NAME/UID[,...]", help="claims for NodePrepareResources")
    ap.add_argument("--unprepare", metavar="NS/NAME/UID[,...]", help="claims for NodeUnprepareResources")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds to wait for the registration (default 30)")
    ap.add_argument("--call-timeout", type=float, default=dra_emu.CALL_TIMEOUT,
                    help=f"deadline of each call (default {dra_emu.CALL_TIMEOUT:g} s, the kubelet's)")
    ap.add_argument("--quiet", action="store_true", help="do not print registration events")
    args = ap.parse_args(argv)

    if args.services:
        services = [s for s in args.services.split(",") if s]
    else:
        services = dra_emu.OLD_KUBELET_SERVICES if args.old_kubelet else dra_emu.KUBELET_SERVICES
    try:
        prepare = dra_emu.parse_claims(args.prepare or "")
        unprepare = dra_emu.parse_claims(args.unprepare or "")
    except ValueError as e:
        ap.error(str(e))

    calls = args.prepare is not None or args.unprepare is not None
    lock = threading.Lock()

    def on_event(ev):
        if args.quiet or ev.kind in ("prepare", "unprepare"):
            return
        # Registration events go to stderr when stdout carries the call results.
        with lock:
            print(_event_line(ev), file=sys.stderr if calls else sys.stdout, flush=True)

    try:
        kubelet = dra_emu.DraKubelet(args.registrar_dir, services=services,
                                     call_timeout=args.call_timeout, on_event=on_event)
    except ValueError as e:
        ap.error(str(e))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        if not calls:
            while not stop.wait(0.5):
                pass
            return 0
        try:
            reg = kubelet.wait_registered(args.driver, timeout=args.timeout)
        except TimeoutError as e:
            print(f"kubelet-emu dra: {e}", file=sys.stderr)
            return 2
        status = 0
        for method, claims in ((kubelet.prepare, prepare if args.prepare is not None else None),
                               (kubelet.unprepare, unprepare if args.unprepare is not None else None)):
            if claims is None:
                continue
            result = method(reg.driver, claims, version=args.version)
            print(json.dumps(result.to_dict(), indent=2), flush=True)
            if not result.ok:
                status = 1
        return status
    finally:
        kubelet.stop()


if __name__ == "__main__":
    sys.exit(main())
