# SPDX-License-Identifier: Apache-2.0
"""`--mock` is a whole simulated node: with no driver root given, `gpuplane dra-driver`,
`gpuplane cdi generate` and `gpuplane device-plugin` make the node's driver root themselves in a
private directory under $TMPDIR (gpuplane-mock-XXXXXX, mode 0700) and remove it when they end, also
on SIGTERM. The specs they write name files under it that exist; device nodes are character
devices (major 195 for /dev/nvidia*) when the test runs as root; an explicit driver root still
wins and then no mock root is made. Each test points TMPDIR at a directory of its own, so what a
process leaves behind is seen."""
import os
import shutil
import signal
import stat
import subprocess

import pytest
import yaml

from conftest import NODES
from dp_harness import plugin  # noqa: F401
from test_cdi import MAKE_ROOT, check_strict, host_paths, validator
from test_dra_driver import DRIVER, Driver, driver_roots, short_dir, wait_until  # noqa: F401

AS_ROOT = os.geteuid() == 0


def mock_roots(tmp):
    return sorted(p for p in tmp.iterdir() if p.name.startswith("gpuplane-mock-"))


def only_mock_root(tmp):
    roots = mock_roots(tmp)
    assert len(roots) == 1, roots
    return roots[0]


def all_host_paths(spec):
    """Host paths of device nodes and mounts, and the hook programs."""
    paths = list(host_paths(spec))
    edits = [d["containerEdits"] for d in spec["devices"]] + [spec.get("containerEdits", {})]
    paths += [h["path"] for e in edits for h in e.get("hooks", [])]
    return paths


def check_under(spec, root):
    paths = all_host_paths(spec)
    assert paths
    for path in paths:
        assert path.startswith(f"{root}/"), path
        assert os.path.lexists(path), path


def check_nodes(spec):
    """Character devices when we may make them: /dev/nvidia<minor> and nvidiactl on major 195."""
    edits = [d["containerEdits"] for d in spec["devices"]] + [spec.get("containerEdits", {})]
    for n in [n for e in edits for n in e.get("deviceNodes", [])]:
        st = os.lstat(n["hostPath"])
        if not AS_ROOT:
            assert stat.S_ISREG(st.st_mode), n
            continue
        assert stat.S_ISCHR(st.st_mode), n
        if n["path"].startswith("/dev/nvidia") and n["path"][len("/dev/nvidia"):].isdigit():
            assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (195, int(n["path"][11:])), n
        if n["path"] == "/dev/nvidiactl":
            assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (195, 255), n


# ---- dra-driver ----


@pytest.fixture
def mock_node(gp, fakekube):
    """A dgx-h100 node started with --mock only, TMPDIR private to it."""
    work = short_dir()
    d = Driver(gp, fakekube, work, None, "dgx-h100")
    d.tmp = work / "tmp"
    d.tmp.mkdir()
    try:
        yield d
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


def test_dra_driver_mock_alone_prepares_a_claim(mock_node):
    d = mock_node
    d.start(env={"TMPDIR": str(d.tmp)})
    d.wait_slices()
    root = only_mock_root(d.tmp)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert f'path="{root}"' in d.log()
    claim = d.claim("a", count=2)
    r = d.prepare(claim)
    uid = claim["metadata"]["uid"]
    assert r.ok, (r.errors, d.log())
    assert len(r.cdi_ids(uid)) == 2
    spec = yaml.safe_load(d.spec_path(uid).read_text())
    check_under(spec, root)
    check_nodes(spec)
    hooks = [h["path"] for h in spec["containerEdits"]["hooks"]]
    assert set(hooks) == {f"{root}/usr/bin/nvidia-cdi-hook"}
    assert os.access(hooks[0], os.X_OK)
    assert d.stop() == 0
    assert mock_roots(d.tmp) == [], "the mock driver root outlived SIGTERM"


def test_dra_driver_crash_leaves_at_most_the_root(mock_node):
    d = mock_node
    d.start(env={"TMPDIR": str(d.tmp)})
    root = only_mock_root(d.tmp)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    assert list(d.tmp.iterdir()) == [root]


def test_dra_driver_explicit_root_wins(gp, fakekube, driver_roots):  # noqa: F811
    work = short_dir()
    tmp = work / "tmp"
    tmp.mkdir()
    root = driver_roots("dgx-h100")
    d = Driver(gp, fakekube, work, root, "dgx-h100")
    try:
        d.start(env={"TMPDIR": str(tmp)})
        d.wait_slices()
        claim = d.claim("a")
        assert d.prepare(claim).ok, d.log()
        spec = yaml.safe_load(d.spec_path(claim["metadata"]["uid"]).read_text())
        for path in host_paths(spec):
            assert path.startswith(f"{root}/"), path
        assert mock_roots(tmp) == []
        assert d.stop() == 0
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)


# ---- cdi generate ----


@pytest.mark.parametrize("profile", ["dgx-h100", "a100-mig"])
def test_cdi_generate_mock_alone(gp, tmp_path, profile):
    tmp, out = tmp_path / "tmp", tmp_path / "cdi"
    tmp.mkdir()
    p = gp.run("cdi", "generate", "--mock", profile, "--output", out, env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    assert "removed when this command ends" in p.stderr
    spec = yaml.safe_load((out / "nvidia.com-gpu.json").read_text())
    validator().validate(spec)
    check_strict(spec)
    paths = all_host_paths(spec)
    root = paths[0][: paths[0].index("/", len(f"{tmp}/"))]
    assert root.startswith(f"{tmp}/gpuplane-mock-")
    assert all(path.startswith(f"{root}/") for path in paths)
    assert mock_roots(tmp) == [], "cdi generate left its mock driver root"


def test_cdi_generate_mock_printed(gp, tmp_path):
    """--output -: the spec on stdout names the mock root's stub hook; no note, nothing left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = gp.run("cdi", "generate", "--mock", "pcie-t4", "--output", "-", "--format", "yaml",
               env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    assert "removed when" not in p.stderr
    spec = yaml.safe_load(p.stdout)
    validator().validate(spec)
    hooks = {h["path"] for h in spec["containerEdits"]["hooks"]}
    (hook,) = hooks
    assert hook.startswith(f"{tmp}/gpuplane-mock-") and hook.endswith("/usr/bin/nvidia-cdi-hook")
    assert list(tmp.iterdir()) == []


def test_cdi_generate_explicit_root_wins(gp, tmp_path):
    tmp, root = tmp_path / "tmp", tmp_path / "root"
    tmp.mkdir()
    subprocess.run([str(MAKE_ROOT), str(NODES / "dgx-h100.yaml"), str(root)], check=True)
    p = gp.run("cdi", "generate", "--mock", "dgx-h100", "--nvidia-driver-root", root, "--output", "-",
               env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    spec = yaml.safe_load(p.stdout)
    for path in host_paths(spec):
        assert path.startswith(f"{root}/"), path
    assert {h["path"] for h in spec["containerEdits"]["hooks"]} == {"/usr/bin/nvidia-cdi-hook"}
    assert list(tmp.iterdir()) == []


# ---- device-plugin ----


def test_device_plugin_cdi_strategy_uses_the_mock_root(plugin, tmp_path):  # noqa: F811
    tmp, specs = tmp_path / "tmp", tmp_path / "cdi"
    tmp.mkdir()
    p = plugin(args=["--device-list-strategy=cdi-cri", "--cdi-spec-dir", specs], env={"TMPDIR": str(tmp)})
    root = only_mock_root(tmp)
    spec = yaml.safe_load((specs / "k8s.device-plugin.nvidia.com-gpu.json").read_text())
    check_under(spec, root)
    check_nodes(spec)
    assert {h["path"] for h in spec["containerEdits"]["hooks"]} == {f"{root}/usr/bin/nvidia-ctk"}
    assert p.stop() == 0
    assert mock_roots(tmp) == [], "the mock driver root outlived SIGTERM"
