/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the YAML/JSON document loader: any bytes must give either documents or a
 * positioned diagnostic, never a crash, a leak or unbounded memory. Successful loads also exercise
 * the position lookups and the typed readers the config parsers use.
 */
#include <stddef.h>
#include <stdint.h>

#include "base.h"

static void walk(const struct doc *doc, json_t *value, int depth)
{
    int line, col;
    (void)doc_position(doc, value, &line, &col);
    if (depth > DOC_MAX_DEPTH || !json_is_object(value))
        return;
    const char *key;
    json_t *member;
    json_object_foreach(value, key, member)
    {
        const char *s;
        int64_t i;
        bool b;
        struct diag d;
        (void)doc_get_string(doc, value, key, false, NULL, &d, &s);
        (void)doc_get_int(doc, value, key, false, 0, INT64_MIN, INT64_MAX, &d, &i);
        (void)doc_get_bool(doc, value, key, false, false, &d, &b);
        walk(doc, member, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct diag d;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    if (doc_load_string("fuzz.yaml", (const char *)data, size, &d, &doc) < 0)
        return 0;
    for (size_t i = 0; i < doc_count(doc); i++)
        walk(doc, doc_root(doc, i), 0);
    return 0;
}
