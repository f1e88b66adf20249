# SPDX-License-Identifier: Apache-2.0
"""bench/dra/gen.py: the YAML and JSON outputs hold the same objects, they are valid
resource.k8s.io/v1 (strict OpenAPI schema, see test_dra_examples.py), the cluster looks like a DGX
H100 per node, and the 131730 worst case really leaves only n-1 matching GPUs per node."""
import json
import pathlib
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

from openapi_schema import load_components, validator  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
GEN = ROOT / "bench" / "dra" / "gen.py"


def gen(tmp_path, *args):
    out = {}
    for fmt in ("yaml", "json"):
        d = tmp_path / fmt
        subprocess.run([sys.executable, str(GEN), "--out", str(d), "--format", fmt, *map(str, args)],
                       check=True, capture_output=True, text=True)
        for what in ("cluster", "workload"):
            text = (d / f"{what}.{fmt}").read_text()
            out[(fmt, what)] = json.loads(text)["items"] if fmt == "json" else [o for o in yaml.safe_load_all(text) if o]
    return out


@pytest.mark.parametrize("workload", ["single", "pcie4", "nvlink4", "worst", "mixed"])
def test_yaml_equals_json_and_valid(workload, tmp_path):
    out = gen(tmp_path, "--nodes", 3, "--workload", workload, "--pods", 5)
    comps = load_components()
    for what in ("cluster", "workload"):
        assert out[("yaml", what)] == out[("json", what)]
        for o in out[("yaml", what)]:
            if o["apiVersion"] != "resource.k8s.io/v1":
                continue
            errors = list(validator(comps, o["kind"]).iter_errors(o))
            assert not errors, [e.message for e in errors]
    pods = [o for o in out[("yaml", "workload")] if o["kind"] == "Pod"]
    assert len(pods) == 5


def test_cluster_shape(tmp_path):
    out = gen(tmp_path, "--nodes", 2)
    slices = [o for o in out[("yaml", "cluster")] if o["kind"] == "ResourceSlice"]
    assert len(slices) == 2
    for s in slices:
        assert s["spec"]["pool"]["name"] == s["spec"]["nodeName"]
        devs = s["spec"]["devices"]
        assert [d["name"] for d in devs] == [f"gpu-{i}" for i in range(8)]
        roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in devs]
        assert all(roots.count(r) == 2 for r in roots)
        assert len({d["attributes"]["uuid"]["string"] for d in devs}) == 8
    uuids = [d["attributes"]["uuid"]["string"] for s in slices for d in s["spec"]["devices"]]
    assert len(set(uuids)) == 16


def test_worst_case_only_n_minus_1_match(tmp_path):
    out = gen(tmp_path, "--nodes", 2, "--workload", "worst")
    claim = next(o for o in out[("yaml", "workload")] if o["kind"] == "ResourceClaim")
    n = claim["spec"]["devices"]["requests"][0]["exactly"]["count"]
    attr = claim["spec"]["devices"]["constraints"][0]["matchAttribute"]
    for s in (o for o in out[("yaml", "cluster")] if o["kind"] == "ResourceSlice"):
        values = [d["attributes"][attr]["string"] for d in s["spec"]["devices"]]
        assert max(values.count(v) for v in values) == n - 1


def test_nodes_per_file(tmp_path):
    subprocess.run([sys.executable, str(GEN), "--out", str(tmp_path), "--nodes", "5", "--nodes-per-file", "2",
                    "--what", "cluster"], check=True, capture_output=True)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["cluster-000.yaml", "cluster-001.yaml", "cluster-002.yaml"]
    objs = [o for f in files for o in yaml.safe_load_all((tmp_path / f).read_text()) if o]
    kinds = [o["kind"] for o in objs]
    assert kinds.count("DeviceClass") == 2 and kinds.count("Node") == 5 and kinds.count("ResourceSlice") == 5
