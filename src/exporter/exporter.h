/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane exporter`: Prometheus metrics of the node's GPUs under NVIDIA dcgm-exporter's names and
 * labels, read from NVML directly (no DCGM host engine), with the pod using each GPU from the
 * kubelet's pod-resources API. See docs/exporter.md.
 */
#pragma once

/* The subcommand (src/main.c). Returns an exit code. */
int exporter_main(int argc, char **argv);
