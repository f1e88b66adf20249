/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the DRA allocator: a YAML/JSON stream of ResourceSlices, DeviceClasses,
 * ResourceClaims and Nodes is decoded, validated and allocated for node "n1" with every feature
 * gate on (the widest decode and search surface) and a small step budget. Any input must give a
 * result, "no solution" or a diagnostic — never a crash, a leak or an unbounded search.
 */
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "dalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    _cleanup_json_ json_t *out = NULL;
    struct dalloc_gates g;
    struct diag d;

    if (doc_load_string("fuzz.yaml", (const char *)data, size, &d, &doc) < 0)
        return 0;
    dalloc_gates_default(&g);
    if (dalloc_gates_parse(&g,
                           "DRADeviceTaints=true,DRAPartitionableDevices=true,"
                           "DRAConsumableCapacity=true,DRADeviceBindingConditions=true",
                           &d) < 0 ||
        dalloc_new("n1", &g, &a) < 0)
        return 0;
    dalloc_set_budget(a, 10000);
    for (size_t i = 0; i < doc_count(doc); i++)
        if (dalloc_add(a, doc_root(doc, i), &d) < 0)
            return 0;
    (void)dalloc_run(a, &d, &out);
    return 0;
}
