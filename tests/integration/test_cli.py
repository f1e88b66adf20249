# SPDX-License-Identifier: Apache-2.0
"""The command line itself: help, version, usage errors and log formats."""
import json
import re

import pytest

COMMANDS = ["info", "version"]


def test_top_level_help_lists_commands(gp):
    p = gp.run("--help")
    assert p.returncode == 0
    for cmd in COMMANDS:
        assert re.search(rf"^\s+{cmd}\s", p.stdout, re.M), cmd


def test_no_command_is_a_usage_error(gp):
    p = gp.run()
    assert p.returncode == 2
    assert "Usage: gpuplane" in p.stderr


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(gp, cmd):
    p = gp.run(cmd, "--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"Usage: gpuplane {cmd}")


def test_unknown_command(gp):
    p = gp.run("frobnicate")
    assert p.returncode == 2
    assert 'unknown command "frobnicate"' in p.stderr


def test_unknown_option_is_usage_error(gp):
    p = gp.run("info", "--bogus")
    assert p.returncode == 2
    assert "gpuplane info --help" in p.stderr


def test_bad_verbosity(gp):
    p = gp.run("info", "-v=loud", "--mock", "dgx-h100")
    assert p.returncode == 2
    assert "invalid verbosity" in p.stderr


def test_version(gp):
    p = gp.run("version")
    assert p.returncode == 0
    assert re.match(r"gpuplane \d+\.\d+\.\d+ \(commit \S+\)\n", p.stdout)


KLOG = re.compile(r'^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.-]+\.c:\d+\] "[^"]*"( \w+=\S+)*$')


def test_klog_text_lines(gp):
    p = gp.run("info", "--mock", "dgx-h100", "-v=4")
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line]
    assert lines, "expected debug log lines at -v=4"
    for line in lines:
        assert KLOG.match(line), line


def test_json_log_lines(gp):
    p = gp.run("info", "--mock", "dgx-h100", "--v=4", "--log-format=json")
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line]
    assert lines
    for line in lines:
        rec = json.loads(line)
        assert {"ts", "caller", "msg", "v"} <= rec.keys()
