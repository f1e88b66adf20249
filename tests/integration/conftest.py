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
