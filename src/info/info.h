/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuplane info`: the node's GPUs, MIG devices and topology, as tables or JSON. */
#pragma once

/* The subcommand's entry point; argv[0] is "info". Returns the process exit code. */
int info_main(int argc, char **argv);
