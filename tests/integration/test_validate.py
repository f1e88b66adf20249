# SPDX-License-Identifier: Apache-2.0
"""`gpuplane validate` through the binary: the operator validator's checks and status files.

driver on the mock profiles (the bundled DGX H100 passes; a lost GPU and a missing library fail with
the reason), from a host root and from a driver container's root built by make-driver-root.py, with
WITH_WAIT=true until the driver appears, and behind the operator's driver container readiness file;
toolkit with a CDI spec written by `gpuplane cdi generate --mock` and with containerd's handler, and
without either; plugin against fakekube (a node with and without allocatable nvidia.com/gpu, GPUs
that appear later, ResourceSlices of the DRA driver, a missing node), in-cluster and through a
kubeconfig; cuda on healthy and broken profiles; wait (a file that appears later ends it at once, a
timeout, bad names); cleanup; NVIDIA's variables instead of arguments; usage errors and --help.
"""
import copy
import os
import pathlib
import stat
import subprocess
import time

import pytest
import yaml

from conftest import NODES, ROOT

MAKE_ROOT = ROOT / "mock-nvml" / "make-driver-root.py"
DRIVER_KEYS = ["IS_HOST_DRIVER", "NVIDIA_DRIVER_ROOT", "DRIVER_ROOT_CTR_PATH", "NVIDIA_DEV_ROOT",
               "DEV_ROOT_CTR_PATH"]


def body(path):
    """driver-ready as a dict, checking NVIDIA's keys in NVIDIA's order."""
    lines = path.read_text().splitlines()
    assert [line.split("=", 1)[0] for line in lines] == DRIVER_KEYS
    return dict(line.split("=", 1) for line in lines)


def entries(d):
    return sorted(p.name for p in pathlib.Path(d).iterdir())


def driver_root(gp, directory, profile="dgx-h100"):
    p = subprocess.run(["/usr/bin/python3", str(MAKE_ROOT), str(NODES / f"{profile}.yaml"), str(directory),
                        "--mock-lib", str(gp.mock_lib)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return pathlib.Path(directory)


def profile_env(profile="dgx-h100"):
    return {"MOCK_NVML_PROFILE": str(NODES / f"{profile}.yaml")}


# --- driver --------------------------------------------------------------------------------------


def test_driver_on_the_mock(gp, tmp_path):
    out = tmp_path / "run" / "validations"
    p = gp.run("validate", "driver", "--mock", "dgx-h100", "--output-dir", out)
    assert p.returncode == 0, p.stderr
    assert "the NVIDIA driver is ready" in p.stderr and 'gpus=8' in p.stderr
    assert body(out / "driver-ready") == {
        "IS_HOST_DRIVER": "true", "NVIDIA_DRIVER_ROOT": "/", "DRIVER_ROOT_CTR_PATH": "/host",
        "NVIDIA_DEV_ROOT": "/", "DEV_ROOT_CTR_PATH": "/host"}
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "driver-ready").stat().st_mode) == 0o644
    assert entries(out) == ["driver-ready"], "no temporary file may be left"


@pytest.mark.parametrize("args,why", [
    (["--mock", "lost-gpu"], "GPU 5"),
    (["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"], "NVML library not found"),
])
def test_driver_fails_with_the_reason(gp, tmp_path, args, why):
    (tmp_path / "driver-ready").write_text("IS_HOST_DRIVER=true\n")
    p = gp.run("validate", "driver", *args, "-o", tmp_path)
    assert p.returncode == 1, p.stderr
    assert "gpuplane validate driver: not ready" in p.stderr and why in p.stderr
    if "lost" in args[1]:
        assert "GPU is lost" in p.stderr
    assert not (tmp_path / "driver-ready").exists(), "a failed check leaves no status file"


def test_driver_from_the_driver_container(gp, tmp_path):
    root = driver_root(gp, tmp_path / "driver")
    host = tmp_path / "host"
    host.mkdir()
    p = gp.run("validate", "driver", "-o", tmp_path / "v", "--host-root-ctr-path", host,
               "--driver-install-dir-ctr-path", root, env=profile_env())
    assert p.returncode == 0, p.stderr
    assert "host_driver=false" in p.stderr
    # make-driver-root lays out dev/: the device nodes are the driver container's (NVIDIA's rule)
    assert body(tmp_path / "v" / "driver-ready") == {
        "IS_HOST_DRIVER": "false", "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver",
        "DRIVER_ROOT_CTR_PATH": "/driver-root", "NVIDIA_DEV_ROOT": "/run/nvidia/driver",
        "DEV_ROOT_CTR_PATH": "/driver-root"}


def test_driver_from_the_host(gp, tmp_path):
    root = driver_root(gp, tmp_path / "host")
    p = gp.run("validate", "driver", "-o", tmp_path / "v", env={
        **profile_env("pcie-t4"), "HOST_ROOT_CTR_PATH": str(root), "HOST_ROOT": "/",
        "DRIVER_INSTALL_DIR_CTR_PATH": str(tmp_path / "none")})
    assert p.returncode == 0, p.stderr
    assert "gpus=4" in p.stderr
    assert body(tmp_path / "v" / "driver-ready")["IS_HOST_DRIVER"] == "true"


def test_driver_not_found(gp, tmp_path):
    p = gp.run("validate", "driver", "-o", tmp_path, "--host-root-ctr-path", tmp_path / "h",
               "--driver-install-dir-ctr-path", tmp_path / "d")
    assert p.returncode == 1
    assert "no NVIDIA driver found" in p.stderr


def test_driver_with_wait_until_the_driver_appears(gp, tmp_path):
    """WITH_WAIT=true: the check runs again every sleep interval until the driver container's root
    holds the driver."""
    built = driver_root(gp, tmp_path / "built")
    host = tmp_path / "host"
    host.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
    env.update(profile_env(), WITH_WAIT="true", SLEEP_INTERVAL_SECONDS="0.1", COMPONENT="driver",
               OUTPUT_DIR=str(tmp_path / "v"), HOST_ROOT_CTR_PATH=str(host),
               DRIVER_INSTALL_DIR_CTR_PATH=str(tmp_path / "driver"))
    proc = subprocess.Popen([str(gp.binary), "validate"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (tmp_path / "v").exists():
            time.sleep(0.02)
        assert proc.poll() is None, "it must keep trying"
        (tmp_path / "driver").symlink_to(built)
        rc = proc.wait(timeout=15)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, err
    assert "not ready; trying again" in err
    assert (tmp_path / "v" / "driver-ready").exists()


def test_driver_waits_for_the_operators_driver_container(gp, tmp_path, fakekube):
    """A driver DaemonSet controlled by a ClusterPolicy: its .driver-ctr-ready must exist first."""
    try:
        fakekube.resource("daemonsets")
    except KeyError:
        pytest.skip("this fakekube does not serve DaemonSets")
    fakekube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    fakekube.put({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nvidia-driver-daemonset", "namespace": "gpu-operator",
                     "labels": {"app.kubernetes.io/component": "nvidia-driver"},
                     "ownerReferences": [{"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                          "name": "cluster-policy", "uid": "0b0a6f6e-1111-4c1e-9c1e-000000000001",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
                 "template": {"metadata": {"labels": {"app": "nvidia-driver-daemonset"}},
                              "spec": {"containers": [{"name": "nvidia-driver-ctr",
                                                       "image": "nvcr.io/nvidia/driver:595.91.07"}]}}}})
    root = driver_root(gp, tmp_path / "driver")
    out = tmp_path / "v"
    args = ["validate", "driver", "-o", out, "--host-root-ctr-path", tmp_path,
            "--driver-install-dir-ctr-path", root, "--kubeconfig", fakekube.kubeconfig,
            "-ns", "gpu-operator"]
    p = gp.run(*args, env=profile_env())
    assert p.returncode == 1
    assert ".driver-ctr-ready does not exist" in p.stderr
    (out / ".driver-ctr-ready").write_text("")
    p = gp.run(*args, env=profile_env())
    assert p.returncode == 0, p.stderr
    assert fakekube.requests("GET", "/apis/apps/v1/namespaces/gpu-operator/daemonsets")


# --- cuda ----------------------------------------------------------------------------------------


def broken_profile(tmp_path):
    """The DGX H100 with GPU 2 in MIG mode without MIG devices and GPU 3 after a failed row remap."""
    prof = yaml.safe_load((NODES / "dgx-h100.yaml").read_text())
    gpus = prof["gpus"]
    gpus[2] = dict(gpus[2], mig={"capable": True, "enabled": True})
    gpus[3] = dict(gpus[3], telemetry=dict(copy.deepcopy(prof["defaults"]["telemetry"]),
                                           remappedRows={"uncorrectable": 1, "failure": True}))
    path = tmp_path / "broken-h100.yaml"
    path.write_text(yaml.safe_dump(prof))
    return path


def test_cuda(gp, tmp_path):
    p = gp.run("validate", "cuda", "--mock", "dgx-h100", "-o", tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "cuda-ready").read_text() == ""
    p = gp.run("validate", "cuda", "--mock", broken_profile(tmp_path), "-o", tmp_path)
    assert p.returncode == 1
    assert "2 of 8 GPUs cannot run CUDA work" in p.stderr
    assert "GPU 2" in p.stderr and "MIG mode is on but the GPU has no MIG devices" in p.stderr
    assert "GPU 3" in p.stderr and "row remapping failed" in p.stderr
    assert not (tmp_path / "cuda-ready").exists()
    p = gp.run("validate", "cuda", "--mock", "lost-gpu", "-o", tmp_path)
    assert p.returncode == 1 and "GPU is lost" in p.stderr


# --- toolkit -------------------------------------------------------------------------------------


def test_toolkit_with_a_cdi_spec(gp, tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    p = gp.run("validate", "toolkit", "-o", tmp_path / "v", "--host-root-ctr-path", host)
    assert p.returncode == 1
    assert "no CDI spec of kind nvidia.com/gpu" in p.stderr
    assert 'no runtime handler "nvidia"' in p.stderr
    assert not (tmp_path / "v" / "toolkit-ready").exists()
    g = gp.run("cdi", "generate", "--mock", "dgx-h100", "--nvidia-driver-root",
               driver_root(gp, tmp_path / "root"), "-o", host / "var" / "run" / "cdi")
    assert g.returncode == 0, g.stderr
    p = gp.run("validate", "toolkit", "-o", tmp_path / "v", "--host-root-ctr-path", host)
    assert p.returncode == 0, p.stderr
    assert "a CDI spec names the GPUs" in p.stderr and "devices=17" in p.stderr
    assert (tmp_path / "v" / "toolkit-ready").read_text() == ""


def test_toolkit_with_containerds_handler(gp, tmp_path):
    host = tmp_path / "host"
    conf = host / "etc" / "containerd"
    (conf / "conf.d").mkdir(parents=True)
    (conf / "config.toml").write_text('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    (conf / "conf.d" / "99-nvidia.toml").write_text(
        'version = 2\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '    BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')
    args = ["validate", "toolkit", "-o", tmp_path / "v", "--host-root-ctr-path", host]
    p = gp.run(*args)
    assert p.returncode == 1
    assert "nvidia-container-runtime, which does not exist" in p.stderr
    runtime = host / "usr" / "local" / "nvidia" / "toolkit" / "nvidia-container-runtime"
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    p = gp.run(*args)
    assert p.returncode == 0, p.stderr
    assert "the runtime has its handler" in p.stderr
    # another runtime class is another handler
    p = gp.run(*args, env={"VALIDATOR_RUNTIME_CLASS": "nvidia-cdi"})
    assert p.returncode == 1


# --- plugin --------------------------------------------------------------------------------------


def node(name, allocatable=None):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": dict(allocatable or {}), "allocatable": dict(allocatable or {})}}


def slice_for(node_name, devices):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-gpu.nvidia.com-x1"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}


def plugin(gp, fakekube, tmp_path, *args, env=None):
    return gp.run("validate", "plugin", "-o", tmp_path, "--kubeconfig", fakekube.kubeconfig,
                  "--sleep-interval-seconds", "0.1", *args, env=env)


def test_plugin_with_gpus(gp, fakekube, tmp_path):
    fakekube.put(node("n1", {"cpu": "64", "nvidia.com/gpu": "8"}))
    p = plugin(gp, fakekube, tmp_path, "--node-name", "n1")
    assert p.returncode == 0, p.stderr
    assert 'resource="nvidia.com/gpu"' in p.stderr and 'allocatable=8' in p.stderr
    assert (tmp_path / "plugin-ready").read_text() == ""
    assert fakekube.requests("GET", "/api/v1/nodes/n1")


def test_plugin_in_cluster_with_mig(gp, fakekube, tmp_path):
    fakekube.put(node("n2", {"nvidia.com/mig-1g.10gb": "7"}))
    p = gp.run("validate", "plugin", "-o", tmp_path,
               env={**fakekube.incluster_env(), "NODE_NAME": "n2", "OPERATOR_NAMESPACE": "gpu-operator"})
    assert p.returncode == 0, p.stderr
    assert "nvidia.com/mig-1g.10gb" in p.stderr


def test_plugin_without_gpus_gives_up(gp, fakekube, tmp_path):
    fakekube.put(node("n1", {"cpu": "64", "nvidia.com/gpu": "0"}))
    t0 = time.monotonic()
    p = plugin(gp, fakekube, tmp_path, "--node-name", "n1", "--plugin-retries", "3")
    assert p.returncode == 1
    assert "not discovered by the node after 3 tries" in p.stderr
    assert "has no allocatable nvidia.com/gpu" in p.stderr
    assert len(fakekube.requests("GET", "/api/v1/nodes/n1")) == 3
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "plugin-ready").exists()


def test_plugin_waits_for_the_device_plugin(gp, fakekube, tmp_path):
    fakekube.put(node("n1", {"cpu": "64"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
    proc = subprocess.Popen([str(gp.binary), "validate", "plugin", "-o", str(tmp_path), "-n", "n1",
                             "--kubeconfig", str(fakekube.kubeconfig), "-s", "0.1"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        fakekube.wait_for(lambda: len(fakekube.requests("GET", "/api/v1/nodes/n1")) >= 2,
                          what="two looks at the node")
        fakekube.put(node("n1", {"cpu": "64", "nvidia.com/gpu": "4"}))
        rc = proc.wait(timeout=15)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, err
    assert "GPU resources are not yet discovered by the node" in err


def test_plugin_with_the_dra_driver(gp, fakekube, tmp_path):
    fakekube.put(node("n3", {"cpu": "64"}))
    fakekube.put(slice_for("other-node", 8))
    p = plugin(gp, fakekube, tmp_path, "-n", "n3", "--plugin-retries", "1")
    assert p.returncode == 1
    fakekube.put(slice_for("n3", 8))
    p = plugin(gp, fakekube, tmp_path, "-n", "n3", "--plugin-retries", "1")
    assert p.returncode == 0, p.stderr
    assert "published by the DRA driver" in p.stderr and "devices=8" in p.stderr
    listed = fakekube.requests("GET", "/apis/resource.k8s.io/v1/resourceslices")
    assert listed[-1]["query"]["fieldSelector"] == ["spec.nodeName=n3,spec.driver=gpu.nvidia.com"]


def test_plugin_node_not_found(gp, fakekube, tmp_path):
    p = plugin(gp, fakekube, tmp_path, "-n", "nowhere", "--plugin-retries", "5")
    assert p.returncode == 1
    assert "cannot read node nowhere" in p.stderr and "NotFound" in p.stderr
    assert len(fakekube.requests("GET", "/api/v1/nodes/nowhere")) == 1, "no point asking again"


def test_plugin_needs_the_node_name(gp, tmp_path):
    p = gp.run("validate", "plugin", "-o", tmp_path)
    assert p.returncode == 2
    assert "--node-name or NODE_NAME" in p.stderr


# --- wait and cleanup ----------------------------------------------------------------------------


def test_wait_until_the_files_appear(gp, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
    proc = subprocess.Popen([str(gp.binary), "validate", "wait", "--output-dir", str(tmp_path),
                             "--sleep-interval-seconds", "60", "driver-ready", "toolkit-ready"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        err = ""
        # the first progress line says what it waits for
        while "waiting for status files" not in err and time.monotonic() < deadline:
            err += proc.stderr.readline()
        assert 'missing="driver-ready,toolkit-ready"' in err
        # a status file comes the way every check writes it: renamed into place
        (tmp_path / ".driver-ready.tmp").write_text("IS_HOST_DRIVER=true\n")
        (tmp_path / ".driver-ready.tmp").rename(tmp_path / "driver-ready")
        time.sleep(0.3)
        assert proc.poll() is None, "one file is still missing"
        t0 = time.monotonic()
        (tmp_path / "toolkit-ready").write_text("")
        rc = proc.wait(timeout=10)
        waited = time.monotonic() - t0
        err += proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, err
    assert waited < 2, "woken by the file, not by the 60 s interval"
    assert "every status file is there" in err


def test_wait_times_out(gp, tmp_path):
    (tmp_path / "driver-ready").write_text("")
    t0 = time.monotonic()
    p = gp.run("validate", "wait", "-o", tmp_path, "--timeout", "0.5", "driver-ready", "plugin-ready")
    assert p.returncode == 1
    assert 0.4 < time.monotonic() - t0 < 5
    assert 'missing="plugin-ready"' in p.stderr


def test_wait_for_a_directory_not_made_yet(gp, tmp_path):
    d = tmp_path / "later"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GPUPLANE_"))}
    proc = subprocess.Popen([str(gp.binary), "validate", "wait", "-o", str(d), "toolkit-ready"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        d.mkdir()
        (d / "toolkit-ready").write_text("")
        rc = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0


@pytest.mark.parametrize("name", ["../driver-ready", "/run/nvidia/validations/driver-ready", "a/b",
                                  "..", ""])
def test_wait_refuses_paths(gp, tmp_path, name):
    p = gp.run("validate", "wait", "-o", tmp_path, "--timeout", "1", name)
    assert p.returncode == 2
    assert "invalid file name" in p.stderr


def test_cleanup(gp, tmp_path):
    for name in ["driver-ready", "toolkit-ready", "plugin-ready", ".driver-ctr-ready", "workload-type"]:
        (tmp_path / name).write_text("")
    p = gp.run("validate", "cleanup", "-o", tmp_path)
    assert p.returncode == 0, p.stderr
    assert entries(tmp_path) == [".driver-ctr-ready", "workload-type"]
    assert gp.run("validate", "cleanup", "-o", tmp_path / "missing").returncode == 0


def test_cleanup_all_before_a_check(gp, tmp_path):
    for name in ["toolkit-ready", ".driver-ctr-ready", "workload-type"]:
        (tmp_path / name).write_text("")
    p = gp.run("validate", "driver", "--mock", "pcie-t4", "-o", tmp_path, env={"CLEANUP_ALL": "true"})
    assert p.returncode == 0, p.stderr
    assert entries(tmp_path) == ["driver-ready"]


# --- the command line ----------------------------------------------------------------------------


def test_nvidias_variables(gp, tmp_path):
    """As NVIDIA's manifests run the validator: no arguments, everything in the environment."""
    p = gp.run("validate", "--mock", "a100-mig", env={
        "COMPONENT": "driver", "WITH_WAIT": "false", "OUTPUT_DIR": str(tmp_path),
        "OPERATOR_NAMESPACE": "gpu-operator", "DISABLE_DEV_CHAR_SYMLINK_CREATION": "true"})
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "driver-ready").exists()


@pytest.mark.parametrize("args,env,msg", [
    ([], {}, "say which check"),
    (["drivers"], {}, 'unknown check "drivers"'),
    ([], {"COMPONENT": "mofed"}, "one of NVIDIA's checks gpuplane does not make"),
    (["driver", "--bogus"], {}, "unknown option"),
    (["driver"], {"WITH_WAIT": "sometimes"}, 'WITH_WAIT: invalid value "sometimes"'),
    (["driver", "-o", "relative"], {}, "want an absolute path"),
    (["wait"], {}, "names of the files"),
    (["cleanup", "extra"], {}, "unexpected argument"),
])
def test_usage_errors(gp, args, env, msg):
    p = gp.run("validate", *args, env=env)
    assert p.returncode == 2, p.stderr
    assert msg in p.stderr
    assert "see 'gpuplane validate --help'" in p.stderr


@pytest.mark.parametrize("check", ["", "driver", "toolkit", "plugin", "cuda", "wait", "cleanup"])
def test_help(gp, check):
    p = gp.run("validate", *([check] if check else []), "--help")
    assert p.returncode == 0
    want = f"Usage: gpuplane validate {check}" if check else "Usage: gpuplane validate CHECK"
    assert p.stdout.startswith(want)
    assert all(len(line) <= 100 for line in p.stdout.splitlines())


def test_listed_in_gpuplane_help(gp):
    p = gp.run("--help")
    assert "validate" in p.stdout
