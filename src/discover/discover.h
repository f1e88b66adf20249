/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane discover`: GPU feature discovery, a drop-in for NVIDIA's GFD. It labels the node with
 * what its GPUs are (model, memory, family, compute capability, MIG and sharing, driver and CUDA
 * versions) through node-feature-discovery: the NodeFeature object or the local features file.
 * See docs/discover.md.
 */
#pragma once

/* The subcommand (src/main.c). Returns an exit code. */
int discover_main(int argc, char **argv);
