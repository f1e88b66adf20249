/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the ev files share: every handle embeds a struct ev_source, the one thing epoll knows about.
 * A source deleted while the loop dispatches a batch goes on the loop's dead list and is freed
 * after the batch, because later events of the same batch may still point at it. The loop's
 * ev_post() queue is a list of struct ev_msg under a mutex plus an eventfd; the work pool sends its
 * results through it.
 */
#pragma once

#include <pthread.h>
#include <signal.h>

#include "ev.h"

struct ev_source;

/* Called with the epoll event bits; never for a dead source. */
typedef void (*ev_dispatch_fn)(struct ev_source *s, uint32_t epoll_events);
/* Releases what the handle owns besides its memory (an fd, a blocked signal). */
typedef void (*ev_destroy_fn)(struct ev_source *s);

struct ev_source {
    struct ev_loop *loop;
    ev_dispatch_fn dispatch;
    ev_destroy_fn destroy;         /* NULL if nothing to release */
    struct ev_source *prev, *next; /* the loop's live sources, or next on the dead list */
    int fd;
    uint32_t epoll_events; /* what is registered with epoll; 0 = not registered */
    bool dead;
};

/* A queued function for the loop thread; run() gets the message and owns it from then on. */
struct ev_msg {
    struct ev_msg *next;
    void (*run)(struct ev_msg *msg);
};

struct ev_loop {
    int epoll_fd;
    bool running;
    bool stopping;
    int exit_code;
    uint64_t now_ms;

    struct ev_source *sources; /* live handles, so ev_loop_free() can release them */
    struct ev_source *dead;    /* deleted during the current batch, freed after it */
    struct ev_work_pool *pools;

    /* ev_post(): any thread appends under the lock, then writes the eventfd. */
    struct ev_source mailbox;
    pthread_mutex_t mailbox_lock;
    struct ev_msg *mailbox_head, *mailbox_tail;

    /* ev_loop_handle_stop_signals() */
    struct ev_signal *sig_term, *sig_int, *sig_hup;
    void (*reload_cb)(void *userdata);
    void *reload_userdata;
    bool signal_used[_NSIG];
};

struct ev_work_pool {
    struct ev_loop *loop;
    struct ev_work_pool *prev, *next; /* the loop's pools */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct ev_msg *head, *tail; /* work not yet started */
    bool shutdown;
    unsigned n_threads;
    pthread_t threads[];
};

/* Links an allocated source (fd set, dispatch/destroy set) into the loop and registers it with
 * epoll for events (0: not registered). On failure nothing is linked and the caller still owns s.
 */
_wur_ int ev_source_attach(struct ev_loop *loop, struct ev_source *s, uint32_t epoll_events);

/* Changes the epoll registration (0: unregister). */
_wur_ int ev_source_set_events(struct ev_source *s, uint32_t epoll_events);

/* Unregisters, destroys and frees the source now, or after the current batch. */
void ev_source_del(struct ev_source *s);

/* Queues a message for the loop thread. Any thread; cannot fail. */
void ev_loop_post_msg(struct ev_loop *loop, struct ev_msg *msg);

/* Reads an eventfd or timerfd counter: 1 read, 0 nothing to read, or -errno. */
_wur_ int ev_read_counter(int fd, uint64_t *ret);

/* Frees every pool of the loop (ev_loop_free()). */
void ev_work_pools_free(struct ev_loop *loop);
