# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` flags, environment and config file through the binary (issue item 2):
precedence flag > env > file > default, invalid configs exit 1 with file:line:col, --print-config."""
import json

import pytest

from dp_harness import GPU, H100, T, clean_env, plugin  # noqa: F401

FILE = """version: v1
flags:
  migStrategy: mixed
  plugin:
    deviceIDStrategy: index
    deviceListStrategy: [volume-mounts]
    cdiAnnotationPrefix: file.example.com/
    passDeviceSpecs: true
"""


def print_config(gp, tmp_path, *args, env=None, config=None):
    full = dict(env or {})
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(config)
        full.setdefault("CONFIG_FILE", str(path))
    p = gp.run("device-plugin", "--print-config", *args, env=clean_env(full))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_defaults(gp, tmp_path):
    c = print_config(gp, tmp_path)
    f = c["flags"]
    assert f["migStrategy"] == "none" and f["failOnInitError"] is True and f["nvidiaDriverRoot"] == "/"
    assert f["plugin"]["deviceListStrategy"] == ["envvar"] and f["plugin"]["deviceIDStrategy"] == "uuid"
    assert f["plugin"]["kubeletSocket"] == "/var/lib/kubelet/device-plugins/kubelet.sock"
    assert c["health"]["ignoredXids"] == [13, 31, 43, 45, 68, 109]
    assert c["health"]["recoveryWindow"] == "1m" and c["version"] == "v1"


@pytest.mark.parametrize("flag,env,want", [
    (None, None, "mixed"),                       # file
    (None, "single", "single"),                  # env > file
    ("none", "single", "none"),                  # flag > env
    ("--mig-strategy=none", None, "none"),       # flag > file
])
def test_precedence_mig_strategy(gp, tmp_path, flag, env, want):
    args = ([flag] if flag.startswith("--") else ["--mig-strategy", flag]) if flag else []
    c = print_config(gp, tmp_path, *args, env={"MIG_STRATEGY": env} if env else {}, config=FILE)
    assert c["flags"]["migStrategy"] == want


def test_precedence_per_setting(gp, tmp_path):
    c = print_config(gp, tmp_path, "-device-list-strategy=envvar,cdi-cri",
                     env={"CDI_ANNOTATION_PREFIX": "env.example.com/", "DEVICE_LIST_STRATEGY": "cdi-annotations"},
                     config=FILE)
    plug = c["flags"]["plugin"]
    assert plug["deviceListStrategy"] == ["envvar", "cdi-cri"]       # flag
    assert plug["cdiAnnotationPrefix"] == "env.example.com/"          # env
    assert plug["deviceIDStrategy"] == "index"                         # file
    assert plug["passDeviceSpecs"] is True                              # file
    assert plug["nvidiaCTKPath"] == "/usr/bin/nvidia-ctk"              # default


def test_config_file_flag_beats_env(gp, tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text("version: v1\nflags:\n  migStrategy: single\n")
    c = print_config(gp, tmp_path, "--config-file", other, config=FILE)  # CONFIG_FILE names FILE
    assert c["flags"]["migStrategy"] == "single"


def test_print_config_is_a_valid_config(gp, tmp_path):
    first = print_config(gp, tmp_path, "--mig-strategy=mixed", config=(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 3\n"
        "health:\n  recoveryWindow: 2s\n"))
    again = tmp_path / "again.json"
    again.write_text(json.dumps(first))
    second = print_config(gp, tmp_path, "--config-file", again)
    assert second == first
    assert first["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 3


def test_precedence_reaches_allocate(plugin):
    """The setting that wins is the one the running daemon uses: file volume-mounts, env envvar."""
    p = plugin(config="version: v1\nflags:\n  plugin:\n    deviceListStrategy: volume-mounts\n",
               env={"DEVICE_LIST_STRATEGY": "envvar"}, args=["--device-id-strategy=index"])
    a = p.kubelet.allocate(GPU, 1)
    assert a.response["mounts"] == []
    assert a.response["envs"]["NVIDIA_VISIBLE_DEVICES"] == str(H100.index(a.device_ids[0]))


@pytest.mark.parametrize("text,where,message", [
    ("version: v1\nflags:\n  migStrategy: foo\n", "3:16", '"migStrategy": invalid value "foo"'),
    ("version: v2\n", "1:10", "version"),
    ("version: v1\nflags:\n  migStrategi: mixed\n", "3:3", "migStrategi"),
    ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 0\n",
     "6:17", '"replicas": 0 is out of range [1, 1024]'),
    ("version: v1\nhealth:\n  ignoredXids: [13, 5000]\n", "3:21", "invalid XID 5000"),
    ("version: v1\nflags:\n  failOnInitError: maybe\n", "3:20", "failOnInitError"),
])
def test_invalid_config_exits_1_with_position(gp, tmp_path, text, where, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for args in (["--config-file", path, "--mock", "dgx-h100", "--kubelet-socket", tmp_path / "k.sock"],
                 ["--config-file", path, "--print-config"]):
        p = gp.run("device-plugin", *args, env=clean_env(), timeout=T)
        assert p.returncode == 1, p.stderr
        line = p.stderr.strip().splitlines()[-1]
        assert f"{path}:{where}: " in line, line
        assert message in line, line
    assert not (tmp_path / "nvidia-gpu.sock").exists()


@pytest.mark.parametrize("env,message", [
    ({"MIG_STRATEGY": "bogus"}, 'MIG_STRATEGY: invalid value "bogus"'),
    ({"DEVICE_ID_STRATEGY": "serial"}, "DEVICE_ID_STRATEGY"),
])
def test_bad_env_fails_even_when_a_flag_overrides(gp, env, message):
    flag = {"MIG_STRATEGY": "--mig-strategy=single", "DEVICE_ID_STRATEGY": "--device-id-strategy=uuid"}
    p = gp.run("device-plugin", flag[next(iter(env))], "--print-config", env=clean_env(env))
    assert p.returncode == 1 and message in p.stderr


def test_unreadable_config_file(gp, tmp_path):
    p = gp.run("device-plugin", "--config-file", tmp_path / "missing.yaml", "--print-config", env=clean_env())
    assert p.returncode == 1 and "missing.yaml" in p.stderr


def test_usage_error_exits_2(gp):
    p = gp.run("device-plugin", "--no-such-flag", env=clean_env())
    assert p.returncode == 2 and "--help" in p.stderr


def test_no_nvml_fails(gp, tmp_path):
    p = gp.run("device-plugin", "--nvml-lib", tmp_path / "libnvidia-ml.so.1", "--kubelet-socket",
               tmp_path / "kubelet.sock", env=clean_env(), timeout=T)
    assert p.returncode == 1 and "cannot open NVML" in p.stderr


def test_no_nvml_waits_with_fail_on_init_error_false(plugin, tmp_path):
    p = plugin(profile=None, kubelet=False, args=["--fail-on-init-error=false", "--nvml-lib", tmp_path / "none.so"])
    p.wait_log("No devices found. Waiting indefinitely.")
    assert p.alive() and p.stop() == 0


@pytest.mark.parametrize("name", ["demo", "health", "mig-mixed", "rename", "time-slicing"])
def test_examples_load(gp, name):
    from dp_harness import ROOT
    p = gp.run("device-plugin", "--config-file", ROOT / "examples" / "device-plugin" / f"{name}.yaml",
               "--print-config", env=clean_env())
    assert p.returncode == 0, p.stderr
    c = json.loads(p.stdout)
    if name == "demo":
        assert c["health"]["recoveryWindow"] == "4s" and c["health"]["probeInterval"] == "500ms"
