/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loop itself: the epoll instance, the dispatch of one batch of events at a time, the deferred
 * free of sources deleted during a batch, and the ev_post() queue that lets other threads hand the
 * loop thread a function to run.
 */
#include <assert.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>

#include "ev-internal.h"

/* How many ready fds one epoll_wait() returns; more stay ready for the next iteration. */
#define EV_BATCH_MAX 64

struct ev_post_msg {
    struct ev_msg msg;
    void (*fn)(void *userdata);
    void *userdata;
};

static uint64_t monotonic_ms(void)
{
    struct timespec ts;

    /* CLOCK_MONOTONIC cannot fail with a valid pointer. */
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int ev_read_counter(int fd, uint64_t *ret)
{
    uint64_t value;
    ssize_t n;

    do {
        n = read(fd, &value, sizeof(value));
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN ? 0 : negative_errno();
    if (n != sizeof(value))
        return -EIO;
    *ret = value;
    return 1;
}

int ev_source_attach(struct ev_loop *loop, struct ev_source *s, uint32_t epoll_events)
{
    s->loop = loop;
    s->epoll_events = 0;
    s->dead = false;
    if (epoll_events != 0) {
        struct epoll_event ev = {.events = epoll_events, .data.ptr = s};

        if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, s->fd, &ev) < 0)
            return negative_errno();
        s->epoll_events = epoll_events;
    }
    s->prev = NULL;
    s->next = loop->sources;
    if (loop->sources)
        loop->sources->prev = s;
    loop->sources = s;
    return 0;
}

int ev_source_set_events(struct ev_source *s, uint32_t epoll_events)
{
    struct epoll_event ev = {.events = epoll_events, .data.ptr = s};
    int op;

    if (epoll_events == s->epoll_events)
        return 0;
    if (epoll_events == 0)
        op = EPOLL_CTL_DEL;
    else if (s->epoll_events == 0)
        op = EPOLL_CTL_ADD;
    else
        op = EPOLL_CTL_MOD;
    if (epoll_ctl(s->loop->epoll_fd, op, s->fd, &ev) < 0)
        return negative_errno();
    s->epoll_events = epoll_events;
    return 0;
}

void ev_source_del(struct ev_source *s)
{
    struct ev_loop *loop = s->loop;

    assert(!s->dead);
    /* Fails only if the caller closed the fd first, which removed it from epoll anyway. */
    if (s->epoll_events != 0)
        (void)epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, s->fd, NULL);
    s->epoll_events = 0;
    if (s->destroy)
        s->destroy(s);

    if (s->prev)
        s->prev->next = s->next;
    else
        loop->sources = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->dead = true;

    if (loop->running) {
        s->prev = NULL;
        s->next = loop->dead;
        loop->dead = s;
    } else {
        free(s);
    }
}

static void free_dead_sources(struct ev_loop *loop)
{
    while (loop->dead) {
        struct ev_source *s = loop->dead;

        loop->dead = s->next;
        free(s);
    }
}

void ev_loop_post_msg(struct ev_loop *loop, struct ev_msg *msg)
{
    static const uint64_t one = 1;
    bool was_empty;

    msg->next = NULL;
    pthread_mutex_lock(&loop->mailbox_lock);
    was_empty = !loop->mailbox_head;
    if (loop->mailbox_tail)
        loop->mailbox_tail->next = msg;
    else
        loop->mailbox_head = msg;
    loop->mailbox_tail = msg;
    pthread_mutex_unlock(&loop->mailbox_lock);

    /* A non-empty queue has a wake-up on its way already. The write can only fail with EAGAIN when
     * the counter is near 2^64, and then the loop is woken anyway. */
    if (was_empty)
        (void)!write(loop->mailbox.fd, &one, sizeof(one));
}

/* Runs queued messages until the queue is empty, taking the list in one piece so posters are not
 * held up while the functions run. */
static void mailbox_drain(struct ev_loop *loop)
{
    for (;;) {
        struct ev_msg *msg;

        pthread_mutex_lock(&loop->mailbox_lock);
        msg = loop->mailbox_head;
        loop->mailbox_head = loop->mailbox_tail = NULL;
        pthread_mutex_unlock(&loop->mailbox_lock);
        if (!msg)
            return;
        while (msg) {
            struct ev_msg *next = msg->next;

            msg->run(msg);
            msg = next;
        }
    }
}

static void mailbox_dispatch(struct ev_source *s, uint32_t epoll_events)
{
    struct ev_loop *loop = s->loop;
    uint64_t count;
    int r;

    /* Read before draining: a post that lands after the drain then leaves the eventfd readable. */
    r = ev_read_counter(s->fd, &count);
    if (r < 0) {
        ev_loop_stop(loop, r);
        return;
    }
    mailbox_drain(loop);
}

static void post_msg_run(struct ev_msg *msg)
{
    struct ev_post_msg *pm = (struct ev_post_msg *)msg;
    void (*fn)(void *) = pm->fn;
    void *userdata = pm->userdata;

    free(pm);
    fn(userdata);
}

int ev_post(struct ev_loop *loop, void (*fn)(void *userdata), void *userdata)
{
    struct ev_post_msg *pm;

    assert(loop && fn);
    pm = malloc(sizeof(*pm));
    if (!pm)
        return -ENOMEM;
    pm->msg.run = post_msg_run;
    pm->fn = fn;
    pm->userdata = userdata;
    ev_loop_post_msg(loop, &pm->msg);
    return 0;
}

int ev_loop_new(struct ev_loop **ret)
{
    _cleanup_(ev_loop_freep) struct ev_loop *loop = NULL;
    struct epoll_event ev;

    assert(ret);
    loop = calloc(1, sizeof(*loop));
    if (!loop)
        return -ENOMEM;
    loop->epoll_fd = -1;
    loop->mailbox.fd = -1;
    loop->mailbox.loop = loop;
    loop->mailbox.dispatch = mailbox_dispatch;
    pthread_mutex_init(&loop->mailbox_lock, NULL);
    loop->now_ms = monotonic_ms();

    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epoll_fd < 0)
        return negative_errno();
    loop->mailbox.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (loop->mailbox.fd < 0)
        return negative_errno();
    /* The mailbox is not on the sources list: ev_loop_free() must drain it after the pools are gone
     * and before the handles are. */
    ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &loop->mailbox};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->mailbox.fd, &ev) < 0)
        return negative_errno();
    loop->mailbox.epoll_events = EPOLLIN;

    *ret = TAKE_PTR(loop);
    return 0;
}

struct ev_loop *ev_loop_free(struct ev_loop *loop)
{
    if (!loop)
        return NULL;
    assert(!loop->running);

    /* Pools first: joining their threads is what guarantees nothing posts any more. */
    ev_work_pools_free(loop);
    mailbox_drain(loop);
    while (loop->sources)
        ev_source_del(loop->sources);
    /* A function run by the drain may have posted again, or a destroy hook may have. */
    mailbox_drain(loop);
    while (loop->sources)
        ev_source_del(loop->sources);

    if (loop->mailbox.fd >= 0)
        close(loop->mailbox.fd);
    if (loop->epoll_fd >= 0)
        close(loop->epoll_fd);
    pthread_mutex_destroy(&loop->mailbox_lock);
    free(loop);
    return NULL;
}

static void dispatch_batch(struct ev_loop *loop, const struct epoll_event *events, int n)
{
    for (int i = 0; i < n; i++) {
        struct ev_source *s = events[i].data.ptr;

        /* Deleted by an earlier callback of this batch: the memory is still ours, the handle is
         * not. */
        if (s->dead)
            continue;
        s->dispatch(s, events[i].events);
    }
}

int ev_loop_run(struct ev_loop *loop)
{
    struct epoll_event events[EV_BATCH_MAX];
    int r;

    assert(loop);
    if (loop->running)
        return -EBUSY;
    loop->running = true;

    while (!loop->stopping) {
        int n = epoll_wait(loop->epoll_fd, events, EV_BATCH_MAX, -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            ev_loop_stop(loop, negative_errno());
            break;
        }
        loop->now_ms = monotonic_ms();
        dispatch_batch(loop, events, n);
        free_dead_sources(loop);
    }

    r = loop->exit_code;
    loop->running = false;
    loop->stopping = false;
    loop->exit_code = 0;
    return r;
}

void ev_loop_stop(struct ev_loop *loop, int exit_code)
{
    assert(loop);
    loop->stopping = true;
    loop->exit_code = exit_code;
}

uint64_t ev_loop_now_ms(const struct ev_loop *loop)
{
    assert(loop);
    return loop->now_ms;
}
