# SPDX-License-Identifier: Apache-2.0
"""The per-claim CDI specs of the DRA driver against the real CDI JSON schema: the unit test
test-dra-cdi writes claims' specs on the mock A100 MIG node (one with MPS sharing on a MIG device)
and, with DRA_CDI_SPEC_OUT set, copies each into that directory; every copy must validate, carry only
the fields the reference library's strict decoder knows, and name its devices "<claim UID>-<device>"
under the kind k8s.gpu.nvidia.com/claim."""
import os
import re
import subprocess

import pytest
import yaml

from conftest import BUILD
from test_cdi import check_strict, validator

UNIT = BUILD / "tests" / "test-dra-cdi"
KIND = "k8s.gpu.nvidia.com/claim"
UID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
DEVICE = re.compile(UID + r"-gpu-[0-9]+(-mig-[a-z0-9-]+)?")


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    if not UNIT.exists():
        pytest.skip(f"{UNIT} not built (needs the mock NVML library)")
    out = tmp_path_factory.mktemp("dra-cdi")
    env = dict(os.environ, DRA_CDI_SPEC_OUT=str(out))
    run = subprocess.run([str(UNIT)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    files = sorted(out.glob("*.yaml"))
    assert len(files) >= 2, files
    return {f.name: yaml.safe_load(f.read_text()) for f in files}


def test_specs_validate(specs):
    v = validator()
    for name, spec in specs.items():
        errors = sorted(v.iter_errors(spec), key=str)
        assert not errors, f"{name}: {errors[0]}"
        check_strict(spec)


def test_names_and_kind(specs):
    for name, spec in specs.items():
        assert spec["kind"] == KIND, name
        names = [d["name"] for d in spec["devices"]]
        assert names and len(names) == len(set(names)), name
        for n in names:
            assert DEVICE.fullmatch(n), f"{name}: {n}"
        # One claim per file: every device carries the same UID.
        assert len({n[:36] for n in names}) == 1, name


def test_mps_edits(specs):
    spec = specs["claim-mig-mps.yaml"]
    mig = [d for d in spec["devices"] if "-mig-" in d["name"]]
    assert len(mig) == 1
    edits = mig[0]["containerEdits"]
    assert edits["env"] == ["CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"]
    assert [m["containerPath"] for m in edits["mounts"]] == ["/tmp/nvidia-mps", "/dev/shm"]
    full = [d for d in spec["devices"] if "-mig-" not in d["name"]]
    assert "env" not in full[0]["containerEdits"]
