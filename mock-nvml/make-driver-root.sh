#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the fake driver root of a mock node profile: make-driver-root.sh PROFILE DIR [--mock-lib PATH].
# The work is done by make-driver-root.py beside this script (see docs/mock-nvml.md).
exec python3 "$(dirname "$0")/make-driver-root.py" "$@"
