# SPDX-License-Identifier: Apache-2.0
"""`gpuplane cdi generate` against the mock NVML library and fake driver roots built by
mock-nvml/make-driver-root.sh: the written spec validates against the real CDI JSON schema (copied
verbatim into schemas/), holds every GPU and MIG device under its index and UUID names plus "all",
points only at files that exist under the driver root, and is written atomically with mode 0644."""
import json
import os
import pathlib
import stat
import subprocess

import jsonschema
import pytest
import yaml

from conftest import NODES, ROOT

SCHEMAS = pathlib.Path(__file__).parent / "schemas"
SPEC_FILE = "nvidia.com-gpu.json"
MAKE_ROOT = ROOT / "mock-nvml" / "make-driver-root.sh"

# The reference library decodes strictly: these are all the fields a spec may have.
SPEC_KEYS = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
DEVICE_KEYS = {"name", "annotations", "containerEdits"}
EDITS_KEYS = {"env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGids", "netDevices"}
NODE_KEYS = {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
MOUNT_KEYS = {"hostPath", "containerPath", "options", "type"}
HOOK_KEYS = {"hookName", "path", "args", "env", "timeout"}


def validator():
    schema = json.loads((SCHEMAS / "cdi-schema.json").read_text())
    defs = json.loads((SCHEMAS / "cdi-schema-defs.json").read_text())
    # The schema refers to its definitions as "defs.json". Debian 12's jsonschema (4.10) predates
    # the referencing library; newer ones deprecate RefResolver.
    try:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7
    except ImportError:
        resolver = jsonschema.RefResolver.from_schema(schema, store={"defs.json": defs})
        return jsonschema.Draft7Validator(schema, resolver=resolver)
    registry = Registry().with_resource("defs.json", Resource.from_contents(defs, DRAFT7))
    return jsonschema.Draft7Validator(schema, registry=registry)


def check_strict(spec):
    assert set(spec) <= SPEC_KEYS
    edits = [d["containerEdits"] for d in spec["devices"]] + [spec.get("containerEdits", {})]
    for d in spec["devices"]:
        assert set(d) <= DEVICE_KEYS
    for e in edits:
        assert set(e) <= EDITS_KEYS
        for n in e.get("deviceNodes", []):
            assert set(n) <= NODE_KEYS
        for m in e.get("mounts", []):
            assert set(m) <= MOUNT_KEYS
        for h in e.get("hooks", []):
            assert set(h) <= HOOK_KEYS


def host_paths(spec):
    edits = [d["containerEdits"] for d in spec["devices"]] + [spec["containerEdits"]]
    for e in edits:
        for n in e.get("deviceNodes", []):
            yield n["hostPath"]
        for m in e.get("mounts", []):
            yield m["hostPath"]


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """A fake driver root per bundled profile, built once."""
    made = {}

    def get(profile):
        if profile not in made:
            root = tmp_path_factory.mktemp(f"root-{profile}")
            subprocess.run([str(MAKE_ROOT), str(NODES / f"{profile}.yaml"), str(root)], check=True)
            made[profile] = root
        return made[profile]

    return get


def generate(gp, profile, root, out, *extra):
    return gp.run("cdi", "generate", "--mock", profile, "--nvidia-driver-root", root,
                  "--output", out, *extra)


def written(gp, profile, root, out, *extra):
    p = generate(gp, profile, root, out, *extra)
    assert p.returncode == 0, p.stderr
    return json.loads((out / SPEC_FILE).read_text())


@pytest.mark.parametrize("profile", ["dgx-h100", "a100-mig", "pcie-t4"])
def test_spec_validates(gp, roots, tmp_path, profile):
    root = roots(profile)
    spec = written(gp, profile, root, tmp_path)
    validator().validate(spec)
    check_strict(spec)
    assert spec["kind"] == "nvidia.com/gpu"
    assert spec["cdiVersion"] == "0.5.0"  # hostPath and names starting with a digit need 0.5.0
    for path in host_paths(spec):
        assert path.startswith(str(root) + "/"), path
        assert os.path.lexists(path), path


def test_dgx_h100_devices(gp, roots, tmp_path):
    root = roots("dgx-h100")
    spec = written(gp, "dgx-h100", root, tmp_path)
    info = gp.json("info", "--mock", "dgx-h100", "--json")
    devices = {d["name"]: d["containerEdits"] for d in spec["devices"]}
    assert len(info["gpus"]) == 8
    for g in info["gpus"]:
        node = {"path": f"/dev/nvidia{g['minor']}", "hostPath": f"{root}/dev/nvidia{g['minor']}"}
        assert devices[str(g["index"])]["deviceNodes"] == [node]
        assert devices[g["uuid"]]["deviceNodes"] == [node]
    assert len(devices) == 8 * 2 + 1
    assert sorted(n["path"] for n in devices["all"]["deviceNodes"]) == sorted(
        f"/dev/nvidia{i}" for i in range(8))
    edits = spec["containerEdits"]
    assert "NVIDIA_VISIBLE_DEVICES=void" in edits["env"]
    assert [n["path"] for n in edits["deviceNodes"]] == [
        "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
    mounts = {m["containerPath"]: m for m in edits["mounts"]}
    lib = "/usr/lib/x86_64-linux-gnu"
    for name in ("libnvidia-ml.so.550.54.15", "libcuda.so.550.54.15", "/usr/bin/nvidia-smi"):
        path = name if name.startswith("/") else f"{lib}/{name}"
        assert mounts[path]["hostPath"] == f"{root}{path}"
        assert "ro" in mounts[path]["options"]
    # Symlinks (libcuda.so.1) are made in the container by the hooks, not mounted.
    assert f"{lib}/libcuda.so.1" not in mounts
    args = [h["args"] for h in edits["hooks"]]
    assert ["nvidia-cdi-hook", "create-symlinks", "--link", f"libcuda.so.1::{lib}/libcuda.so"] in args
    assert ["nvidia-cdi-hook", "update-ldcache", "--folder", lib] in args
    assert all(h["hookName"] == "createContainer" for h in edits["hooks"])


def test_a100_mig_devices(gp, roots, tmp_path):
    root = roots("a100-mig")
    spec = written(gp, "a100-mig", root, tmp_path)
    info = gp.json("info", "--mock", "a100-mig", "--json")
    devices = {d["name"]: d["containerEdits"] for d in spec["devices"]}
    n_migs = 0
    for g in info["gpus"]:
        assert str(g["index"]) in devices and g["uuid"] in devices
        for m, mig in enumerate(g["migDevices"]):
            n_migs += 1
            by_index = devices[f"{g['index']}:{m}"]
            assert devices[mig["uuid"]] == by_index
            paths = [n["path"] for n in by_index["deviceNodes"]]
            assert paths[0] == f"/dev/nvidia{g['minor']}"
            assert len(paths) == 3 and all(p.startswith("/dev/nvidia-caps/nvidia-cap") for p in paths[1:])
            for n in by_index["deviceNodes"]:
                assert os.path.exists(n["hostPath"])
    assert n_migs == 7
    assert len(devices) == (4 + n_migs) * 2 + 1
    all_paths = {n["path"] for n in devices["all"]["deviceNodes"]}
    assert all(n["path"] in all_paths for e in devices.values() for n in e["deviceNodes"])


def test_file_mode_and_atomic(gp, roots, tmp_path):
    root = roots("pcie-t4")
    (tmp_path / "other-vendor.json").write_text("{}")
    for _ in range(2):  # the second run replaces the file
        p = generate(gp, "pcie-t4", root, tmp_path)
        assert p.returncode == 0, p.stderr
        assert f"wrote {tmp_path}/{SPEC_FILE}" in p.stdout
    assert sorted(os.listdir(tmp_path)) == [SPEC_FILE, "other-vendor.json"]
    assert stat.S_IMODE(os.stat(tmp_path / SPEC_FILE).st_mode) == 0o644


def test_output_dir_created(gp, roots, tmp_path):
    out = tmp_path / "var" / "run" / "cdi"
    p = generate(gp, "pcie-t4", roots("pcie-t4"), out, "--format", "yaml", "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["path"] == str(out / "nvidia.com-gpu.yaml")
    assert summary["cdiVersion"] == "0.5.0"
    assert summary["devices"][-1] == "all" and len(summary["devices"]) == 9
    validator().validate(yaml.safe_load((out / "nvidia.com-gpu.yaml").read_text()))


def test_stdout_yaml_matches_json(gp, roots, tmp_path):
    root = roots("a100-mig")
    spec = written(gp, "a100-mig", root, tmp_path)
    p = generate(gp, "a100-mig", root, "-", "--format", "yaml")
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(p.stdout) == spec
    assert os.listdir(tmp_path) == [SPEC_FILE]


def test_strategies_and_kind(gp, roots, tmp_path):
    p = generate(gp, "a100-mig", roots("a100-mig"), "-", "--device-name-strategy", "type-index",
                 "--vendor", "k8s.device-plugin.nvidia.com", "--no-all-device")
    assert p.returncode == 0, p.stderr
    spec = json.loads(p.stdout)
    names = [d["name"] for d in spec["devices"]]
    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    assert names[:2] == ["gpu0", "mig0:0"] and "all" not in names
    assert names.count("gpu3") == 1


def test_driver_root_from_profile(gp, roots, tmp_path):
    """With --mock and no --nvidia-driver-root, the profile's driverRoot (relative to the profile)
    is the driver root."""
    root = roots("pcie-t4")
    profile = yaml.safe_load((NODES / "pcie-t4.yaml").read_text())
    profile["driverRoot"] = os.path.relpath(root, tmp_path)
    (tmp_path / "node.yaml").write_text(yaml.safe_dump(profile))
    out = tmp_path / "out"
    p = gp.run("cdi", "generate", "--mock", tmp_path / "node.yaml", "--output", out)
    assert p.returncode == 0, p.stderr
    spec = json.loads((out / SPEC_FILE).read_text())
    assert all(path.startswith(str(root) + "/") for path in host_paths(spec))


def test_output_is_a_file(gp, roots, tmp_path):
    target = tmp_path / "afile"
    target.write_text("keep")
    p = generate(gp, "pcie-t4", roots("pcie-t4"), target)
    assert p.returncode == 1
    assert f"--output {target} is not a directory" in p.stderr
    assert target.read_text() == "keep"
    assert os.listdir(tmp_path) == ["afile"]


def test_output_looks_like_a_file_name(gp, roots, tmp_path):
    p = generate(gp, "pcie-t4", roots("pcie-t4"), tmp_path / "nvidia.yaml")
    assert p.returncode == 1
    assert "looks like a file name" in p.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("root,message", [
    ("relative/root", "must be an absolute path"),
    ("/nonexistent-gpuplane-root", "No such file or directory"),
    ("/tmp/../tmp", "must not contain"),
])
def test_bad_driver_root(gp, tmp_path, root, message):
    p = generate(gp, "pcie-t4", root, tmp_path)
    assert p.returncode == 1
    assert message in p.stderr
    assert os.listdir(tmp_path) == []


def test_root_without_driver(gp, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    p = generate(gp, "pcie-t4", empty, tmp_path / "out")
    assert p.returncode == 1
    assert "no libraries of driver 550.54.15" in p.stderr
    assert not (tmp_path / "out").exists()


def test_lost_gpu_left_out(gp, roots, tmp_path):
    p = generate(gp, "lost-gpu", roots("lost-gpu"), "-")
    assert p.returncode == 0, p.stderr
    assert "left out: GPU is lost" in p.stderr
    names = [d["name"] for d in json.loads(p.stdout)["devices"]]
    assert "5" not in names and "4" in names and "6" in names


def test_help_and_usage(gp):
    p = gp.run("cdi", "generate", "--help")
    assert p.returncode == 0
    for text in ("--output", "--nvidia-driver-root", "--device-name-strategy", "Examples:"):
        assert text in p.stdout
    p = gp.run("cdi", "--help")
    assert p.returncode == 0 and "generate" in p.stdout
    assert gp.run("cdi").returncode == 2
    assert gp.run("cdi", "frobnicate").returncode == 2
    p = gp.run("cdi", "generate", "--device-name-strategy", "serial")
    assert p.returncode == 2 and "invalid device name strategy" in p.stderr
    p = gp.run("cdi", "generate", "--format", "toml")
    assert p.returncode == 2
    p = gp.run("cdi", "generate", "--output", "-", "--json")
    assert p.returncode == 2
    assert "cdi" in gp.run("--help").stdout
