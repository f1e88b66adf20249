/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the streaming loader (doc_load_string_each: jansson for JSON, the YAML
 * reader for the rest and for whatever jansson does not read as it would), checked against the
 * whole-document reader on every input: when the whole-document reader takes the input, the
 * streaming one hands exactly its values (a List item by item); when it refuses it, the streaming
 * one refuses with the same message, or takes it only as JSON that jansson reads whole (JSON the
 * YAML reader cannot read, such as a DEL character in a string). Every value handed is read again
 * with positions (doc_where_reload), which must hold the same value when it succeeds. A second
 * load with a preparing step and Lists split in two halves from the first byte (two threads) must
 * give exactly what the first gave, and so must a third that also reads a List's items straight
 * into shared values (a table per worker, every member kept).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base-jdedup.h"
#include "base.h"

static const struct doc_limits LIMITS = {.max_bytes = (size_t)1 << 20};

static void add_value(struct strbuf *sb, size_t doc, size_t item, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    if (!text)
        abort();
    if (strbuf_addf(sb, "%zu/%zu %s\n", doc, item, text) < 0)
        abort();
    free(text);
}

static int collect(void *arg, json_t *v, const struct doc_where *where, struct diag *d)
{
    struct doc *again = NULL;
    struct diag rd;

    (void)d;
    add_value(arg, where->doc, where->item, v);
    if (doc_where_reload(where, &rd, &again) == 0) {
        /* compared as text: json_equal looks keys up as C strings, and keys may hold "\0" */
        char *a = json_dumps(doc_root(again, 0), JSON_COMPACT | JSON_ENCODE_ANY);
        char *b = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

        if (!a || !b || strcmp(a, b) != 0)
            abort();
        free(a);
        free(b);
        doc_free(again);
    }
    return 0;
}

static int whole(const char *text, size_t size, struct strbuf *out, struct diag *d)
{
    struct doc *doc = NULL;
    int r = doc_load_string_limits("fuzz", text, size, &LIMITS, d, &doc);

    if (r < 0)
        return r;
    for (size_t i = 0; i < doc_count(doc); i++) {
        json_t *root = doc_root(doc, i), *items = json_object_get(root, "items"), *x;
        const char *kind = json_string_value(json_object_get(root, "kind"));
        size_t k;

        if (kind && strcmp(kind, "List") == 0 && json_is_array(items)) {
            json_array_foreach(items, k, x) add_value(out, i, k, x);
        } else {
            add_value(out, i, DOC_WHOLE, root);
        }
    }
    doc_free(doc);
    return 0;
}

/* The preparing step, splitting every List in two halves: what it makes must reach fn. */
static json_t *prepare(void *arg, unsigned worker, json_t *v)
{
    (void)arg;
    if (worker > 1)
        abort();
    return json_incref(v);
}

/* Each worker's table: arg is the call's two tables. */
static struct jdedup *table_of(void *arg, unsigned worker)
{
    struct jdedup *tables = arg;

    if (worker > 1)
        abort();
    return &tables[worker];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jdedup tables[2];
    const struct doc_prep prep = {.fn = prepare, .split_bytes = 1};
    const struct doc_prep prep3 = {
        .fn = prepare, .arg = tables, .split_bytes = 1, .table = table_of, .keep = NULL};
    struct strbuf want = STRBUF_INIT, got = STRBUF_INIT, got2 = STRBUF_INIT, got3 = STRBUF_INIT;
    const char *text = (const char *)data;
    struct diag dw, de, d2, d3;
    int rw, re, r2, r3;

    jdedup_init(&tables[0]);
    jdedup_init(&tables[1]);
    diag_init(&dw);
    diag_init(&de);
    diag_init(&d2);
    diag_init(&d3);
    rw = whole(text, size, &want, &dw);
    re = doc_load_string_each("fuzz", text, size, &LIMITS, collect, &got, &de);
    /* two workers give what one does */
    r2 = doc_load_string_each_prep("fuzz", text, size, &LIMITS, &prep, collect, &got2, &d2);
    if (r2 != re || strcmp(strbuf_str(&got), strbuf_str(&got2)) != 0 ||
        (re < 0 && strcmp(de.msg, d2.msg) != 0))
        abort();
    /* and so do two workers reading items straight into their tables */
    r3 = doc_load_string_each_prep("fuzz", text, size, &LIMITS, &prep3, collect, &got3, &d3);
    if (r3 != re || strcmp(strbuf_str(&got), strbuf_str(&got3)) != 0 ||
        (re < 0 && strcmp(de.msg, d3.msg) != 0))
        abort();
    if (rw == 0) {
        if (re != 0 || strcmp(strbuf_str(&want), strbuf_str(&got)) != 0)
            abort();
    } else if (re < 0) {
        if (re != rw || strcmp(dw.msg, de.msg) != 0)
            abort();
    } else {
        json_error_t e;
        json_t *v = json_loadb(text, size, JSON_REJECT_DUPLICATES, &e);

        if (!v)
            abort();
        json_decref(v);
    }
    strbuf_release(&want);
    strbuf_release(&got);
    strbuf_release(&got2);
    strbuf_release(&got3);
    jdedup_release(&tables[0]);
    jdedup_release(&tables[1]);
    return 0;
}
