/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watches on caller-owned file descriptors. The EV_* bits are translated to and from epoll's, and a
 * hang-up or error is also reported as EV_READ to a reader, so the read() that follows sees the end
 * of file or the error instead of the loop spinning on a level-triggered EPOLLHUP nobody handles.
 */
#include <assert.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "ev-internal.h"

struct ev_io {
    struct ev_source src;
    ev_io_fn cb;
    void *userdata;
    uint32_t events;
};

static uint32_t to_epoll(uint32_t events)
{
    uint32_t e = 0;

    if (events & EV_READ)
        e |= EPOLLIN | EPOLLRDHUP;
    if (events & EV_WRITE)
        e |= EPOLLOUT;
    return e;
}

static uint32_t from_epoll(uint32_t e, uint32_t watched)
{
    uint32_t revents = 0;

    if (e & EPOLLIN)
        revents |= EV_READ;
    if (e & EPOLLOUT)
        revents |= EV_WRITE;
    if (e & (EPOLLHUP | EPOLLRDHUP))
        revents |= EV_HUP;
    if (e & EPOLLERR)
        revents |= EV_ERROR;
    if ((revents & (EV_HUP | EV_ERROR)) && (watched & EV_READ))
        revents |= EV_READ;
    return revents;
}

static void io_dispatch(struct ev_source *s, uint32_t epoll_events)
{
    struct ev_io *io = (struct ev_io *)s;

    io->cb(io, s->fd, from_epoll(epoll_events, io->events), io->userdata);
}

int ev_io_add(struct ev_loop *loop, int fd, uint32_t events, ev_io_fn cb, void *userdata,
              struct ev_io **ret)
{
    _cleanup_free_ struct ev_io *io = NULL;
    int r;

    assert(loop && cb && ret);
    if (fd < 0)
        return -EBADF;
    if (events & ~(uint32_t)(EV_READ | EV_WRITE))
        return -EINVAL;

    io = calloc(1, sizeof(*io));
    if (!io)
        return -ENOMEM;
    io->src.fd = fd;
    io->src.dispatch = io_dispatch;
    io->cb = cb;
    io->userdata = userdata;
    io->events = events;
    r = ev_source_attach(loop, &io->src, to_epoll(events));
    if (r < 0)
        return r;
    *ret = TAKE_PTR(io);
    return 0;
}

int ev_io_modify(struct ev_io *io, uint32_t events)
{
    int r;

    assert(io && !io->src.dead);
    if (events & ~(uint32_t)(EV_READ | EV_WRITE))
        return -EINVAL;
    r = ev_source_set_events(&io->src, to_epoll(events));
    if (r < 0)
        return r;
    io->events = events;
    return 0;
}

struct ev_io *ev_io_del(struct ev_io *io)
{
    if (io)
        ev_source_del(&io->src);
    return NULL;
}
