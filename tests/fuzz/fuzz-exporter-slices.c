/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the exporter's cache of NVIDIA's DRA devices: the input is a JSON array of
 * [event, slice] pairs (event 0 added, 1 modified, 2 deleted, 3 synced) applied to a cache of at
 * most 16 devices. Malformed slices are refused, never a crash or a leak. After each event every
 * device the slice lists is looked up in its pool: what is found has its strings, a GPU its UUID
 * and no parent, a MIG device its parent; the cache never holds more than its cap.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exporter-slices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_DEVICES 16

static void check_found(const struct exporter_dra_device *d)
{
    if (!d->uuid || !d->parent_uuid || !d->profile)
        __builtin_trap();
    if (d->kind == EXPORTER_DRA_GPU && (!d->uuid[0] || d->parent_uuid[0] || d->profile[0]))
        __builtin_trap();
    if (d->kind == EXPORTER_DRA_MIG && !d->parent_uuid[0])
        __builtin_trap();
}

static void look_up(const struct exporter_slices *s, json_t *slice)
{
    json_t *spec = json_object_get(slice, "spec"), *dev;
    const char *pool = json_string_value(json_object_get(json_object_get(spec, "pool"), "name"));
    size_t i;
    json_array_foreach(json_object_get(spec, "devices"), i, dev)
    {
        struct exporter_dra_device d;
        const char *name = json_string_value(json_object_get(dev, "name"));
        if (exporter_slices_find(s, pool, name, &d))
            check_found(&d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct exporter_slices_options o = {.max_devices = MAX_DEVICES};
    struct exporter_slices *s = NULL;
    json_error_t err;
    json_t *events = json_loadb((const char *)data, size, 0, &err), *ev;
    size_t i;

    if (exporter_slices_new(&o, &s) < 0)
        __builtin_trap();
    json_array_foreach(events, i, ev)
    {
        json_int_t kind = json_integer_value(json_array_get(ev, 0));
        json_t *slice = json_array_get(ev, 1);
        if (kind < 0 || kind > 3)
            continue;
        (void)!exporter_slices_apply(s, (enum kube_event)kind, slice);
        look_up(s, slice);
        if (exporter_slices_count(s) > MAX_DEVICES)
            __builtin_trap();
    }
    exporter_slices_free(s);
    json_decref(events);
    return 0;
}
