/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane validate`: the node checks of NVIDIA's operator validator (nvidia-validator), under its
 * file names, variables and flags. Each check (driver, toolkit, plugin, cuda) removes its status
 * file under the output directory (/run/nvidia/validations) and writes it again, atomically, once
 * the check passes; `validate wait` blocks until named status files exist, so a pod's init
 * container can hold a component back until the node is ready for it; `validate cleanup` removes
 * the status files when the validator goes away. See docs/validate.md.
 */
#pragma once

/* The subcommand's entry point: argv[0] is "validate". Returns the process exit code: 0 passed,
 * 1 failed (the reason on stderr), 2 usage error. */
int validate_main(int argc, char **argv);
