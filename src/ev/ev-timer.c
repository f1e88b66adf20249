/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timers, one timerfd each on CLOCK_MONOTONIC, so a wall-clock step (NTP, a suspended VM) does not
 * fire or delay them, and the kernel counts the expirations a late loop missed.
 */
#include <assert.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include "ev-internal.h"

struct ev_timer {
    struct ev_source src;
    ev_timer_fn cb;
    void *userdata;
};

static struct timespec ms_to_timespec(uint64_t ms)
{
    return (struct timespec){
        .tv_sec = (time_t)(ms / 1000u),
        .tv_nsec = (long)(ms % 1000u) * 1000000L,
    };
}

static int timer_arm(int fd, uint64_t first_ms, uint64_t interval_ms)
{
    struct itimerspec its = {
        .it_value = ms_to_timespec(first_ms),
        .it_interval = ms_to_timespec(interval_ms),
    };

    /* An all-zero it_value disarms a timerfd; "now" is the smallest delay that does not. */
    if (first_ms == 0)
        its.it_value.tv_nsec = 1;
    if (timerfd_settime(fd, 0, &its, NULL) < 0)
        return negative_errno();
    return 0;
}

static void timer_dispatch(struct ev_source *s, uint32_t epoll_events)
{
    struct ev_timer *t = (struct ev_timer *)s;
    uint64_t expirations;
    int r;

    r = ev_read_counter(s->fd, &expirations);
    if (r < 0) {
        ev_loop_stop(s->loop, r);
        return;
    }
    /* Nothing to read: re-armed or disarmed since epoll reported it. */
    if (r == 0)
        return;
    t->cb(t, expirations, t->userdata);
}

static void timer_destroy(struct ev_source *s)
{
    close(s->fd);
    s->fd = -1;
}

int ev_timer_add(struct ev_loop *loop, uint64_t first_ms, uint64_t interval_ms, ev_timer_fn cb,
                 void *userdata, struct ev_timer **ret)
{
    _cleanup_free_ struct ev_timer *t = NULL;
    _cleanup_close_ int fd = -1;
    int r;

    assert(loop && cb && ret);
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0)
        return negative_errno();
    r = timer_arm(fd, first_ms, interval_ms);
    if (r < 0)
        return r;

    t->src.fd = fd;
    t->src.dispatch = timer_dispatch;
    t->src.destroy = timer_destroy;
    t->cb = cb;
    t->userdata = userdata;
    r = ev_source_attach(loop, &t->src, EPOLLIN);
    if (r < 0)
        return r;
    TAKE_FD(fd);
    *ret = TAKE_PTR(t);
    return 0;
}

int ev_timer_set(struct ev_timer *t, uint64_t first_ms, uint64_t interval_ms)
{
    assert(t && !t->src.dead);
    return timer_arm(t->src.fd, first_ms, interval_ms);
}

int ev_timer_disarm(struct ev_timer *t)
{
    static const struct itimerspec off;

    assert(t && !t->src.dead);
    if (timerfd_settime(t->src.fd, 0, &off, NULL) < 0)
        return negative_errno();
    return 0;
}

struct ev_timer *ev_timer_del(struct ev_timer *t)
{
    if (t)
        ev_source_del(&t->src);
    return NULL;
}
