/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sharing equal JSON values (hash-consing): a table through which values pass, giving back for each
 * one the first equal value that passed before. A cluster's objects repeat themselves — every GPU
 * of a node carries the same product name, brand and architecture as a {"string": ...} object,
 * every claim of a workload the same spec — and jansson spends a few hundred bytes on each small
 * object, so sharing them keeps a large input in a fraction of the memory.
 *
 * Equal means: the same type; strings with the same bytes; integers with the same value; reals
 * with the same bits; arrays with equal elements in the same order; objects with the same keys in
 * the same order and equal values (key order is kept because it is printed). Shared values must not
 * be modified afterwards, by anybody: the caller hands values it will only read.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-macro.h"

struct jdedup_slot;

struct jdedup {
    struct jdedup_slot *slots;
    size_t used;
    size_t alloc; /* a power of two, or 0 */
    /* Keep copies, never the values passed in: what the table holds is then allocated in one run,
     * apart from the memory of what it was passed (a parser's, to be freed), which leaves no
     * holes between the values kept. */
    bool copy;
};

/* An empty table (a zeroed struct jdedup is one too). */
void jdedup_init(struct jdedup *t);
/* Drops the table's references (the values live on in whoever holds them); copy stays. */
void jdedup_release(struct jdedup *t);

/* The value equal to v that the table holds, made of shared parts: v itself when no equal value
 * passed before and its parts are already the shared ones (a copy of it when t->copy), else a new
 * container of the shared parts or the earlier equal value. v is borrowed and never modified; the
 * result is a new reference (NULL: out of memory). Values nested deeper than JDEDUP_MAX_DEPTH are
 * not shared. */
#define JDEDUP_MAX_DEPTH 128
json_t *jdedup_value(struct jdedup *t, json_t *v);

/* The same for a value some of whose containers may be the table's own already (say, a new
 * object made of a shared value's members): those are taken as they are, without a look inside. */
json_t *jdedup_value_over(struct jdedup *t, json_t *v);
/* Whether container v is one of the table's own values (false for scalars). */
bool jdedup_holds(const struct jdedup *t, json_t *v);

/* The table's value equal to the one these parts make, added when it is new (a parser's way in:
 * nothing is built for a value seen before). Elements must be the table's own values or jansson's
 * null/true/false; keys are not checked for duplicates. Borrowed: the table holds it (NULL: out
 * of memory). */
json_t *jdedup_string(struct jdedup *t, const char *s, size_t len);
json_t *jdedup_integer(struct jdedup *t, json_int_t i);
json_t *jdedup_real(struct jdedup *t, double x);
json_t *jdedup_array(struct jdedup *t, json_t *const *v, size_t n);
json_t *jdedup_object(struct jdedup *t, const char *const *keys, const size_t *klen,
                      json_t *const *v, size_t n);

/* Values the table holds. */
size_t jdedup_size(const struct jdedup *t);
