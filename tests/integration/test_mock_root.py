# SPDX-License-Identifier: Apache-2.0
"""`--mock` is a whole simulated node: with no driver root given, `gpuplane dra-driver` and
`gpuplane device-plugin` make the node's driver root themselves in a private directory under
$TMPDIR (gpuplane-mock-XXXXXX, mode 0700) and remove it when they end, also on SIGTERM;
`gpuplane cdi generate`, whose spec outlives it, uses a lasting root instead
($TMPDIR/gpuplane-mock-<uid>-<profile>, mode 0700) that later runs reuse and that it refuses when
something else is at that path. The specs name files under the root that exist (for `cdi
generate`, after it has exited); device nodes are character devices (major 195 for /dev/nvidia*)
when the test runs as root; an explicit driver root still wins and then no mock root is made. Each
test points TMPDIR at a directory of its own, so what a process leaves behind is seen, and removes
the lasting roots it made."""
import json
import os
import re
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


# ---- cdi generate: the lasting root ----


@pytest.fixture
def lasting_tmp(tmp_path):
    """A private TMPDIR; the lasting roots made in it are removed at the end (they hold device
    nodes as root, and pytest keeps old tmp_path directories)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    yield tmp
    for root in mock_roots(tmp):
        if root.is_symlink() or not root.is_dir():
            root.unlink()
        else:
            root.chmod(0o700)
            shutil.rmtree(root)


def lasting_root(tmp, name):
    return tmp / f"gpuplane-mock-{os.geteuid()}-{name}"


def generate_mock(gp, tmp, profile, out, *args):
    return gp.run("cdi", "generate", "--mock", profile, "--output", out, *args, env={"TMPDIR": str(tmp)})


@pytest.mark.parametrize("profile", ["dgx-h100", "a100-mig"])
def test_cdi_generate_mock_alone(gp, lasting_tmp, tmp_path, profile):
    """The spec names a root that is still there when the command has exited."""
    tmp, out = lasting_tmp, tmp_path / "cdi"
    p = generate_mock(gp, tmp, profile, out)
    assert p.returncode == 0, p.stderr
    root = lasting_root(tmp, profile)
    assert f"driver root {root}, which stays for later runs; remove it with rm -rf {root}" in p.stderr
    spec = yaml.safe_load((out / "nvidia.com-gpu.json").read_text())
    validator().validate(spec)
    check_strict(spec)
    check_under(spec, root)
    check_nodes(spec)
    assert os.access(f"{root}/usr/bin/nvidia-cdi-hook", os.X_OK)
    st = os.lstat(root)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert mock_roots(tmp) == [root], "a half-built root was left beside the root"


def test_cdi_generate_reuses_its_root(gp, lasting_tmp, tmp_path):
    """Two runs: the same root, not rebuilt, the same spec; its host paths exist after each."""
    tmp, out = lasting_tmp, tmp_path / "cdi"
    root = lasting_root(tmp, "dgx-h100")
    assert generate_mock(gp, tmp, "dgx-h100", out).returncode == 0
    first = (out / "nvidia.com-gpu.json").read_text()
    inodes = (os.lstat(root).st_ino, os.lstat(root / "dev/nvidiactl").st_ino)
    p = generate_mock(gp, tmp, "dgx-h100", out)
    assert p.returncode == 0, p.stderr
    second = (out / "nvidia.com-gpu.json").read_text()
    assert second == first
    assert (os.lstat(root).st_ino, os.lstat(root / "dev/nvidiactl").st_ino) == inodes
    check_under(json.loads(second), root)
    assert mock_roots(tmp) == [root]


def test_cdi_generate_mock_printed(gp, lasting_tmp):
    """--output -: the spec on stdout names the lasting root's stub hook; no note on stderr."""
    tmp = lasting_tmp
    p = gp.run("cdi", "generate", "--mock", "pcie-t4", "--output", "-", "--format", "yaml",
               env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    assert "driver root" not in p.stderr
    spec = yaml.safe_load(p.stdout)
    validator().validate(spec)
    root = lasting_root(tmp, "pcie-t4")
    check_under(spec, root)
    assert {h["path"] for h in spec["containerEdits"]["hooks"]} == {f"{root}/usr/bin/nvidia-cdi-hook"}


def test_cdi_generate_profile_path(gp, lasting_tmp, tmp_path):
    """A profile given as a path: its file name and a hash of the path name the root."""
    tmp = lasting_tmp
    shutil.copy(NODES / "pcie-t4.yaml", tmp_path / "my node.yaml")
    p = gp.run("cdi", "generate", "--mock", tmp_path / "my node.yaml", "--output", "-",
               env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    (root,) = mock_roots(tmp)
    assert re.fullmatch(rf"gpuplane-mock-{os.geteuid()}-my_node-[0-9a-f]{{12}}", root.name), root.name
    check_under(yaml.safe_load(p.stdout), root)


def test_cdi_generate_rebuilds_an_incomplete_root(gp, lasting_tmp, tmp_path):
    """A root without its marker (an older or interrupted run) is built again, not trusted."""
    tmp, out = lasting_tmp, tmp_path / "cdi"
    root = lasting_root(tmp, "pcie-t4")
    root.mkdir(mode=0o700)
    (root / "stale").write_text("")
    p = generate_mock(gp, tmp, "pcie-t4", out)
    assert p.returncode == 0, p.stderr
    assert not (root / "stale").exists()
    check_under(json.loads((out / "nvidia.com-gpu.json").read_text()), root)
    assert mock_roots(tmp) == [root]


@pytest.mark.parametrize("what", ["symlink", "mode", "owner"])
def test_cdi_generate_refuses_what_it_must_not_trust(gp, lasting_tmp, tmp_path, what):
    """Something else at the predictable path: refused, named, left alone, no spec written."""
    tmp, out = lasting_tmp, tmp_path / "cdi"
    root = lasting_root(tmp, "pcie-t4")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if what == "symlink":
        root.symlink_to(elsewhere)
    elif what == "mode":
        root.mkdir(mode=0o700)
        root.chmod(0o755)
    else:
        if not AS_ROOT:
            pytest.skip("needs root to give the directory to another user")
        root.mkdir(mode=0o700)
        os.chown(root, 65534, 65534)
    p = generate_mock(gp, tmp, "pcie-t4", out)
    assert p.returncode == 1, p.stderr
    assert f"the mock driver root {root}" in p.stderr and "refusing to use it" in p.stderr, p.stderr
    assert not out.exists()
    assert list(elsewhere.iterdir()) == []
    assert mock_roots(tmp) == [root]
    if what != "symlink":
        assert list(root.iterdir()) == []


def test_cdi_generate_help_says_how_to_remove_the_root(gp):
    p = gp.run("cdi", "generate", "--help")
    assert p.returncode == 0
    assert "gpuplane-mock-<uid>-<profile>" in p.stdout
    assert 'rm -rf "${TMPDIR:-/tmp}"/gpuplane-mock-$(id -u)-*' in p.stdout


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
