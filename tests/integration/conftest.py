# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the gpuplane binary of the build under test, run as a user would run it."""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build"))
NODES = ROOT / "examples" / "nodes"


class Gpuplane:
    def __init__(self, build):
        self.binary = build / "gpuplane"
        self.mock_lib = build / "mock-nvml" / "libnvidia-ml.so.1"
        if not self.binary.exists():
            raise RuntimeError(f"{self.binary} is not built")

    def run(self, *args, env=None, timeout=60):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
        full_env.update(env or {})
        return subprocess.run([str(self.binary), *map(str, args)], capture_output=True, text=True,
                              env=full_env, timeout=timeout)

    def json(self, *args, env=None):
        p = self.run(*args, env=env)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)


@pytest.fixture(scope="session")
def gp():
    return Gpuplane(BUILD)


@pytest.fixture
def fakekube(tmp_path):
    """A fake Kubernetes API server (fakekube.py) with its kubeconfigs under tmp_path/kube; bookmarks
    every 0.2 s. The test fails at teardown if a request was rejected 422 Invalid outside
    fakekube.expect_invalid(), or if an emulated controller (garbage collector, DaemonSets) failed."""
    from fakekube import FakeKube
    fk = FakeKube(tmp_path / "kube", bookmark_interval=0.2).start()
    try:
        yield fk
    finally:
        fk.stop()
    bad = fk.unexpected_violations()
    if bad:
        pytest.fail("requests the API server rejected as invalid:\n" + "\n".join(
            f"  {v['method']} {v['path']}: {v['message']}" for v in bad), pytrace=False)
    if fk.controller_errors:
        pytest.fail("the emulated controllers failed: " + "; ".join(fk.controller_errors), pytrace=False)
