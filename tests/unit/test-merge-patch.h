/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the API server does with a merge patch of an object's metadata maps (labels, annotations,
 * RFC 7386 one level down): members set, null members removed, a missing map made. Tests and fuzz
 * targets apply the operator's patches with it to check that a patched object needs no further
 * patch.
 */
#pragma once

#include <jansson.h>

static void test_merge_metadata(json_t *obj, const json_t *patch)
{
    json_t *meta = json_object_get(obj, "metadata"), *changes, *target, *v;
    const char *part, *k;

    json_object_foreach(json_object_get(patch, "metadata"), part, changes)
    {
        target = json_object_get(meta, part);
        if (!json_is_object(target)) {
            target = json_object();
            json_object_set_new(meta, part, target);
        }
        json_object_foreach(changes, k, v)
        {
            if (json_is_null(v))
                json_object_del(target, k);
            else
                json_object_set(target, k, v);
        }
    }
}
