/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane cel`: evaluate a CEL expression the way Kubernetes evaluates DRA device selectors, from
 * the command line (cel eval). The entry point for src/main.c's command table.
 */
#pragma once

/* argv[0] is "cel". Returns the process exit code: 0 value printed, 1 evaluation error, 2 compile
 * error or bad usage. */
int celcmd_main(int argc, char **argv);
