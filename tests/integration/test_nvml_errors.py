# SPDX-License-Identifier: Apache-2.0
"""Without a usable NVML, or with a broken profile, gpuplane says why and exits non-zero."""
import re

from conftest import NODES

NOT_FOUND = "NVML library not found: is the NVIDIA driver installed? Use --nvml-lib to point at it"


def test_no_nvml_library(gp):
    p = gp.run("info", env={"LD_LIBRARY_PATH": "/nonexistent"})
    assert p.returncode == 1
    assert NOT_FOUND in p.stderr
    assert "Segmentation" not in p.stderr


def test_nvml_lib_path_missing(gp, tmp_path):
    p = gp.run("info", "--nvml-lib", tmp_path / "libnvidia-ml.so.1")
    assert p.returncode == 1
    assert NOT_FOUND in p.stderr


def test_driver_not_loaded(gp):
    # The mock without a profile behaves like a library whose kernel driver is not loaded.
    p = gp.run("info", env={"GPUPLANE_NVML_LIB": str(gp.mock_lib)})
    assert p.returncode == 1
    assert p.stderr.startswith("gpuplane: ")
    assert "Driver Not Loaded" in p.stderr


def test_env_nvml_lib_with_profile(gp):
    doc = gp.json("info", "--json", env={"GPUPLANE_NVML_LIB": str(gp.mock_lib),
                                         "MOCK_NVML_PROFILE": str(NODES / "pcie-t4.yaml")})
    assert len(doc["gpus"]) == 4


def test_mock_and_nvml_lib_exclude_each_other(gp):
    p = gp.run("info", "--mock", "pcie-t4", "--nvml-lib", gp.mock_lib)
    assert p.returncode == 1
    assert "exclude each other" in p.stderr


def test_unknown_profile_name(gp):
    p = gp.run("info", "--mock", "no-such-node")
    assert p.returncode == 1
    assert "no-such-node" in p.stderr


def test_malformed_profile_yaml(gp, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus:\n  - index: 0\n    uuid: [unclosed\n")
    p = gp.run("info", "--mock", bad)
    assert p.returncode == 1
    assert re.search(rf"{re.escape(str(bad))}:\d+:\d+: ", p.stderr), p.stderr


def test_profile_with_unknown_key(gp, tmp_path):
    src = (NODES / "pcie-t4.yaml").read_text()
    bad = tmp_path / "typo.yaml"
    bad.write_text(src.rstrip("\n") + "\nmemroy: 5\n")
    line = len(src.rstrip("\n").splitlines()) + 1
    p = gp.run("info", "--mock", bad)
    assert p.returncode == 1
    assert re.search(rf"{re.escape(str(bad))}:{line}:1: .*memroy", p.stderr), p.stderr
