/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The work queue (operator-queue.h): a small table of keys, each with its own state. The operator
 * has a handful of keys (the policy pass, the labelling pass), so a linear table beats any map.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "operator-queue.h"

#define ITEMS_MAX 64

struct item {
    bool used;
    char key[OP_QUEUE_KEY_MAX];
    bool ready;      /* waiting to be handed out */
    uint64_t seq;    /* when it became ready: the order of op_queue_get() */
    uint64_t due_ms; /* a delayed add, or OP_QUEUE_NEVER */
    bool processing; /* handed out, op_queue_done() not called yet */
    bool dirty;      /* added while processing */
    unsigned failures;
};

struct op_queue {
    uint64_t base_ms, max_ms;
    uint64_t seq;
    struct item items[ITEMS_MAX];
};

int op_queue_new(const struct op_queue_options *o, struct op_queue **ret)
{
    struct op_queue *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->base_ms = o && o->backoff_base_ms ? o->backoff_base_ms : 100;
    q->max_ms = o && o->backoff_max_ms ? o->backoff_max_ms : 3000;
    *ret = q;
    return 0;
}

struct op_queue *op_queue_free(struct op_queue *q)
{
    free(q);
    return NULL;
}

static struct item *find(const struct op_queue *q, const char *key)
{
    for (size_t i = 0; i < ITEMS_MAX; i++)
        if (q->items[i].used && strcmp(q->items[i].key, key) == 0)
            return (struct item *)&q->items[i];
    return NULL;
}

static int find_or_add(struct op_queue *q, const char *key, struct item **ret)
{
    size_t len = strlen(key);
    if (len == 0 || len >= OP_QUEUE_KEY_MAX)
        return -EINVAL;
    struct item *it = find(q, key);
    if (it) {
        *ret = it;
        return 0;
    }
    for (size_t i = 0; i < ITEMS_MAX; i++) {
        it = &q->items[i];
        if (it->used)
            continue;
        *it = (struct item){.used = true, .due_ms = OP_QUEUE_NEVER};
        memcpy(it->key, key, len + 1);
        *ret = it;
        return 0;
    }
    return -ENOBUFS;
}

/* An item that holds nothing any more gives its slot back. */
static void maybe_drop(struct item *it)
{
    if (!it->ready && !it->processing && !it->dirty && it->due_ms == OP_QUEUE_NEVER &&
        it->failures == 0)
        it->used = false;
}

static void make_ready(struct op_queue *q, struct item *it)
{
    if (it->processing) {
        it->dirty = true;
        return;
    }
    if (it->ready)
        return;
    it->ready = true;
    it->seq = q->seq++;
}

/* Delays that came due become adds. */
static void promote(struct op_queue *q, uint64_t now_ms)
{
    for (size_t i = 0; i < ITEMS_MAX; i++) {
        struct item *it = &q->items[i];
        if (it->used && it->due_ms <= now_ms) {
            it->due_ms = OP_QUEUE_NEVER;
            make_ready(q, it);
        }
    }
}

int op_queue_add(struct op_queue *q, const char *key, uint64_t now_ms)
{
    struct item *it;
    int r = find_or_add(q, key, &it);
    if (r < 0)
        return r;
    promote(q, now_ms);
    make_ready(q, it);
    return 0;
}

int op_queue_add_after(struct op_queue *q, const char *key, uint64_t now_ms, uint64_t delay_ms)
{
    if (delay_ms == 0)
        return op_queue_add(q, key, now_ms);
    struct item *it;
    int r = find_or_add(q, key, &it);
    if (r < 0)
        return r;
    uint64_t due = now_ms + delay_ms;
    if (due < it->due_ms)
        it->due_ms = due;
    return 0;
}

int op_queue_add_rate_limited(struct op_queue *q, const char *key, uint64_t now_ms,
                              uint64_t *ret_delay_ms)
{
    struct item *it;
    int r = find_or_add(q, key, &it);
    if (r < 0)
        return r;
    uint64_t delay = q->base_ms;
    for (unsigned i = 0; i < it->failures && delay < q->max_ms; i++)
        delay *= 2;
    if (delay > q->max_ms)
        delay = q->max_ms;
    if (it->failures < 64)
        it->failures++;
    if (ret_delay_ms)
        *ret_delay_ms = delay;
    return op_queue_add_after(q, key, now_ms, delay);
}

void op_queue_forget(struct op_queue *q, const char *key)
{
    struct item *it = find(q, key);
    if (!it)
        return;
    it->failures = 0;
    maybe_drop(it);
}

void op_queue_clear_delay(struct op_queue *q, const char *key)
{
    struct item *it = find(q, key);
    if (!it)
        return;
    it->due_ms = OP_QUEUE_NEVER;
    maybe_drop(it);
}

unsigned op_queue_failures(const struct op_queue *q, const char *key)
{
    const struct item *it = find(q, key);
    return it ? it->failures : 0;
}

bool op_queue_get(struct op_queue *q, uint64_t now_ms, char buf[static OP_QUEUE_KEY_MAX])
{
    promote(q, now_ms);
    struct item *best = NULL;
    for (size_t i = 0; i < ITEMS_MAX; i++) {
        struct item *it = &q->items[i];
        if (it->used && it->ready && (!best || it->seq < best->seq))
            best = it;
    }
    if (!best)
        return false;
    best->ready = false;
    best->processing = true;
    best->dirty = false;
    memcpy(buf, best->key, OP_QUEUE_KEY_MAX);
    return true;
}

void op_queue_done(struct op_queue *q, const char *key, uint64_t now_ms)
{
    struct item *it = find(q, key);
    if (!it || !it->processing)
        return;
    it->processing = false;
    promote(q, now_ms);
    if (it->dirty) {
        it->dirty = false;
        make_ready(q, it);
    }
    maybe_drop(it);
}

uint64_t op_queue_next_ms(struct op_queue *q, uint64_t now_ms)
{
    promote(q, now_ms);
    uint64_t next = OP_QUEUE_NEVER;
    for (size_t i = 0; i < ITEMS_MAX; i++) {
        const struct item *it = &q->items[i];
        if (!it->used)
            continue;
        if (it->ready)
            return 0;
        if (it->due_ms != OP_QUEUE_NEVER && it->due_ms - now_ms < next)
            next = it->due_ms - now_ms;
    }
    return next;
}

size_t op_queue_len(const struct op_queue *q)
{
    size_t n = 0;
    for (size_t i = 0; i < ITEMS_MAX; i++) {
        const struct item *it = &q->items[i];
        n += it->used && (it->ready || it->due_ms != OP_QUEUE_NEVER);
    }
    return n;
}
