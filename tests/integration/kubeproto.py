# SPDX-License-Identifier: Apache-2.0
"""Python modules for gpuplane's .proto files, generated at test time into a cache directory.

Messages come from Debian's protoc (``--python_out``, matching python3-protobuf); the gRPC service
stubs come from ``grpc_tools.protoc --grpc_python_out``. Debian's grpc-tools (1.14) bundles an old
protoc that rejects proto3 ``optional``, so the stubs are generated from a copy in which
``optional T f = N;`` is written as the equivalent ``oneof _f { T f = N; }`` (the stubs only name
the message classes, which come from the real protoc).

The output lands in ``<cache>/<hash of the inputs>/`` so a changed .proto gets fresh modules and
parallel test processes never see a half-written tree.

    api, api_grpc = kubeproto.load("deviceplugin/v1beta1/api.proto")
    stub = api_grpc.DevicePluginStub(channel)
"""
import hashlib
import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"
PYTHON = "/usr/bin/python3"

OPTIONAL_RE = re.compile(r"^(\s*)optional\s+([\w.]+)\s+(\w+)\s*=\s*(\d+);", re.MULTILINE)


def default_cache():
    """<build>/pyproto, with the build directory from GPUPLANE_BUILD (as conftest.py)."""
    return pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build")) / "pyproto"


def _run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{p.stderr}")


def _generate(import_root, names, out):
    _run(["protoc", f"-I{import_root}", f"--python_out={out}", *names])
    legacy = out / ".legacy-src"
    for name in names:
        copy = legacy / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        text = (import_root / name).read_text()
        copy.write_text(OPTIONAL_RE.sub(r"\1oneof _\3 { \2 \3 = \4; }", text))
    _run([PYTHON, "-m", "grpc_tools.protoc", f"-I{legacy}", f"--grpc_python_out={out}", *names])
    shutil.rmtree(legacy)


def compile_protos(import_root, names, cache=None):
    """Generates modules for the .proto files `names` (relative to `import_root`) and returns the
    directory to put on sys.path. Reuses an earlier result for identical inputs."""
    import_root = pathlib.Path(import_root)
    cache = pathlib.Path(cache or default_cache())
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode() + b"\0" + (import_root / name).read_bytes() + b"\0")
    out = cache / digest.hexdigest()[:16]
    if out.is_dir():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".gen-", dir=cache))
    try:
        _generate(import_root, list(names), tmp)
        os.rename(tmp, out)
    except OSError:
        if not out.is_dir():  # not a lost race with another process
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def module_names(name):
    """("deviceplugin.v1beta1.api_pb2", "deviceplugin.v1beta1.api_pb2_grpc") for a .proto name."""
    stem = name[: -len(".proto")].replace("/", ".")
    return stem + "_pb2", stem + "_pb2_grpc"


def import_generated(directory, name):
    """Imports the (messages, stubs) modules of one .proto from a compile_protos() directory."""
    directory = str(directory)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    return tuple(importlib.import_module(m) for m in module_names(name))


def all_kube_protos():
    """Every .proto under proto/, relative to it."""
    return sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))


def load(name, cache=None):
    """(messages, stubs) modules for one of proto/'s files, e.g. "dra/v1/api.proto"."""
    return import_generated(compile_protos(PROTO_DIR, all_kube_protos(), cache), name)
