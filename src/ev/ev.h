/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event loop every gpuplane daemon runs on: one thread owns a struct ev_loop and all mutable
 * state, and waits in epoll for file descriptors (sockets, pipes), timers (timerfd), signals
 * (signalfd) and wake-ups (eventfd). Blocking work runs on a struct ev_work_pool's threads and
 * comes back to the loop thread with its result; any other thread hands the loop a function to run
 * with ev_post().
 *
 * Rules that hold for the whole API:
 *  - Every function must be called on the loop thread, except ev_wake_signal() and ev_post(), which
 *    any thread may call while the loop and the handle are alive.
 *  - Handles (struct ev_io, ev_timer, ev_signal, ev_wake, ev_work_pool) are created by an *_add or
 *    *_new call, belong to the caller, and are released by the matching *_del or *_free call, which
 * is NULL-safe, returns NULL (so `x = ev_io_del(x);`), and may be called from any callback,
 * including the handle's own: a handle deleted while the loop dispatches is not called again and
 * its memory lives until the current batch of events is done.
 *  - ev_loop_free() releases every handle still attached to the loop; pointers to them are invalid
 *    afterwards. Threads that call ev_post() or ev_wake_signal() must be joined before it.
 *  - Callbacks return nothing. A callback that hits a fatal error calls ev_loop_stop(loop, -errno).
 *  - Fallible functions return 0 or a negative errno and write their ret_* argument only on
 * success. The library does not log.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/signalfd.h>

#include "base-macro.h"

struct ev_loop;
struct ev_io;
struct ev_timer;
struct ev_signal;
struct ev_wake;
struct ev_work_pool;

/* ---- the loop ---- */

/* Creates a loop (an epoll instance and the queue behind ev_post()). */
_wur_ int ev_loop_new(struct ev_loop **ret);

/* Frees the loop. In this order: frees every work pool still attached (see ev_work_pool_free()),
 * runs every function still queued by ev_post() or by a pool (so their userdata is released),
 * deletes every handle still attached (restoring the signal mask ev_signal_add() changed), closes
 * the loop's fds. Must not be called while ev_loop_run() is running. NULL-safe; returns NULL. */
struct ev_loop *ev_loop_free(struct ev_loop *loop);
DEFINE_POINTER_CLEANUP(struct ev_loop, ev_loop_free)

/* Dispatches events until ev_loop_stop() is called, then returns the exit code given to it. A stop
 * takes effect once the current batch of events is dispatched; a stop called before ev_loop_run()
 * makes it return at once. The loop can be run again afterwards. Returns -EBUSY when called from
 * inside a callback, or a negative errno when epoll itself fails. */
_wur_ int ev_loop_run(struct ev_loop *loop);

/* Makes ev_loop_run() return exit_code. The last call before the loop returns wins. */
void ev_loop_stop(struct ev_loop *loop, int exit_code);

/* CLOCK_MONOTONIC in milliseconds, read when the loop last woke up, so every callback of one batch
 * sees the same "now". */
uint64_t ev_loop_now_ms(const struct ev_loop *loop);

/* ---- file descriptors ---- */

enum {
    EV_READ = 1u << 0,
    EV_WRITE = 1u << 1,
    /* Reported only, never requested. Both come with EV_READ when EV_READ is watched, so a reader
     * sees the end of file or the error from read(). */
    EV_HUP = 1u << 2,
    EV_ERROR = 1u << 3,
};

/* revents: the EV_* bits that are ready. Level-triggered: called again while the fd stays ready. */
typedef void (*ev_io_fn)(struct ev_io *io, int fd, uint32_t revents, void *userdata);

/* Watches fd for events (EV_READ | EV_WRITE; 0 adds the watch disabled). The fd stays the
 * caller's: ev_io_del() does not close it. Delete the watch before closing the fd. One enabled
 * watch per fd: epoll refuses a second one with -EEXIST. */
_wur_ int ev_io_add(struct ev_loop *loop, int fd, uint32_t events, ev_io_fn cb, void *userdata,
                    struct ev_io **ret);

/* Changes the watched events; 0 disables the watch (not even hang-ups are reported). */
_wur_ int ev_io_modify(struct ev_io *io, uint32_t events);

struct ev_io *ev_io_del(struct ev_io *io);
DEFINE_POINTER_CLEANUP(struct ev_io, ev_io_del)

/* ---- timers ---- */

/* expirations: how many times the timer expired since the last call (more than 1 when a periodic
 * timer's callback ran late). */
typedef void (*ev_timer_fn)(struct ev_timer *timer, uint64_t expirations, void *userdata);

/* A timer that fires first_ms from now (0: on the next loop iteration) and then every interval_ms
 * (0: once; a one-shot timer stays allocated, disarmed, until deleted or set again). */
_wur_ int ev_timer_add(struct ev_loop *loop, uint64_t first_ms, uint64_t interval_ms,
                       ev_timer_fn cb, void *userdata, struct ev_timer **ret);

/* Re-arms the timer as ev_timer_add() would, dropping an expiration not yet dispatched. */
_wur_ int ev_timer_set(struct ev_timer *timer, uint64_t first_ms, uint64_t interval_ms);

/* Stops the timer without deleting it. */
_wur_ int ev_timer_disarm(struct ev_timer *timer);

struct ev_timer *ev_timer_del(struct ev_timer *timer);
DEFINE_POINTER_CLEANUP(struct ev_timer, ev_timer_del)

/* ---- signals ---- */

typedef void (*ev_signal_fn)(struct ev_signal *sig, const struct signalfd_siginfo *si,
                             void *userdata);

/* Blocks signo in the calling (loop) thread and delivers it on the loop instead. Only threads
 * created after this call inherit the blocked mask: install signal handles before starting threads,
 * or a thread with the signal unblocked gets its default action (the pool's threads block every
 * signal). ev_signal_del() unblocks the signal again unless it was blocked before. -EBUSY if signo
 * is already watched on this loop, -EINVAL for SIGKILL, SIGSTOP or a number out of range. */
_wur_ int ev_signal_add(struct ev_loop *loop, int signo, ev_signal_fn cb, void *userdata,
                        struct ev_signal **ret);

struct ev_signal *ev_signal_del(struct ev_signal *sig);
DEFINE_POINTER_CLEANUP(struct ev_signal, ev_signal_del)

/* The daemon convention: SIGTERM and SIGINT stop the loop with exit code 0, SIGHUP calls the reload
 * hook (ignored while none is set). The loop owns these handles. Calling it again does nothing. */
_wur_ int ev_loop_handle_stop_signals(struct ev_loop *loop);

/* Sets (or with cb NULL, clears) the hook SIGHUP calls once ev_loop_handle_stop_signals() is on. */
void ev_loop_on_reload(struct ev_loop *loop, void (*cb)(void *userdata), void *userdata);

/* ---- wake-ups ---- */

typedef void (*ev_wake_fn)(struct ev_wake *wake, void *userdata);

/* A wake-up another thread triggers with ev_wake_signal(); the callback runs on the loop thread. */
_wur_ int ev_wake_add(struct ev_loop *loop, ev_wake_fn cb, void *userdata, struct ev_wake **ret);

/* Any thread. Signals that arrive before the loop dispatches the wake coalesce into one call.
 * Cannot fail while the wake is alive; stop the signalling threads before ev_wake_del(). */
void ev_wake_signal(const struct ev_wake *wake);

struct ev_wake *ev_wake_del(struct ev_wake *wake);
DEFINE_POINTER_CLEANUP(struct ev_wake, ev_wake_del)

/* ---- messages from other threads ---- */

/* Any thread: queues fn(userdata) to run on the loop thread. Functions posted by one thread run in
 * the order they were posted. A function still queued when the loop is freed runs inside
 * ev_loop_free(), so userdata is never leaked. -ENOMEM when the queue entry cannot be allocated. */
_wur_ int ev_post(struct ev_loop *loop, void (*fn)(void *userdata), void *userdata);

/* ---- work pool ---- */

/* Runs on a worker thread: may block, must not touch loop-owned state. Returns a result (by
 * convention 0 or a negative errno) handed to the done function. */
typedef int (*ev_work_fn)(void *userdata);
/* Runs on the loop thread with the work's result, or -ECANCELED if the pool was freed before the
 * work started (work_fn then never ran). Typically frees userdata. */
typedef void (*ev_done_fn)(int result, void *userdata);

/* Starts n_threads worker threads (1..64, else -EINVAL) with all signals blocked except those a
 * fault raises (SIGSEGV, SIGBUS, ...). Freed with the loop if not freed before. */
_wur_ int ev_work_pool_new(struct ev_loop *loop, unsigned n_threads, struct ev_work_pool **ret);

/* Queues work. work_fn runs on some worker thread, then done_fn (may be NULL) runs on the loop
 * thread, exactly once for every successful submit, even if the pool is freed meanwhile. FIFO start
 * order. */
_wur_ int ev_work_submit(struct ev_work_pool *pool, ev_work_fn work_fn, ev_done_fn done_fn,
                         void *userdata);

/* Cancels work not yet started, waits for the work running now, joins the threads. Never calls
 * done functions itself: those of finished and cancelled work run later from the loop (on its next
 * iteration, or inside ev_loop_free()), so it is safe to call from a done function. NULL-safe;
 * returns NULL. */
struct ev_work_pool *ev_work_pool_free(struct ev_work_pool *pool);
DEFINE_POINTER_CLEANUP(struct ev_work_pool, ev_work_pool_free)
