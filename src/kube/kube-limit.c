/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client-side rate limiter: a token bucket like client-go's (qps tokens a second, at most
 * burst of them saved up). A full bucket lets a burst of requests out at once after a quiet spell;
 * an empty one spaces them 1/qps apart. The client sets a timer for the wait this returns.
 */
#include <math.h>

#include "kube-internal.h"

void kube_bucket_init(struct kube_bucket *b, double qps, unsigned burst, uint64_t now_ms)
{
    b->qps = qps > 0 ? qps : 5.0;
    b->burst = burst > 0 ? (double)burst : 10.0;
    b->tokens = b->burst;
    b->last_ms = now_ms;
}

uint64_t kube_bucket_take(struct kube_bucket *b, uint64_t now_ms)
{
    if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * b->qps / 1000.0;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
        b->last_ms = now_ms;
    }
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return 0;
    }
    double wait = ceil((1.0 - b->tokens) * 1000.0 / b->qps);
    return wait < 1.0 ? 1 : (uint64_t)wait;
}
