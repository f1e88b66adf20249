/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuplane cdi generate`: the node's CDI spec for NVIDIA GPUs. */
#pragma once

/* The subcommand's entry point; argv[0] is "cdi". Returns the process exit code. */
int nvcdi_cmd_main(int argc, char **argv);
