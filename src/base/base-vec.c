/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The capped array. Sizes are checked for overflow before every multiplication, because the element
 * count can come from outside input.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base-vec.h"

void vec_init(struct vec *v, size_t elem_size, size_t cap)
{
    v->items = NULL;
    v->len = 0;
    v->alloc = 0;
    v->elem_size = elem_size;
    v->cap = cap ? cap : VEC_DEFAULT_CAP;
}

void vec_release(struct vec *v)
{
    free(v->items);
    v->items = NULL;
    v->len = 0;
    v->alloc = 0;
}

int vec_reserve(struct vec *v, size_t n)
{
    size_t need, alloc;
    void *p;

    if (n > v->cap || v->len > v->cap - n)
        return -ENOBUFS;
    need = v->len + n;
    if (need <= v->alloc)
        return 0;
    alloc = v->alloc ? v->alloc : 8;
    while (alloc < need)
        alloc = alloc > SIZE_MAX / 2 ? need : alloc * 2;
    if (alloc > v->cap)
        alloc = v->cap;
    if (v->elem_size && alloc > SIZE_MAX / v->elem_size)
        return -ENOMEM;
    p = realloc(v->items, alloc * v->elem_size);
    if (!p)
        return -ENOMEM;
    v->items = p;
    v->alloc = alloc;
    return 0;
}

int vec_push(struct vec *v, const void *elem)
{
    int r;

    r = vec_reserve(v, 1);
    if (r < 0)
        return r;
    memcpy((char *)v->items + v->len * v->elem_size, elem, v->elem_size);
    v->len++;
    return 0;
}

void *vec_at(const struct vec *v, size_t i)
{
    assert(i < v->len);
    return (char *)v->items + i * v->elem_size;
}

void *vec_detach(struct vec *v, size_t *ret_len)
{
    void *p = v->items;

    if (ret_len)
        *ret_len = v->len;
    v->items = NULL;
    v->len = 0;
    v->alloc = 0;
    return p;
}
