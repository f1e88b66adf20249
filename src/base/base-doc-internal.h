/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the document reader share among themselves: struct doc, its position table
 * (base-doc-pos.c), core-schema scalar resolution (base-doc-scalar.c) and the message helper both
 * the builder and the scalar rules fail through. base-doc.c drives libfyaml and builds the values;
 * base-doc-get.c reads them back for callers.
 */
#pragma once

#include <jansson.h>
#include <libfyaml.h>
#include <stdbool.h>
#include <stddef.h>

#include "base-doc.h"
#include "base-vec.h"

/* libfyaml's functions, resolved while a parse holds the library (base-doc-fy.c). */
struct doc_fy {
    typeof(fy_diag_cfg_default) *diag_cfg_default;
    typeof(fy_diag_create) *diag_create;
    typeof(fy_diag_destroy) *diag_destroy;
    typeof(fy_diag_errors_iterate) *diag_errors_iterate;
    typeof(fy_diag_set_collect_errors) *diag_set_collect_errors;
    typeof(fy_event_get_anchor_token) *event_get_anchor_token;
    typeof(fy_event_get_tag_token) *event_get_tag_token;
    typeof(fy_event_get_token) *event_get_token;
    typeof(fy_event_start_mark) *event_start_mark;
    typeof(fy_parser_create) *parser_create;
    typeof(fy_parser_destroy) *parser_destroy;
    typeof(fy_parser_event_free) *parser_event_free;
    typeof(fy_parser_get_stream_error) *parser_get_stream_error;
    typeof(fy_parser_parse) *parser_parse;
    typeof(fy_parser_set_string) *parser_set_string;
    typeof(fy_token_get_text) *token_get_text;
    typeof(fy_token_scalar_style) *token_scalar_style;
};
extern struct doc_fy doc_fy;

/* Maps libfyaml for one parse; d names the package when it is missing. */
_wur_ int doc_fy_acquire(struct diag *d);
/* Ends a parse: the library is unmapped when no parse holds it. */
void doc_fy_release(void);
/* Keeps the library mapped for good (a parser that cannot be destroyed still points into it). */
void doc_fy_pin(void);
bool doc_fy_loaded(void);

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

/* How doc_parse_text reads a text. */
#define DOC_EVERY SIZE_MAX
struct doc_parse_opts {
    size_t max_nodes; /* values per document, aliases expanded */
    bool positions;   /* keep a position per value (of document only_doc alone, if set) */
    /* DOC_EVERY, or the one document wanted: the others are built and dropped, the parse ends
     * after it */
    size_t only_doc;
    /* Where the text starts in its source (1, 1 for a whole file): positions and messages are in
     * the source's lines and columns. */
    int line0, col0;
    /* When set, each finished document goes to each() (root borrowed) instead of doc->roots;
     * a negative return ends the parse with that error, a positive one ends it early. */
    int (*each)(void *arg, json_t *root, size_t index, struct diag *d);
    void *each_arg;
};

/* Parses text (checked to be UTF-8 without NUL first) into doc. 0, > 0 when each() or only_doc
 * ended the parse early, or a negative errno with d. */
_wur_ int doc_parse_text(struct doc *doc, const char *text, size_t len,
                         const struct doc_parse_opts *o, struct diag *d);
/* An empty doc called name. */
_wur_ int doc_new(const char *name, struct doc **ret);
/* The value cap of limits for an input of len bytes. */
size_t doc_max_nodes(const struct doc_limits *limits, size_t len);

/* Fails with "name:line:col: what", or "name: what" when line is 0 (no position); returns err. */
int doc_fail_mark(const struct doc *doc, struct diag *d, int line, int col, int err,
                  const char *what);

/* The value of a scalar event at line:col per the YAML 1.2 core schema and its explicit tag
 * (returned with a reference). */
_wur_ int doc_scalar_resolve(const struct doc *doc, struct diag *d, struct fy_event *ev, int line,
                             int col, json_t **ret);

/* Reads the file at path within *limits (NULL: doc_limits_config, written back) into *ret_text
 * (the caller frees it); errors "path: larger than N bytes" or "path: <strerror>" in d. */
_wur_ int doc_read_file(const char *path, const struct doc_limits **limits, char **ret_text,
                        size_t *ret_len, struct diag *d);
