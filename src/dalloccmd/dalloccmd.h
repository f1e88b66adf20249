/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane allocate`: the DRA structured allocator (src/dalloc) from the command line. The entry
 * point for src/main.c's command table, and the YAML writer it prints with.
 */
#pragma once

#include <jansson.h>

#include "base-strbuf.h"

/* argv[0] is "allocate". Returns the exit code: 0 allocated (claims printed), 1 no solution, 2 an
 * error (bad usage, invalid input, unknown class, CEL compile or runtime error). */
int dalloccmd_main(int argc, char **argv);
