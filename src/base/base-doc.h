/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration documents: YAML 1.2 (multi-document streams; JSON is read as YAML) loaded into
 * jansson values that remember where each value came from, so that both syntax errors and later
 * semantic errors ("gpus[2].memory: expected an integer") are reported as "file:line:col: message".
 *
 * Scalars follow the YAML 1.2 core schema: plain null/~/empty -> null, true/false -> boolean,
 * decimal, 0x and 0o integers -> integer (int64, exact; out of range is an error), decimal floats
 * -> real, anything else or any quoted scalar -> string. .inf/.nan are an error: JSON (and jansson)
 * cannot hold them. An explicit !!str/!!int/!!float/!!bool/!!null tag must agree with the text;
 * other tags are ignored. Mapping keys must be strings and unique ("<<" merge keys are not
 * special). Anchors and aliases are resolved (an alias shares the anchored value, so it reports the
 * anchor's position); the total size, the nesting depth and the number of values after alias
 * expansion are capped (struct doc_limits below).
 *
 * Errors: -EINVAL for syntax and schema errors, -ERANGE for numbers out of range, -ELOOP past the
 * depth cap, -E2BIG past the value cap, -EFBIG past the size cap, -ENOMEM. Strings must be valid
 * UTF-8.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-jread.h"

#define DOC_MAX_DEPTH 64
/* Configuration files: small, and possibly written by someone else (the device plugin's). */
#define DOC_MAX_BYTES ((size_t)16 << 20)
/* Values per document, counting each alias as the size of what it expands to ("billion laughs"). */
#define DOC_MAX_NODES ((size_t)1 << 20)
/* Manifests the user hands to the command line (gpuplane allocate/schedule -f): a cluster's
 * objects. A 5,000-node cluster with 40,000 pods is about 45 MiB of JSON. */
#define DOC_MANIFEST_MAX_BYTES ((size_t)256 << 20)

/* What one load accepts. Past max_bytes: -EFBIG; past max_nodes values in one document: -E2BIG. */
struct doc_limits {
    size_t max_bytes;
    /* 0 scales with the input: as many values as it has bytes, and at least DOC_MAX_NODES. Every
     * value takes at least one byte of input, so only aliases can get past that, and the memory
     * the values take stays linear in the input's size. */
    size_t max_nodes;
    /* The caller never asks doc_position (it names objects and fields in its messages instead):
     * do not keep a position per value, which for large inputs costs as much as the values. Syntax
     * errors still carry file:line:col. */
    bool no_positions;
};

/* DOC_MAX_BYTES and DOC_MAX_NODES: what doc_load_file() and doc_load_string() apply. */
extern const struct doc_limits doc_limits_config;
/* DOC_MANIFEST_MAX_BYTES, values scaled with the input, no positions kept. */
extern const struct doc_limits doc_limits_manifest;

struct doc;

/* Loads every document of a YAML stream, within doc_limits_config. On a syntax error, d says
 * "file:line:col: message". The name is what messages call the source (the path for a file). */
_wur_ int doc_load_file(const char *path, struct diag *d, struct doc **ret);
_wur_ int doc_load_string(const char *name, const char *text, size_t len, struct diag *d,
                          struct doc **ret);
/* The same within other limits (NULL: doc_limits_config). */
_wur_ int doc_load_file_limits(const char *path, const struct doc_limits *limits, struct diag *d,
                               struct doc **ret);
_wur_ int doc_load_string_limits(const char *name, const char *text, size_t len,
                                 const struct doc_limits *limits, struct diag *d, struct doc **ret);
struct doc *doc_free(struct doc *doc);
DEFINE_POINTER_CLEANUP(struct doc, doc_free)

/* Number of documents in the stream, and document i (borrowed: owned by doc). */
size_t doc_count(const struct doc *doc);
json_t *doc_root(const struct doc *doc, size_t i);
const char *doc_name(const struct doc *doc);

/* Where a value of this doc came from. false if unknown (e.g. the shared null/true/false singletons
 * of jansson have no position of their own; positions of their parent key are used then). */
bool doc_position(const struct doc *doc, const json_t *value, int *ret_line, int *ret_col);
/* Where the key of obj's member key came from; false if unknown. */
bool doc_member_position(const struct doc *doc, const json_t *obj, const char *key, int *ret_line,
                         int *ret_col);

/*
 * Streaming loads, for manifests too large to hold as values twice (a cluster's objects): each
 * object goes to fn as soon as it is built and the loader keeps nothing, so what stays in memory
 * is what fn keeps. A document that is a `kind: List` with an `items` sequence is handed item by
 * item, any other document whole, an empty one as null, in input order.
 *
 * JSON (a text whose first character after white space is '{' or '[') is parsed by jansson
 * straight away, a List's items one at a time (even when its "kind" comes after its "items", as
 * kubectl writes it), never as one tree. Whatever jansson does not read exactly as the YAML reader
 * would — a syntax error, a YAML-only construct, duplicate keys, nesting past DOC_MAX_DEPTH — is
 * read again as YAML from the start, and handing goes on with the first item not handed yet:
 * values, limits and error messages (file:line:col) are those of doc_load_*_limits. No positions
 * are kept; doc_where_reload reads a value again with them when a message needs one.
 *
 * fn borrows value (it takes a reference to keep it). A negative return ends the load with that
 * error and d as fn left it; a positive one ends the load early, and is returned. Otherwise 0, or
 * a negative errno with d for the input, as doc_load_*_limits.
 */
#define DOC_WHOLE SIZE_MAX
struct doc_src;
struct doc_where {
    size_t doc;                /* the document's index in the stream (0: the JSON text) */
    size_t item;               /* the index in the document's List items, or DOC_WHOLE */
    const struct doc_src *src; /* the input, valid while fn runs */
    size_t off, len;           /* a JSON item's own bytes in the input (len 0: not known) */
};
typedef int (*doc_each_fn)(void *arg, json_t *value, const struct doc_where *where, struct diag *d);
_wur_ int doc_load_file_each(const char *path, const struct doc_limits *limits, doc_each_fn fn,
                             void *arg, struct diag *d);
_wur_ int doc_load_string_each(const char *name, const char *text, size_t len,
                               const struct doc_limits *limits, doc_each_fn fn, void *arg,
                               struct diag *d);
/*
 * The same with a step before fn: prep->fn makes what fn gets of each object (a new reference;
 * NULL: out of memory), e.g. the parts the caller keeps. It may run on a second thread: the items
 * of a JSON List of prep->split_bytes or more (0: DOC_SPLIT_BYTES) are parsed and prepared in two
 * halves at once, the second half with worker 1, everything else with worker 0 — calls for one
 * worker never overlap, calls for the two may. fn still gets everything in input order on the
 * caller's thread.
 */
#define DOC_SPLIT_BYTES ((size_t)4 << 20)
struct doc_prep {
    json_t *(*fn)(void *arg, unsigned worker, json_t *value);
    void *arg;
    size_t split_bytes;
    /* Optional: the items of a JSON List are read straight into the worker's table
     * (base-jread.h), keeping of each only the members keep says (NULL: all), and fn gets them
     * shared already. The tables must outlive the load. */
    struct jdedup *(*table)(void *arg, unsigned worker);
    jread_keep_fn keep;
};
_wur_ int doc_load_string_each_prep(const char *name, const char *text, size_t len,
                                    const struct doc_limits *limits, const struct doc_prep *prep,
                                    doc_each_fn fn, void *arg, struct diag *d);
/* Inside fn only: reads the value `where` names again, with a position per value in the lines and
 * columns of the whole input (JSON: only that value's text is read again). *ret holds it as its
 * one root; *ret is what doc_position and doc_member_position take. */
_wur_ int doc_where_reload(const struct doc_where *where, struct diag *d, struct doc **ret);

/* Fails with "file:line:col: message" at value's position (or "file: message" when unknown);
 * returns err. */
int doc_fail(const struct doc *doc, const json_t *value, struct diag *d, int err, const char *fmt,
             ...) _printf_(5, 6);

/*
 * Typed field readers for mappings. Each looks up key in obj; a missing key gives the default when
 * required is false and an error at obj's position otherwise; a value of the wrong type gives an
 * error at the value's position naming the key. Results are borrowed from doc.
 */
_wur_ int doc_get_string(const struct doc *doc, const json_t *obj, const char *key, bool required,
                         const char *def, struct diag *d, const char **ret);
_wur_ int doc_get_int(const struct doc *doc, const json_t *obj, const char *key, bool required,
                      int64_t def, int64_t min, int64_t max, struct diag *d, int64_t *ret);
_wur_ int doc_get_bool(const struct doc *doc, const json_t *obj, const char *key, bool required,
                       bool def, struct diag *d, bool *ret);
/* An array or object member (NULL result when absent and not required). */
_wur_ int doc_get_array(const struct doc *doc, const json_t *obj, const char *key, bool required,
                        struct diag *d, json_t **ret);
_wur_ int doc_get_object(const struct doc *doc, const json_t *obj, const char *key, bool required,
                         struct diag *d, json_t **ret);
/* What messages call the YAML type of v: "mapping", "sequence", "string", "integer", "number",
 * "boolean", "null", or "nothing" for NULL (an absent value). */
const char *doc_type_name(const json_t *v);
/* Fails at the first key of obj that is not in the NULL-terminated list: catches typos in configs.
 */
_wur_ int doc_check_keys(const struct doc *doc, const json_t *obj, const char *const *allowed,
                         struct diag *d);

/* jansson (>= 2.9, GCC/Clang) itself defines json_decrefp(json_t **), which this uses. */
#define _cleanup_json_ _cleanup_(json_decrefp)
