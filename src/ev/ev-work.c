/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The work pool: threads that run blocking work (fsync, a blocking library call) off the loop
 * thread. Work waits in a mutex-protected FIFO; a worker runs it and posts the work item itself to
 * the loop's ev_post() queue, so delivering a result allocates nothing and cannot fail. Freeing the
 * pool cancels what has not started and routes the cancellations through the same queue, so every
 * submitted item meets its done function exactly once, on the loop thread.
 */
#include <assert.h>
#include <stdlib.h>

#include "ev-internal.h"

#define EV_WORK_THREADS_MAX 64u

struct ev_work {
    struct ev_msg msg; /* the pool's queue link, then the loop's */
    ev_work_fn work_fn;
    ev_done_fn done_fn;
    void *userdata;
    int result;
};

static void work_done_run(struct ev_msg *msg)
{
    struct ev_work *w = (struct ev_work *)msg;
    ev_done_fn done_fn = w->done_fn;
    void *userdata = w->userdata;
    int result = w->result;

    free(w);
    if (done_fn)
        done_fn(result, userdata);
}

static struct ev_work *pool_pop(struct ev_work_pool *pool)
{
    struct ev_msg *msg = pool->head;

    if (!msg)
        return NULL;
    pool->head = msg->next;
    if (!pool->head)
        pool->tail = NULL;
    return (struct ev_work *)msg;
}

static void *worker_main(void *arg)
{
    struct ev_work_pool *pool = arg;

    for (;;) {
        struct ev_work *w;

        pthread_mutex_lock(&pool->lock);
        while (!pool->head && !pool->shutdown)
            pthread_cond_wait(&pool->cond, &pool->lock);
        w = pool_pop(pool);
        pthread_mutex_unlock(&pool->lock);
        /* Empty means shutdown: ev_work_pool_free() took what was left. */
        if (!w)
            return NULL;

        w->result = w->work_fn(w->userdata);
        ev_loop_post_msg(pool->loop, &w->msg);
    }
}

/* Stops and joins the first n threads; pending work stays queued. */
static void pool_stop_threads(struct ev_work_pool *pool, unsigned n)
{
    pthread_mutex_lock(&pool->lock);
    pool->shutdown = true;
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(pool->threads[i], NULL);
}

static void pool_destroy(struct ev_work_pool *pool)
{
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

/* Workers block every signal: a process-directed signal must reach the loop thread's signalfd, not
 * the default action in a thread that happens to have it unblocked. The signals a fault raises in
 * the faulting thread stay unblocked, so crash handlers (a sanitizer's, a daemon's) still run. */
static int pool_start_threads(struct ev_work_pool *pool)
{
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    sigset_t all, old;
    int r = 0;
    unsigned i;

    sigfillset(&all);
    for (i = 0; i < ARRAY_SIZE(faults); i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (i = 0; i < pool->n_threads; i++) {
        r = -pthread_create(&pool->threads[i], NULL, worker_main, pool);
        if (r < 0)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0)
        pool_stop_threads(pool, i);
    return r;
}

int ev_work_pool_new(struct ev_loop *loop, unsigned n_threads, struct ev_work_pool **ret)
{
    struct ev_work_pool *pool;
    int r;

    assert(loop && ret);
    if (n_threads == 0 || n_threads > EV_WORK_THREADS_MAX)
        return -EINVAL;
    pool = calloc(1, sizeof(*pool) + n_threads * sizeof(pool->threads[0]));
    if (!pool)
        return -ENOMEM;
    pool->loop = loop;
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->cond, NULL);

    r = pool_start_threads(pool);
    if (r < 0) {
        pool_destroy(pool);
        return r;
    }
    pool->next = loop->pools;
    if (loop->pools)
        loop->pools->prev = pool;
    loop->pools = pool;
    *ret = pool;
    return 0;
}

int ev_work_submit(struct ev_work_pool *pool, ev_work_fn work_fn, ev_done_fn done_fn,
                   void *userdata)
{
    struct ev_work *w;

    assert(pool && work_fn);
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->msg.run = work_done_run;
    w->work_fn = work_fn;
    w->done_fn = done_fn;
    w->userdata = userdata;

    pthread_mutex_lock(&pool->lock);
    if (pool->tail)
        pool->tail->next = &w->msg;
    else
        pool->head = &w->msg;
    pool->tail = &w->msg;
    pthread_cond_signal(&pool->cond);
    pthread_mutex_unlock(&pool->lock);
    return 0;
}

struct ev_work_pool *ev_work_pool_free(struct ev_work_pool *pool)
{
    struct ev_loop *loop;
    struct ev_msg *cancelled;

    if (!pool)
        return NULL;
    loop = pool->loop;

    /* Take the queue before the threads see shutdown, so none starts anything more. */
    pthread_mutex_lock(&pool->lock);
    cancelled = pool->head;
    pool->head = pool->tail = NULL;
    pthread_mutex_unlock(&pool->lock);
    pool_stop_threads(pool, pool->n_threads);

    while (cancelled) {
        struct ev_work *w = (struct ev_work *)cancelled;

        cancelled = cancelled->next;
        w->result = -ECANCELED;
        ev_loop_post_msg(loop, &w->msg);
    }

    if (pool->prev)
        pool->prev->next = pool->next;
    else
        loop->pools = pool->next;
    if (pool->next)
        pool->next->prev = pool->prev;
    pool_destroy(pool);
    return NULL;
}

void ev_work_pools_free(struct ev_loop *loop)
{
    while (loop->pools)
        ev_work_pool_free(loop->pools);
}
