/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text read straight into shared values (base-jdedup.h): each value is looked up in the
 * table as soon as its parts are read, so that a value seen before costs a lookup and nothing is
 * built, freed or copied for it. Members a caller will drop can be read through without being
 * built at all.
 *
 * It reads a subset of what jansson's json_loadb reads with JSON_REJECT_DUPLICATES, into the same
 * values: whatever it is unsure of (the text is not such JSON, nesting or value count past the
 * caps), it refuses, and the caller reads the text another way.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base-jdedup.h"
#include "base-macro.h"

/* A member's key, as read (not NUL-terminated). */
struct jread_key {
    const char *s;
    size_t len;
};

bool jread_key_is(const struct jread_key *k, const char *s);

/*
 * Which members to build: asked for the members of the value read (depth 1) and of the mapping
 * values under them, down to JREAD_KEEP_DEPTH, with the keys from the value read down to the
 * member (path[depth - 1] is the member's own) and the value's "kind" when a string member of that
 * name came before (else NULL). A member not kept is still read through (it must be valid too),
 * and is left out of its mapping.
 */
#define JREAD_KEEP_DEPTH 3
typedef bool (*jread_keep_fn)(void *arg, const char *kind, const struct jread_key *path,
                              size_t depth);

struct jread_part;

struct jread {
    struct jdedup *table;
    jread_keep_fn keep; /* or NULL: everything */
    void *keep_arg;
    size_t level;     /* containers the values read sit in, counted against max_depth */
    size_t max_depth; /* containers nested, those of level included */
    size_t max_nodes; /* values read in all (a mapping's keys count too) */
    size_t nodes;     /* values read so far */
    /* scratch, kept from one value to the next */
    struct jread_part *parts;
    size_t nparts, aparts;
    char *buf; /* strings with escapes, decoded */
    size_t nbuf, abuf;
};

/* A reader into t (the rest as the caller sets it; max_depth and max_nodes 0: no cap). */
void jread_init(struct jread *r, struct jdedup *t);
void jread_release(struct jread *r);

/*
 * The JSON value at p (before end) as the table's value equal to it (borrowed: the table holds
 * it), *next just past it. NULL when it is refused: *err is -EINVAL for text that is not one JSON
 * value as jansson reads it (duplicate keys included), -E2BIG past max_depth or max_nodes,
 * -ENOMEM.
 */
json_t *jread_value(struct jread *r, const char *p, const char *end, const char **next, int *err);
