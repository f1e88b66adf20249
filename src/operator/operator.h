/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator module: `gpuplane operator`, the reconciler of NVIDIA's ClusterPolicy into ordered
 * DaemonSet states, and `gpuplane operator render`, which prints the objects a policy renders to.
 */
#pragma once

/* `gpuplane operator ...`: `render` goes to op_render_main(), anything else to the daemon. */
int op_main(int argc, char **argv);

/* `gpuplane operator render -f FILE [-n NAMESPACE] [-o yaml|json]` (argv[0] is "render"). */
int op_render_main(int argc, char **argv);

/* `gpuplane operator [flags]`: the reconciler (operator-daemon.c). */
int op_daemon_main(int argc, char **argv);
