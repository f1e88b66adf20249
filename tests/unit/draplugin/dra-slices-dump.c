/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prints the ResourceSlices dra_slices_build makes of a mock node profile, as one JSON array, for
 * the integration test that checks them against the official OpenAPI schema and the examples:
 *
 *   dra-slices-dump PROFILE.yaml NODE [SYSFS_ROOT [UNHEALTHY_INDEX...]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra-slices.h"

int main(int argc, char **argv)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    _cleanup_json_ json_t *slices = NULL;
    _cleanup_free_ bool *unhealthy = NULL;
    struct diag d;
    int r;

    if (argc < 3) {
        fprintf(stderr, "usage: %s PROFILE.yaml NODE [SYSFS_ROOT [UNHEALTHY_INDEX...]]\n", argv[0]);
        return 2;
    }
    diag_init(&d);
    if (setenv("MOCK_NVML_PROFILE", argv[1], 1) < 0 ||
        (r = gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml)) < 0 ||
        (r = gpu_inventory_read(nvml, NULL, &d, &inv)) < 0) {
        fprintf(stderr, "%s: %s\n", argv[1], d.msg);
        return 1;
    }
    unhealthy = calloc(inv->n_devices + 1, sizeof(*unhealthy));
    if (!unhealthy)
        return 1;
    for (int i = 4; i < argc; i++) {
        char *end = NULL;
        unsigned long idx = strtoul(argv[i], &end, 10);
        if (!end || *end || idx >= inv->n_devices) {
            fprintf(stderr, "bad GPU index %s\n", argv[i]);
            return 2;
        }
        unhealthy[idx] = true;
    }
    struct dra_slices_options opts = {
        .node = argv[2],
        .driver = "gpu.nvidia.com",
        .sysfs_root = argc > 3 ? argv[3] : "/nonexistent",
        .unhealthy = unhealthy,
    };
    if ((r = dra_slices_build(inv, &opts, 1, &d, &slices)) < 0) {
        fprintf(stderr, "dra_slices_build: %s\n", d.msg);
        return 1;
    }
    if (json_dumpf(slices, stdout, JSON_INDENT(2)) < 0 || puts("") < 0)
        return 1;
    return 0;
}
