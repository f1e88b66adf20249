/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's work queue, with the semantics of controller-runtime's rate-limited work queue,
 * so the reconciler behaves as NVIDIA's does under load and on errors:
 *
 *  - keys coalesce: adding a key that is already waiting does nothing, so a burst of events makes
 *    one pass;
 *  - a key is never handed out twice at once: one added while it is being processed is marked and
 *    becomes ready again when op_queue_done() is called (passes never overlap);
 *  - op_queue_add_after() delays a key (requeue-after); of two delays the earlier wins;
 *  - op_queue_add_rate_limited() delays a key by its own exponential back-off (base doubling up to
 *    max: NVIDIA's 100 ms to 3 s), counted per key until op_queue_forget() after a success.
 *
 * The queue has no clock and no timer: every call takes "now" in milliseconds (the event loop's
 * monotonic time), and op_queue_next_ms() says when the caller should look again, so the daemon
 * arms one timer and never polls. Ready keys come out in the order they became ready.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-macro.h"

#define OP_QUEUE_KEY_MAX 64 /* bytes of a key, NUL included */
#define OP_QUEUE_NEVER UINT64_MAX

struct op_queue;

struct op_queue_options {
    uint64_t backoff_base_ms; /* 0: 100 */
    uint64_t backoff_max_ms;  /* 0: 3000 */
};

_wur_ int op_queue_new(const struct op_queue_options *o, struct op_queue **ret);
struct op_queue *op_queue_free(struct op_queue *q);
DEFINE_POINTER_CLEANUP(struct op_queue, op_queue_free)

/* Makes key ready now. -EINVAL for an empty or too long key, -ENOBUFS past 64 keys. */
_wur_ int op_queue_add(struct op_queue *q, const char *key, uint64_t now_ms);

/* Makes key ready at now + delay_ms (delay 0: now). An earlier delay already set stays. */
_wur_ int op_queue_add_after(struct op_queue *q, const char *key, uint64_t now_ms,
                             uint64_t delay_ms);

/* Counts a failure of key and delays it by its back-off: base << (failures before this one),
 * capped at max. Returns the delay (ms) through ret_delay_ms when not NULL. */
_wur_ int op_queue_add_rate_limited(struct op_queue *q, const char *key, uint64_t now_ms,
                                    uint64_t *ret_delay_ms);

/* Forgets key's failures (after a pass that succeeded). */
void op_queue_forget(struct op_queue *q, const char *key);

/* Drops key's pending delay (a pass that left everything ready needs no requeue asked for by an
 * earlier one). A key that is ready stays ready. */
void op_queue_clear_delay(struct op_queue *q, const char *key);

/* How many failures key has counted. */
unsigned op_queue_failures(const struct op_queue *q, const char *key);

/*
 * Hands out the key that became ready first (a delayed key whose time has come counts as ready),
 * marking it as being processed: true and the key in buf, or false when none is ready. The caller
 * must call op_queue_done() with it.
 */
bool op_queue_get(struct op_queue *q, uint64_t now_ms, char buf[static OP_QUEUE_KEY_MAX]);

/* Ends the processing of key; if it was added meanwhile it becomes ready again. */
void op_queue_done(struct op_queue *q, const char *key, uint64_t now_ms);

/* Milliseconds until a key will be ready (0: one is ready now), or OP_QUEUE_NEVER. A delay that
 * comes due while its key is being processed makes the key ready after op_queue_done() instead. */
uint64_t op_queue_next_ms(struct op_queue *q, uint64_t now_ms);

/* Keys waiting (ready or delayed), not counting those being processed. */
size_t op_queue_len(const struct op_queue *q);
