# SPDX-License-Identifier: Apache-2.0
"""The ResourceSlices gpuplane's DRA driver publishes are valid resource.k8s.io/v1 and are what the
examples show.

dra_slices_build runs on each bundled mock node profile through the small test program
tests/dra-slices-dump (built from tests/unit/draplugin/dra-slices-dump.c), with a scratch sysfs tree
giving each GPU the PCIe root the example assumes. Every slice is checked against the official
OpenAPI document (strict: unknown fields rejected) and the API-validation rules the schema cannot
express (check_slice of test_dra_examples.py), and must equal examples/dra/slices-<node>.yaml.
Needs python3-jsonschema and python3-yaml and a build with the mock NVML library.
"""
import json
import os
import pathlib
import subprocess

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("jsonschema")

from openapi_schema import load_components, validator  # noqa: E402
from test_dra_examples import check_slice  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODES = ROOT / "examples" / "nodes"
EXAMPLES = ROOT / "examples" / "dra"
BUILD = pathlib.Path(os.environ.get("GPUPLANE_BUILD", ROOT / "build"))
DUMP = BUILD / "tests" / "dra-slices-dump"

# profile -> (node name, the example whose PCIe roots the scratch sysfs reproduces, compared?)
PROFILES = {
    "dgx-h100": ("dgx-h100-0", "slices-dgx-h100-0.yaml", True),
    "a100-mig": ("a100-mig-0", "slices-a100-mig-0.yaml", True),
    "pcie-t4": ("pcie-t4-0", "slices-pcie-t4-0.yaml", True),
    # the DGX with GPU 5 lost: same buses as dgx-h100, no example of its own
    "lost-gpu": ("lost-gpu-0", "slices-dgx-h100-0.yaml", False),
}


@pytest.fixture(scope="module")
def dump_tool():
    if not DUMP.exists():
        pytest.skip(f"{DUMP} is not built (a build with the mock NVML library)")
    return DUMP


def _example(name):
    return [o for o in yaml.safe_load_all((EXAMPLES / name).read_text()) if o]


def _roots(objs):
    """pciBusID -> pcieRoot of every device of the example."""
    out = {}
    for obj in objs:
        for d in obj["spec"].get("devices", []):
            a = d.get("attributes", {})
            bus = a.get("resource.kubernetes.io/pciBusID", {}).get("string")
            root = a.get("resource.kubernetes.io/pcieRoot", {}).get("string")
            if bus and root:
                out[bus] = root
    return out


def _sysfs(tmp_path, roots):
    """A sysfs tree where /sys/bus/pci/devices/<bdf> links under /sys/devices/<root>/... ."""
    devs = tmp_path / "sys" / "bus" / "pci" / "devices"
    devs.mkdir(parents=True)
    for bdf, root in roots.items():
        (devs / bdf).symlink_to(f"../../../devices/{root}/{root[3:]}:01.0/{bdf}")
    return tmp_path


def _dump(tool, profile, node, sysfs, *unhealthy):
    p = subprocess.run([str(tool), str(NODES / f"{profile}.yaml"), node, str(sysfs), *map(str, unhealthy)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _assert_valid(slices):
    components = load_components()
    v = validator(components, "ResourceSlice")
    for s in slices:
        errors = sorted(v.iter_errors(s), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)
        check_slice(s["spec"])
    counts = {s["spec"]["pool"]["resourceSliceCount"] for s in slices}
    assert counts == {len(slices)}
    names = [d["name"] for s in slices for d in s["spec"].get("devices", [])]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_slices_are_valid(profile, dump_tool, tmp_path):
    node, example, _ = PROFILES[profile]
    slices = _dump(dump_tool, profile, node, _sysfs(tmp_path, _roots(_example(example))))
    assert slices
    _assert_valid(slices)
    for s in slices:
        assert s["spec"]["pool"]["name"] == node and s["spec"]["nodeName"] == node
        assert s["spec"]["driver"] == "gpu.nvidia.com"


@pytest.mark.parametrize("profile", sorted(p for p, v in PROFILES.items() if v[2]))
def test_slices_match_the_examples(profile, dump_tool, tmp_path):
    node, example, _ = PROFILES[profile]
    want = _example(example)
    got = _dump(dump_tool, profile, node, _sysfs(tmp_path, _roots(want)))
    assert got == want, f"examples/dra/{example} differs from what the driver publishes"


def test_unhealthy_devices_are_tainted_and_valid(dump_tool, tmp_path):
    slices = _dump(dump_tool, "a100-mig", "a100-mig-0", _sysfs(tmp_path, {}), 0, 3)
    _assert_valid(slices)
    tainted = {d["name"] for s in slices for d in s["spec"]["devices"] if d.get("taints")}
    assert tainted == {"gpu-0-mig-3g20gb-9-4", "gpu-0-mig-2g10gb-14-0", "gpu-0-mig-1g5gb-19-2",
                       "gpu-0-mig-1g5gb-19-3", "gpu-3"}
    for s in slices:
        for d in s["spec"]["devices"]:
            assert d.get("taints", [None])[0] in (None, {"key": "gpu.nvidia.com/unhealthy", "effect": "NoSchedule"})
            # no sysfs: the root is left out, not guessed
            assert "resource.kubernetes.io/pcieRoot" not in d["attributes"]


def test_lost_gpu_is_left_out(dump_tool, tmp_path):
    profile = yaml.safe_load((NODES / "lost-gpu.yaml").read_text())
    lost = profile["gpus"][5]["uuid"]
    slices = _dump(dump_tool, "lost-gpu", "lost-gpu-0", _sysfs(tmp_path, {}))
    devices = [d for s in slices for d in s["spec"]["devices"]]
    assert len(devices) == 7
    assert lost not in {d["attributes"]["uuid"]["string"] for d in devices}
