/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Signals as events: the signal is blocked in the loop thread and read from a signalfd, so the
 * callback is ordinary loop code and not an async-signal handler with its restrictions. Deleting
 * the handle puts the signal mask back the way it was. Also the daemon convention for SIGTERM,
 * SIGINT and SIGHUP.
 */
#include <assert.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "ev-internal.h"

struct ev_signal {
    struct ev_source src;
    ev_signal_fn cb;
    void *userdata;
    int signo;
    bool was_blocked; /* blocked before ev_signal_add(): leave it blocked on delete */
};

static void signal_dispatch(struct ev_source *s, uint32_t epoll_events)
{
    struct ev_signal *sig = (struct ev_signal *)s;
    struct signalfd_siginfo si;
    ssize_t n;

    n = read(s->fd, &si, sizeof(si));
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            ev_loop_stop(s->loop, negative_errno());
        return;
    }
    if (n != sizeof(si)) {
        ev_loop_stop(s->loop, -EIO);
        return;
    }
    sig->cb(sig, &si, sig->userdata);
}

static void signal_destroy(struct ev_source *s)
{
    struct ev_signal *sig = (struct ev_signal *)s;
    struct signalfd_siginfo si;
    sigset_t mask;

    /* A signal that arrived but was not dispatched is dropped, not delivered with its default
     * action when unblocked: a second SIGTERM during shutdown must not kill the process half-way.
     */
    while (read(s->fd, &si, sizeof(si)) == sizeof(si))
        continue;
    close(s->fd);
    s->fd = -1;

    if (!sig->was_blocked) {
        sigemptyset(&mask);
        sigaddset(&mask, sig->signo);
        (void)pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
    }
    s->loop->signal_used[sig->signo] = false;
}

/* Blocks signo and opens a signalfd for it; on failure the mask is as before. */
static int block_and_open(int signo, bool *ret_was_blocked, int *ret_fd)
{
    sigset_t mask, old;
    int r, fd;

    sigemptyset(&mask);
    sigaddset(&mask, signo);
    r = pthread_sigmask(SIG_BLOCK, &mask, &old);
    if (r != 0)
        return -r;
    fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) {
        r = negative_errno();
        if (!sigismember(&old, signo))
            (void)pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
        return r;
    }
    *ret_was_blocked = sigismember(&old, signo) == 1;
    *ret_fd = fd;
    return 0;
}

int ev_signal_add(struct ev_loop *loop, int signo, ev_signal_fn cb, void *userdata,
                  struct ev_signal **ret)
{
    _cleanup_free_ struct ev_signal *sig = NULL;
    int r;

    assert(loop && cb && ret);
    if (signo <= 0 || signo >= _NSIG || signo == SIGKILL || signo == SIGSTOP)
        return -EINVAL;
    if (loop->signal_used[signo])
        return -EBUSY;

    sig = calloc(1, sizeof(*sig));
    if (!sig)
        return -ENOMEM;
    r = block_and_open(signo, &sig->was_blocked, &sig->src.fd);
    if (r < 0)
        return r;
    sig->src.dispatch = signal_dispatch;
    sig->src.destroy = signal_destroy;
    sig->cb = cb;
    sig->userdata = userdata;
    sig->signo = signo;
    loop->signal_used[signo] = true;

    r = ev_source_attach(loop, &sig->src, EPOLLIN);
    if (r < 0) {
        /* Not linked, so destroy by hand: closes the fd, restores the mask. */
        sig->src.loop = loop;
        signal_destroy(&sig->src);
        return r;
    }
    *ret = TAKE_PTR(sig);
    return 0;
}

struct ev_signal *ev_signal_del(struct ev_signal *sig)
{
    if (sig)
        ev_source_del(&sig->src);
    return NULL;
}

static void on_stop_signal(struct ev_signal *sig, const struct signalfd_siginfo *si, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

static void on_reload_signal(struct ev_signal *sig, const struct signalfd_siginfo *si,
                             void *userdata)
{
    struct ev_loop *loop = userdata;

    if (loop->reload_cb)
        loop->reload_cb(loop->reload_userdata);
}

int ev_loop_handle_stop_signals(struct ev_loop *loop)
{
    _cleanup_(ev_signal_delp) struct ev_signal *term = NULL, *intr = NULL, *hup = NULL;
    int r;

    assert(loop);
    if (loop->sig_term)
        return 0;
    r = ev_signal_add(loop, SIGTERM, on_stop_signal, loop, &term);
    if (r < 0)
        return r;
    r = ev_signal_add(loop, SIGINT, on_stop_signal, loop, &intr);
    if (r < 0)
        return r;
    r = ev_signal_add(loop, SIGHUP, on_reload_signal, loop, &hup);
    if (r < 0)
        return r;
    loop->sig_term = TAKE_PTR(term);
    loop->sig_int = TAKE_PTR(intr);
    loop->sig_hup = TAKE_PTR(hup);
    return 0;
}

void ev_loop_on_reload(struct ev_loop *loop, void (*cb)(void *userdata), void *userdata)
{
    assert(loop);
    loop->reload_cb = cb;
    loop->reload_userdata = userdata;
}
