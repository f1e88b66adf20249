/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the document reader share among themselves: struct doc, its position table
 * (base-doc-pos.c), core-schema scalar resolution (base-doc-scalar.c) and the message helper both
 * the builder and the scalar rules fail through. base-doc.c drives libfyaml and builds the values;
 * base-doc-get.c reads them back for callers.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base-doc.h"
#include "base-vec.h"

struct fy_event;

/* One remembered position: of a value (key NULL) or of key within the mapping ptr. */
struct pos_entry {
    const void *ptr;
    char *key;
    int line;
    int col;
};

/* Open addressing with linear probing; keys are (pointer, member key) pairs. */
struct pos_table {
    struct pos_entry *slots;
    size_t used;
    size_t alloc; /* a power of two, or 0 */
};

struct doc {
    char *name;
    struct vec roots; /* json_t *, one reference each */
    struct pos_table pos;
};

/* jansson's null/true/false are process-wide singletons, so they can have no position of their
 * own. */
static inline bool doc_is_singleton(const json_t *v)
{
    return json_is_null(v) || json_is_boolean(v);
}

/* The entry of ptr (key NULL) or of its member key; NULL when none was recorded. */
struct pos_entry *doc_pos_find(const struct pos_table *t, const void *ptr, const char *key);
/* Remembers where ptr (or its member key) came from; the first position recorded wins. */
_wur_ int doc_pos_put(struct pos_table *t, const void *ptr, const char *key, int line, int col);
void doc_pos_release(struct pos_table *t);

/* Fails with "name:line:col: what", or "name: what" when line is 0 (no position); returns err. */
int doc_fail_mark(const struct doc *doc, struct diag *d, int line, int col, int err,
                  const char *what);

/* The value of a scalar event at line:col per the YAML 1.2 core schema and its explicit tag
 * (returned with a reference). */
_wur_ int doc_scalar_resolve(const struct doc *doc, struct diag *d, struct fy_event *ev, int line,
                             int col, json_t **ret);
