/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane dra-driver`: the DRA kubelet driver for NVIDIA GPUs, a drop-in for NVIDIA's
 * gpu.nvidia.com kubelet plugin. It registers with the kubelet's plugin watcher, serves the DRA
 * services (v1 and v1beta1) on <plugins dir>/<driver>/dra.sock, publishes the node's
 * ResourceSlices, and prepares claims: a per-claim CDI spec and a crash-safe checkpoint. See
 * docs/dra-driver.md.
 */
#pragma once

/* The subcommand (src/main.c). Returns an exit code. */
int dra_main(int argc, char **argv);
