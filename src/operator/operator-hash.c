/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia.com/last-applied-hash: what the operator compares to decide whether a live object must be
 * written. The hash covers the object as rendered, canonically serialised (keys sorted, compact),
 * without the annotation itself and without status, so it depends only on what the policy asks
 * for: the same policy gives the same hash in every run and every build, and any change to a
 * rendered field changes it. FNV-1a over 64 bits, printed in decimal (NVIDIA prints its own 32-bit
 * FNV-1a in decimal: a different number, the same kind of string).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "operator-render.h"

#define FNV64_OFFSET UINT64_C(14695981039346656037)
#define FNV64_PRIME UINT64_C(1099511628211)

static int fnv_feed(const char *buffer, size_t size, void *data)
{
    uint64_t *h = data;

    for (size_t i = 0; i < size; i++) {
        *h ^= (unsigned char)buffer[i];
        *h *= FNV64_PRIME;
    }
    return 0;
}

/* A shallow copy of obj without status and without the hash annotation (NULL on ENOMEM). */
static json_t *strip(const json_t *obj)
{
    json_t *copy, *meta, *ann;

    if (!json_is_object(obj))
        return json_incref((json_t *)obj);
    copy = json_copy((json_t *)obj);
    if (!copy)
        return NULL;
    json_object_del(copy, "status");
    ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
    if (!json_object_get(ann, OP_HASH_ANNOTATION))
        return copy;
    meta = json_copy(json_object_get(obj, "metadata"));
    ann = json_copy(ann);
    /* An annotations map left empty hashes as no map, so an object hashes the same before the
     * annotation is added and after. */
    if (!meta || !ann || json_object_del(ann, OP_HASH_ANNOTATION) < 0 ||
        (json_object_size(ann) == 0
             ? json_object_del(meta, "annotations")
             : json_object_set_new(meta, "annotations", json_incref(ann))) < 0 ||
        json_object_set_new(copy, "metadata", json_incref(meta)) < 0) {
        json_decref(meta);
        json_decref(ann);
        json_decref(copy);
        return NULL;
    }
    json_decref(meta);
    json_decref(ann);
    return copy;
}

const char *op_object_hash(const json_t *obj, char buf[static 24])
{
    uint64_t h = FNV64_OFFSET;
    json_t *s = strip(obj);

    /* Without memory to copy the object, no hash can be compared: "0" never matches a real one
     * by accident more than any other value, and the next pass computes it again. */
    if (!s ||
        json_dump_callback(s, fnv_feed, &h, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY) < 0)
        h = 0;
    json_decref(s);
    snprintf(buf, 24, "%" PRIu64, h);
    return buf;
}
