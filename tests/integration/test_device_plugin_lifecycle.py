# SPDX-License-Identifier: Apache-2.0
"""`gpuplane device-plugin` lifecycle (issue item 1): serve then Register, re-registration when
kubelet.sock is re-created or our socket disappears, Register retries with back-off, SIGTERM removes only
our sockets, SIGHUP reloads the config and re-registers."""
import signal
import socket
import stat
import time

import pytest

from dp_harness import GPU, H100, T, pb, plugin  # noqa: F401  (plugin is a fixture)

MIXED = ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb"]


def sockets(directory):
    return sorted(e.name for e in directory.iterdir() if stat.S_ISSOCK(e.lstat().st_mode))


def test_serves_before_register_and_answers_options(plugin):
    p = plugin()
    k = p.kubelet
    # The emulator dials the endpoint inside Register: registration proves it was already serving.
    assert k.endpoint(GPU) == str(p.dir / "nvidia-gpu.sock")
    assert k.options(GPU) == {"pre_start_required": False, "get_preferred_allocation_available": True}
    (req,) = k.events("register-request", GPU)
    assert req.data["version"] == "v1beta1" and req.data["endpoint"] == "nvidia-gpu.sock"
    assert req.data["options"]["get_preferred_allocation_available"] is True
    kinds = [e.kind for e in k.events(resource=GPU)]
    assert kinds.index("options") < kinds.index("register") < kinds.index("update")
    assert k.capacity(GPU) == 8 and k.allocatable(GPU) == 8
    assert sockets(p.dir) == ["kubelet.sock", "nvidia-gpu.sock"]
    assert k.registrations(GPU) == 1
    # PreStartContainer is a no-op answering OK.
    p.stub().PreStartContainer(pb.PreStartContainerRequest(devices_ids=[H100[0]]), timeout=T)


def test_twenty_kubelet_restarts_in_a_row(plugin):
    p = plugin()
    k = p.kubelet
    held = k.allocate(GPU, 2, pod="survivor")
    for n in range(20):
        k.restart()
        k.wait_registered(GPU, timeout=T)
        assert k.registrations(GPU) == 1, f"restart {n}: {k.registrations(GPU)} registrations"
        assert k.capacity(GPU) == 8
    assert k.allocatable(GPU) == 8 and p.alive()
    # The allocation survived every restart in the checkpoint, and admission still works.
    assert k.allocated(GPU) == sorted(held.device_ids)
    a = k.allocate(GPU, 4)
    assert not set(a.device_ids) & set(held.device_ids)
    assert p.log().count("kubelet.sock created") >= 20
    assert sockets(p.dir) == ["kubelet.sock", "nvidia-gpu.sock"]


def test_our_socket_deleted_serves_and_registers_again(plugin):
    p = plugin()
    k = p.kubelet
    mark = k.mark()
    (p.dir / "nvidia-gpu.sock").unlink()
    k.wait_event("register", GPU, since=mark, timeout=T)
    k.wait_registered(GPU, registrations=2, timeout=T)
    assert (p.dir / "nvidia-gpu.sock").is_socket()
    assert k.allocatable(GPU) == 8
    assert "our socket is gone" in p.log()
    assert k.allocate(GPU, 1).response["envs"]["NVIDIA_VISIBLE_DEVICES"].startswith("GPU-")


def test_register_retries_with_backoff_until_the_kubelet_appears(plugin):
    p = plugin(kubelet=False)
    p.wait_log("retry_ms=400")
    out = p.log()
    delays = [int(x.split()[0].strip('"')) for x in out.split("retry_ms=")[1:]]
    assert delays[:3] == [100, 200, 400], delays
    assert (p.dir / "nvidia-gpu.sock").is_socket()  # serving while waiting for the kubelet
    k = plugin.kubelet(p.dir)
    k.wait_registered(GPU, timeout=T)
    assert k.capacity(GPU) == 8 and k.registrations(GPU) == 1


def test_register_rejected_is_retried(plugin):
    p = plugin(kubelet=False)
    k = plugin.kubelet(p.dir, start=False)
    real, rejects = k._register, []

    def flaky(request, context):
        if len(rejects) < 2:
            rejects.append(time.monotonic())
            return k._reject(context, request.resource_name, "not now")
        return real(request, context)
    k._register = flaky
    k.start()
    k.wait_registered(GPU, timeout=T)
    assert len(rejects) == 2 and rejects[1] - rejects[0] >= 0.09  # back-off between attempts
    assert 'message="not now"' in p.log()
    assert k.registrations(GPU) == 1 and k.allocatable(GPU) == 8


def test_sigterm_removes_only_our_sockets(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed"], wait=MIXED)
    k = p.kubelet
    ours = [s for s in sockets(p.dir) if s.startswith("nvidia-")]
    assert len(ours) == 4
    # A foreign socket, a foreign file and a directory must survive.
    foreign = socket.socket(socket.AF_UNIX)
    foreign.bind(str(p.dir / "other-vendor.sock"))
    (p.dir / "notes.txt").write_text("keep")
    (p.dir / "sub").mkdir()
    mark = k.mark()
    assert p.stop() == 0
    ends = k.wait_for(lambda: len(k.events("stream-end", since=mark)) == 4 and k.events("stream-end", since=mark),
                      timeout=T, what="4 stream ends")
    assert sorted(e.resource for e in ends) == MIXED
    assert all(e.data["code"] == "OK" for e in ends)
    assert sockets(p.dir) == ["kubelet.sock", "other-vendor.sock"]
    assert (p.dir / "notes.txt").read_text() == "keep" and (p.dir / "sub").is_dir()
    foreign.close()
    assert "stopped; sockets removed" in p.log()


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGQUIT])
def test_other_stop_signals(plugin, signo):
    p = plugin()
    p.signal(signo)
    assert p.wait() == 0
    assert sockets(p.dir) == ["kubelet.sock"]


def test_sighup_reloads_config_and_registers_new_resources(plugin):
    p = plugin(config="version: v1\n")
    k = p.kubelet
    assert k.capacity(GPU) == 8
    p.config_path.write_text("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                             "    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n")
    p.signal(signal.SIGHUP)
    k.wait_registered("nvidia.com/gpu.shared", timeout=T)
    assert k.capacity("nvidia.com/gpu.shared") == 16
    assert {d.id.split("::")[1] for d in k.devices("nvidia.com/gpu.shared")} == {"0", "1"}
    # The old resource's stream ended; its socket is gone.
    k.wait_for(lambda: not k.registered(GPU), timeout=T)
    assert sockets(p.dir) == ["kubelet.sock", "nvidia-gpu.shared.sock"]
    assert "SIGHUP: reloading" in p.log()


def test_sighup_with_a_bad_config_keeps_the_old_one(plugin):
    p = plugin(config="version: v1\n")
    k = p.kubelet
    mark = k.mark()
    p.config_path.write_text("version: v1\nflags:\n  migStrategy: sideways\n")
    p.signal(signal.SIGHUP)
    out = p.wait_log("SIGHUP: keeping the old configuration")
    assert "config.yaml:3:16" in out
    assert p.alive() and k.registered(GPU) and k.allocatable(GPU) == 8
    assert not k.events("register", GPU, since=mark)
    assert k.allocate(GPU, 1).device_ids




def test_kubelet_restarts_with_several_resources(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed"], wait=MIXED)
    k = p.kubelet
    for n in range(5):
        k.restart()
        for r in MIXED:
            k.wait_registered(r, timeout=T)
        assert [k.registrations(r) for r in MIXED] == [1, 1, 1, 1], n
    assert [k.capacity(r) for r in MIXED] == [2, 2, 1, 2]


def test_kubelet_down_for_a_while_then_back(plugin):
    p = plugin()
    k = p.kubelet
    k.stop()
    assert not (p.dir / "kubelet.sock").exists()
    k.start()
    k.wait_registered(GPU, timeout=T)
    assert k.allocatable(GPU) == 8 and p.alive()


def test_health_survives_a_kubelet_restart(plugin):
    p = plugin()
    k = p.kubelet
    p.xid(4, 79)
    k.wait_for(lambda: k.allocatable(GPU) == 7, timeout=T)
    k.restart()
    k.wait_registered(GPU, timeout=T)
    assert k.capacity(GPU) == 8 and k.unhealthy(GPU) == [H100[4]]


def test_our_socket_deleted_for_one_of_several_resources(plugin):
    p = plugin(profile="a100-mig", args=["--mig-strategy=mixed"], wait=MIXED)
    k = p.kubelet
    mark = k.mark()
    (p.dir / "nvidia-mig-2g.10gb.sock").unlink()
    k.wait_registered("nvidia.com/mig-2g.10gb", registrations=2, timeout=T)
    # The others keep their registration and stream (same endpoint).
    assert [e.resource for e in k.events("register", since=mark)] == ["nvidia.com/mig-2g.10gb"]
    assert all(k.registered(r) for r in MIXED)
    assert k.allocate("nvidia.com/mig-2g.10gb", 1).device_ids


def test_sighup_changes_the_mig_strategy(plugin):
    p = plugin(profile="a100-mig", config="version: v1\nflags:\n  migStrategy: none\n")
    k = p.kubelet
    assert k.capacity(GPU) == 4
    p.config_path.write_text("version: v1\nflags:\n  migStrategy: mixed\n")
    p.signal(signal.SIGHUP)
    for r in MIXED[1:]:
        k.wait_registered(r, timeout=T)
    k.wait_for(lambda: k.registered(GPU) and k.capacity(GPU) == 2, timeout=T)
    assert [k.capacity(r) for r in MIXED] == [2, 2, 1, 2]
    assert sockets(p.dir) == sorted(["kubelet.sock", "nvidia-gpu.sock", "nvidia-mig-1g.5gb.sock",
                                     "nvidia-mig-2g.10gb.sock", "nvidia-mig-3g.20gb.sock"])
    a = k.allocate("nvidia.com/mig-1g.5gb", 2)
    assert len(a.device_ids) == 2


def test_sighup_five_times(plugin):
    p = plugin(config="version: v1\n")
    k = p.kubelet
    for n in range(5):
        replicas = n + 2
        p.config_path.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                 f"    - name: gpu\n      replicas: {replicas}\n")
        p.signal(signal.SIGHUP)
        k.wait_for(lambda: k.registered(GPU) and k.capacity(GPU) == 8 * replicas, timeout=T,
                   what=f"{8 * replicas} replicas")
    assert k.allocatable(GPU) == 48 and p.alive()
    assert p.stop() == 0
