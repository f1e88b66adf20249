/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the reader of container runtime configurations (`gpuplane validate
 * toolkit` reads the host's containerd and CRI-O TOML): any text, never a crash or a read past
 * its end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "validate-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct validate_runtime_hit hit;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    validate_scan_runtime_config(text, "nvidia", &hit);
    free(text);
    return 0;
}
