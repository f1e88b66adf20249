/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane validate wait`: what NVIDIA's init containers do with a shell loop (`until [ -f
 * /run/nvidia/validations/toolkit-ready ]; do sleep 5; done`), without the loop's five seconds of
 * lag: an inotify watch on the directory wakes the process on the rename that creates a status
 * file. The watch is set before the first look, so a file created in between is not missed. While
 * the directory does not exist, or inotify cannot be had (no instances left), the directory is
 * looked at once a second; and it is looked at on every progress line anyway, in case the file
 * system does not deliver events here. No busy loop: the process sleeps in poll(2).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "validate-internal.h"

/* How often a missing directory (or a process without inotify) is looked at. */
#define POLL_FALLBACK_MS 1000u

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The names still missing, joined with ',' into buf; their count. */
static size_t missing(const char *dir, char *const *names, size_t n, char *buf, size_t size)
{
    size_t count = 0, used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (validate_file_exists(dir, names[i]))
            continue;
        int w = snprintf(buf + used, size - used, "%s%s", count ? "," : "", names[i]);
        if (w > 0 && (size_t)w < size - used)
            used += (size_t)w;
        count++;
    }
    return count;
}

/* Drains the inotify queue; returns false when the watch is gone (the directory was removed or
 * moved, or its file system unmounted), so that it is set again. */
static bool drain(int fd)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool alive = true;
    for (;;) {
        ssize_t len = read(fd, buf, sizeof(buf));
        if (len <= 0)
            return alive;
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT))
                alive = false;
            p += sizeof(*ev) + ev->len;
        }
    }
}

int validate_wait_files(const char *dir, char *const *names, size_t n, uint64_t timeout_ms,
                        uint64_t log_ms)
{
    _cleanup_close_ int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    const uint32_t mask = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF |
                          IN_MOVE_SELF | IN_ONLYDIR;
    char waiting[2048];
    uint64_t start = now_ms(), next_log = start;
    int wd = -1;
    bool said_poll = false;
    if (fd < 0)
        log_warn("inotify is not available; looking once a second", "error", strerror(errno));
    for (;;) {
        if (fd >= 0 && wd < 0) {
            wd = inotify_add_watch(fd, dir, mask);
            if (wd < 0 && !said_poll) {
                log_info("cannot watch the directory yet; looking once a second", "dir", dir,
                         "error", strerror(errno));
                said_poll = true;
            }
        }
        size_t left = missing(dir, names, n, waiting, sizeof(waiting));
        if (left == 0) {
            log_info("every status file is there", "dir", dir, "waited_ms",
                     LOG_INT(now_ms() - start));
            return 0;
        }
        uint64_t now = now_ms();
        if (timeout_ms && now - start >= timeout_ms) {
            log_error("gave up waiting for status files", "dir", dir, "missing", waiting,
                      "timeout_ms", LOG_INT(timeout_ms));
            return -ETIMEDOUT;
        }
        if (now >= next_log) {
            log_info("waiting for status files", "dir", dir, "missing", waiting);
            next_log = now + log_ms;
        }
        uint64_t until = next_log;
        if (timeout_ms && start + timeout_ms < until)
            until = start + timeout_ms;
        if (wd < 0 && now + POLL_FALLBACK_MS < until)
            until = now + POLL_FALLBACK_MS;
        struct pollfd pfd = {.fd = wd >= 0 ? fd : -1, .events = POLLIN};
        uint64_t wait = until > now ? until - now : 0;
        int r = poll(&pfd, 1, (int)(wait > 60000 ? 60000 : wait));
        if (r < 0 && errno != EINTR)
            return negative_errno();
        if (r > 0 && !drain(fd)) {
            /* The kernel drops a watch whose directory went away; take it up again (or poll). */
            inotify_rm_watch(fd, wd);
            wd = -1;
            said_poll = false;
        }
    }
}
