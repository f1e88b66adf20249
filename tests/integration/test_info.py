# SPDX-License-Identifier: Apache-2.0
"""`gpuplane info` against every bundled node profile of the mock NVML library."""
import json
import pathlib
import re

import jsonschema
import pytest

SCHEMA = json.loads((pathlib.Path(__file__).parent / "schemas" / "info.schema.json").read_text())
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.mark.parametrize("profile", ["dgx-h100", "a100-mig", "pcie-t4", "lost-gpu"])
def test_json_matches_schema(gp, profile):
    doc = gp.json("info", "--mock", profile, "--json")
    jsonschema.validate(doc, SCHEMA)
    n = len(doc["gpus"])
    assert len(doc["topology"]["matrix"]) == n
    for i, row in enumerate(doc["topology"]["matrix"]):
        assert len(row) == n
        assert row[i] == "X"


def test_dgx_h100(gp):
    doc = gp.json("info", "--mock", "dgx-h100", "--json")
    gpus = doc["gpus"]
    assert len(gpus) == 8
    assert len({g["uuid"] for g in gpus}) == 8
    assert all(UUID.match(g["uuid"]) for g in gpus)
    assert [g["numaNode"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(g["name"] == "NVIDIA H100 80GB HBM3" for g in gpus)
    assert all(g["computeCapability"] == "9.0" for g in gpus)
    assert all(not g["lost"] for g in gpus)
    matrix = doc["topology"]["matrix"]
    for i in range(8):
        for j in range(8):
            assert matrix[i][j] == ("X" if i == j else "NV18"), (i, j)


def test_dgx_h100_table(gp):
    p = gp.run("info", "--mock", "dgx-h100")
    assert p.returncode == 0, p.stderr
    assert "NVIDIA H100 80GB HBM3" in p.stdout
    assert re.search(r"^GPU0\s+X\s+NV18\s", p.stdout, re.M)
    assert "Legend:" in p.stdout
    assert len(re.findall(r"^[0-7]\s+NVIDIA H100", p.stdout, re.M)) == 8


def test_a100_mig_devices(gp):
    doc = gp.json("info", "--mock", "a100-mig", "--json")
    gpus = doc["gpus"]
    assert len(gpus) == 4
    enabled = [g for g in gpus if g["migEnabled"]]
    assert len(enabled) == 2
    profiles = {m["profile"] for g in enabled for m in g["migDevices"]}
    assert {"1g.5gb", "2g.10gb", "3g.20gb"} <= profiles
    for g in gpus:
        assert g["migCapable"]
        if not g["migEnabled"]:
            assert g["migDevices"] == []
    mig_uuids = [m["uuid"] for g in enabled for m in g["migDevices"]]
    assert len(set(mig_uuids)) == len(mig_uuids)
    assert all(u.startswith("MIG-") for u in mig_uuids)


def test_a100_mig_table(gp):
    p = gp.run("info", "--mock", "a100-mig")
    assert p.returncode == 0, p.stderr
    assert "MIG devices" in p.stdout
    assert re.search(r"^0\s+\d+\s+3g\.20gb\s", p.stdout, re.M)


def test_pcie_t4_has_no_nvlink(gp):
    doc = gp.json("info", "--mock", "pcie-t4", "--json")
    assert len(doc["gpus"]) == 4
    assert all(not g["migCapable"] and g["nvlinks"] == 0 for g in doc["gpus"])
    levels = {c for row in doc["topology"]["matrix"] for c in row} - {"X"}
    assert levels <= {"PIX", "PXB", "PHB", "NODE", "SYS"}
    assert "SYS" in levels  # two NUMA nodes


def test_lost_gpu_is_shown_not_fatal(gp):
    p = gp.run("info", "--mock", "lost-gpu", "--json")
    assert p.returncode == 0, p.stderr
    gpus = json.loads(p.stdout)["gpus"]
    lost = [g for g in gpus if g["lost"]]
    assert len(lost) == 1
    assert lost[0]["error"]
    assert all(g["uuid"] for g in gpus if not g["lost"])
    table = gp.run("info", "--mock", "lost-gpu")
    assert table.returncode == 0
    assert re.search(rf"^{lost[0]['index']}\s.*\slost$", table.stdout, re.M)
