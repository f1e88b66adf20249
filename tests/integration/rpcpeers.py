# SPDX-License-Identifier: Apache-2.0
"""Running the gRPC interop peers (tests/interop) from tests: the C peer on src/rpc (rpc-peer), the
Python peer (grpcio) and the Go peer (grpc-go). All three share one command line (see
tests/interop/peer.py) and print JSON lines.

Every process is started through a Procs, which remembers it by PID and kills what is still running
at teardown. Waiting is always a poll with a deadline.
"""
import json
import os
import pathlib
import select
import signal
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build"))  # as conftest.py
INTEROP = ROOT / "tests" / "interop"
PYTHON = "/usr/bin/python3"
IMPLS = ("c", "python", "go")


def build_go_peer(build, timeout=300):
    """Builds (or finds up to date) the Go peer under the build dir; returns its path."""
    p = subprocess.run([str(INTEROP / "build-go-peer.sh"), str(build)], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"build-go-peer.sh failed:\n{p.stdout}{p.stderr}")
    return pathlib.Path(p.stdout.strip().splitlines()[-1])


# What build-go-peer.sh needs (scripts/install-deps.sh installs them): programs, and Go packages of
# Debian's GOPATH tree.
GO_PROGRAMS = ("go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc")
GO_PACKAGES = ("google.golang.org/grpc", "google.golang.org/protobuf")


def go_missing():
    """Why the Go peers cannot be built here (a missing program or Debian Go package), or None."""
    import shutil
    missing = [p for p in GO_PROGRAMS if shutil.which(p) is None]
    missing += [p for p in GO_PACKAGES if not pathlib.Path("/usr/share/gocode/src", p).is_dir()]
    if missing:
        return "not installed (scripts/install-deps.sh installs them): " + ", ".join(missing)
    return None


def build_go_dra_kubelet(build, timeout=300):
    """Builds (or finds up to date) the grpc-go DRA kubelet (tests/interop/go/dra-kubelet) under the
    build dir; returns its path."""
    p = subprocess.run([str(INTEROP / "build-go-peer.sh"), str(build), "dra-kubelet"],
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"build-go-peer.sh dra-kubelet failed:\n{p.stdout}{p.stderr}")
    return pathlib.Path(p.stdout.strip().splitlines()[-1])


class LineReader:
    """Reads whole lines from a pipe with a deadline, without blocking past it."""

    def __init__(self, pipe):
        self.fd = pipe.fileno()
        self.buf = b""
        self.eof = False

    def readline(self, timeout):
        """The next line (without the newline), or None at end of file. TimeoutError if no whole
        line arrives in time."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                if not self.buf:
                    return None
                line, self.buf = self.buf, b""
                return line.decode()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no line within {timeout} s (have {self.buf!r})")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 65536)
                self.buf += chunk
                self.eof = not chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


class Process:
    """A started peer: the Popen, a line reader on its stdout, its stderr log file."""

    def __init__(self, popen, log):
        self.popen = popen
        self.pid = popen.pid
        self.log = log
        self.out = LineReader(popen.stdout)

    def json_line(self, timeout=10):
        line = self.out.readline(timeout)
        return None if line is None else json.loads(line)

    def wait(self, timeout=10):
        return self.popen.wait(timeout=timeout)

    def signal(self, signo):
        os.kill(self.pid, signo)

    def alive(self):
        return self.popen.poll() is None

    def stderr(self):
        return self.log.read_text(errors="replace")


class Procs:
    """Starts peers and remembers them; kill_all() (teardown) kills the ones still running."""

    def __init__(self, build, tmp, go_peer=None):
        self.build = pathlib.Path(build)
        self.tmp = pathlib.Path(tmp)
        self.go_peer = go_peer
        self.started = []
        self.env = dict(os.environ, GPUPLANE_BUILD=str(self.build))

    def argv(self, impl, mode, *args):
        if impl == "c":
            binary = self.build / "tests" / "rpc-peer"
            if not binary.exists():
                raise RuntimeError(f"{binary} is not built (add_subdirectory(tests/interop))")
            cmd = [str(binary)]
        elif impl == "python":
            cmd = [PYTHON, str(INTEROP / "peer.py")]
        elif impl == "go":
            if self.go_peer is None:
                raise RuntimeError("the Go peer was not built")
            cmd = [str(self.go_peer)]
        else:
            raise ValueError(impl)
        return cmd + [mode] + [str(a) for a in args]

    def start(self, impl, mode, *args):
        log = self.tmp / f"{impl}-{mode}-{len(self.started)}.stderr"
        with open(log, "wb") as err:
            popen = subprocess.Popen(self.argv(impl, mode, *args), stdout=subprocess.PIPE,
                                     stderr=err, stdin=subprocess.DEVNULL, env=self.env)
        proc = Process(popen, log)
        self.started.append(proc)
        return proc

    def run(self, impl, mode, *args, timeout=30):
        """Runs a client to completion; returns its JSON lines (asserting it exited 0)."""
        proc = self.start(impl, mode, *args)
        lines = []
        deadline = time.monotonic() + timeout
        while (line := proc.out.readline(max(deadline - time.monotonic(), 0.01))) is not None:
            lines.append(json.loads(line))
        rc = proc.wait(timeout=max(deadline - time.monotonic(), 1))
        assert rc == 0, f"{impl} {mode} exited {rc}: {proc.stderr()}"
        return lines

    def call(self, impl, socket, *args, timeout=30):
        """One unary call: the {"code", "name", "message", "reply"} object."""
        lines = self.run(impl, "call", "--socket", socket, *args, timeout=timeout)
        assert len(lines) == 1, lines
        return lines[0]

    def serve(self, impl, socket, timeout=15):
        """Starts a server and waits for its "ready" line."""
        proc = self.start(impl, "serve", "--socket", socket)
        try:
            line = proc.out.readline(timeout)
        except TimeoutError:
            line = None
        if line != "ready":
            raise RuntimeError(f"{impl} server did not get ready ({line!r}): {proc.stderr()}")
        proc.socket = socket
        return proc

    def kill_all(self):
        for proc in self.started:
            if proc.popen.poll() is None:
                proc.signal(signal.SIGKILL)
            try:
                proc.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            proc.popen.stdout.close()


def poll(fn, timeout=10, interval=0.05, what="condition"):
    """Calls fn until it returns something true; returns that, or fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
