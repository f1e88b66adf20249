/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the profile loader share: the loader's state and the readers that turn profile
 * values into node fields. Every reader fails with "file:line:col: message" in L->d.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-doc.h"
#include "mock-internal.h"

struct loader {
    const struct doc *doc;
    struct diag *d;
    struct mock_node *node;
    const json_t *defaults;              /* NULL when the profile has none */
    const json_t *nvlink[MOCK_MAX_GPUS]; /* each GPU's nvlink mapping, for later checks */
    size_t gi_next, ci_next;
};

/* One accepted value of a keyword field (matched ignoring case). */
struct name_value {
    const char *name;
    unsigned value;
};

/* Readers (mock-profile-read.c). */
/* The mapping a GPU key is read from: the GPU's own, else defaults, else the GPU's (absent). */
const json_t *mock_pick(const struct loader *L, const json_t *gpu, const char *key);
/* A string member copied into dst of cap bytes; too long is an error. */
_wur_ int mock_read_str(struct loader *L, const json_t *obj, const char *key, bool required,
                        const char *def, char *dst, size_t cap);
_wur_ int mock_read_uint(struct loader *L, const json_t *obj, const char *key, bool required,
                         int64_t def, int64_t max, unsigned *ret);
/* A member naming one of the n entries of t; required when def is NULL. */
_wur_ int mock_read_name(struct loader *L, const json_t *obj, const char *key, const char *def,
                         const struct name_value *t, size_t n, unsigned *ret);
/* An optional UUID member; *dst keeps its derived default when the key is absent. */
_wur_ int mock_read_uuid(struct loader *L, const json_t *obj, const char *prefix, const char *seed,
                         char dst[MOCK_UUID_MAX]);
/* A PCI bus id value such as "0000:18:00.0". */
_wur_ int mock_read_bus_id(struct loader *L, const json_t *v, struct mock_pci *ret);

/* The `defaults` and `gpus` sections, with every GPU's NVLink and MIG (mock-profile-gpu.c). */
_wur_ int mock_load_gpus(struct loader *L, const json_t *root);
/* A GPU's `nvlink`, and after all GPUs, that direct links agree (mock-profile-nvlink.c). */
_wur_ int mock_read_nvlink(struct loader *L, const json_t *g, struct mock_gpu *gpu);
_wur_ int mock_check_peers(struct loader *L);
/* A GPU's `telemetry` (mock-telemetry.c); defaults when absent. */
_wur_ int mock_read_telemetry(struct loader *L, const json_t *g, struct mock_gpu *gpu);
/* A GPU's `processes` (mock-process.c), after its MIG instances. */
_wur_ int mock_read_processes(struct loader *L, const json_t *g, struct mock_gpu *gpu);
/* A GPU's `mig` (mock-profile-mig.c). */
_wur_ int mock_read_mig(struct loader *L, const json_t *g, struct mock_gpu *gpu);
