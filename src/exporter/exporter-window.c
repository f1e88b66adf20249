/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Events counted over a sliding window, for dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT and
 * DCGM_EXP_CLOCK_EVENTS_COUNT. dcgm-exporter asks DCGM for every value a field took since
 * now - window (GetValuesSince) and counts them: each XID event once under its number, each sample
 * of the clock event reasons once under every reason bit it has set
 * (internal/pkg/collector/expcollector.go, xid_collector.go, clock_events_collector.go). Here the
 * values are kept in a ring per GPU: the oldest fall out of the window as time passes, and a storm
 * of events overwrites the oldest rather than growing memory.
 */
#include <errno.h>
#include <stdlib.h>

#include "exporter-internal.h"

int exporter_window_init(struct exporter_window *w, uint64_t span_ms, size_t cap)
{
    *w = (struct exporter_window){.span_ms = span_ms, .cap = cap};
    w->ring = calloc(cap ? cap : 1, sizeof(*w->ring));
    return w->ring ? 0 : -ENOMEM;
}

void exporter_window_release(struct exporter_window *w)
{
    free(w->ring);
    *w = (struct exporter_window){0};
}

void exporter_window_add(struct exporter_window *w, uint64_t now_ms, uint64_t value)
{
    if (!w->ring || w->cap == 0)
        return;
    w->ring[(w->first + w->n) % w->cap] = (struct exporter_window_entry){now_ms, value};
    if (w->n < w->cap)
        w->n++;
    else
        w->first = (w->first + 1) % w->cap;
}

/* Drops what left the window: DCGM's "since" is inclusive, so an entry exactly span_ms old stays.
 */
static void expire(struct exporter_window *w, uint64_t now_ms)
{
    while (w->n > 0 && now_ms > w->span_ms && w->ring[w->first].t_ms < now_ms - w->span_ms) {
        w->first = (w->first + 1) % w->cap;
        w->n--;
    }
}

/* Adds one to key in out (n entries, sorted by key), inserting it. */
static int bump(struct exporter_window_count **out, size_t *n, uint64_t key)
{
    size_t i = 0;
    while (i < *n && (*out)[i].key < key)
        i++;
    if (i < *n && (*out)[i].key == key) {
        (*out)[i].count++;
        return 0;
    }
    struct exporter_window_count *grown = reallocarray(*out, *n + 1, sizeof(**out));
    if (!grown)
        return -ENOMEM;
    *out = grown;
    for (size_t j = *n; j > i; j--)
        grown[j] = grown[j - 1];
    grown[i] = (struct exporter_window_count){key, 1};
    (*n)++;
    return 0;
}

int exporter_window_counts(struct exporter_window *w, uint64_t now_ms, uint64_t bits,
                           struct exporter_window_count **ret, size_t *ret_n)
{
    struct exporter_window_count *out = NULL;
    size_t n = 0;
    int r = 0;

    expire(w, now_ms);
    for (size_t i = 0; i < w->n && r >= 0; i++) {
        uint64_t v = w->ring[(w->first + i) % w->cap].value;
        if (!bits) {
            r = bump(&out, &n, v);
            continue;
        }
        for (unsigned b = 0; b < 64 && r >= 0; b++)
            if (v & bits & (UINT64_C(1) << b))
                r = bump(&out, &n, UINT64_C(1) << b);
    }
    if (r < 0) {
        free(out);
        return r;
    }
    *ret = out;
    *ret_n = n;
    return 0;
}

/* dcgm-exporter's names of the clock event reason bits (clock_events_collector.go). */
const char *exporter_clock_event_name(uint64_t bit)
{
    switch (bit) {
    case 0x1:
        return "gpu_idle";
    case 0x2:
        return "clocks_setting";
    case 0x4:
        return "power_cap";
    case 0x8:
        return "hw_slowdown";
    case 0x10:
        return "sync_boost";
    case 0x20:
        return "sw_thermal";
    case 0x40:
        return "hw_thermal";
    case 0x80:
        return "hw_power_brake";
    case 0x100:
        return "display_clocks";
    default:
        return "";
    }
}
