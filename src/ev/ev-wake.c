/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Wake-ups from other threads, one eventfd each: the counter makes any number of signals before the
 * loop gets to it one readable event, which is the coalescing the API promises.
 */
#include <assert.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "ev-internal.h"

struct ev_wake {
    struct ev_source src;
    ev_wake_fn cb;
    void *userdata;
};

static void wake_dispatch(struct ev_source *s, uint32_t epoll_events)
{
    struct ev_wake *w = (struct ev_wake *)s;
    uint64_t count;
    int r;

    r = ev_read_counter(s->fd, &count);
    if (r < 0) {
        ev_loop_stop(s->loop, r);
        return;
    }
    if (r == 0)
        return;
    w->cb(w, w->userdata);
}

static void wake_destroy(struct ev_source *s)
{
    close(s->fd);
    s->fd = -1;
}

int ev_wake_add(struct ev_loop *loop, ev_wake_fn cb, void *userdata, struct ev_wake **ret)
{
    _cleanup_free_ struct ev_wake *w = NULL;
    _cleanup_close_ int fd = -1;
    int r;

    assert(loop && cb && ret);
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0)
        return negative_errno();

    w->src.fd = fd;
    w->src.dispatch = wake_dispatch;
    w->src.destroy = wake_destroy;
    w->cb = cb;
    w->userdata = userdata;
    r = ev_source_attach(loop, &w->src, EPOLLIN);
    if (r < 0)
        return r;
    TAKE_FD(fd);
    *ret = TAKE_PTR(w);
    return 0;
}

void ev_wake_signal(const struct ev_wake *w)
{
    static const uint64_t one = 1;

    /* EAGAIN means the counter is saturated: the wake is pending already. */
    (void)!write(w->src.fd, &one, sizeof(one));
}

struct ev_wake *ev_wake_del(struct ev_wake *w)
{
    if (w)
        ev_source_del(&w->src);
    return NULL;
}
