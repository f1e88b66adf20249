/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable array of fixed-size elements with a hard cap on the element count. Elements are copied
 * in by value; pointers into the array are invalidated by the next push.
 */
#pragma once

#include <stddef.h>

#include "base-macro.h"

#define VEC_DEFAULT_CAP ((size_t)1 << 20)

struct vec {
    void *items;
    size_t len;
    size_t alloc;
    size_t elem_size;
    size_t cap; /* the most elements it may ever hold */
};

/* cap 0 means VEC_DEFAULT_CAP. */
void vec_init(struct vec *v, size_t elem_size, size_t cap);
/* Frees the array (not what elements point to). */
void vec_release(struct vec *v);

/* Copies *elem to the end. 0, -ENOBUFS past the cap, -ENOMEM. */
_wur_ int vec_push(struct vec *v, const void *elem);
/* Makes room for n more elements without changing len. */
_wur_ int vec_reserve(struct vec *v, size_t n);
/* Element i (i < len). */
void *vec_at(const struct vec *v, size_t i);
/* Gives the array to the caller (free() it) and leaves v empty. */
void *vec_detach(struct vec *v, size_t *ret_len);

#define VEC_AT(v, type, i) ((type *)vec_at((v), (i)))
