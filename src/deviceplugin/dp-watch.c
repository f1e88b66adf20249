/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubelet's device-plugin directory, watched with inotify as NVIDIA's plugin does: a kubelet
 * that starts deletes every socket in the directory (ours too) and then creates kubelet.sock, and
 * nothing tells a plugin but the files (kubelet-apis.md §3.5). A new kubelet.sock is told apart
 * from the one already seen by inode and change time together, because tmpfs hands a re-created
 * file the inode number of the removed one. Removals are reported by name; the daemon decides
 * whether the name was one of its sockets (checking the socket it bound, not just the name).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "dp-internal.h"

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM)

struct dp_watch {
    int fd;
    struct ev_io *io;
    char *dir;
    char *kubelet_name;
    char *kubelet_path;
    struct dp_file_id kubelet;
    dp_watch_fn fn;
    void *userdata;
};

void dp_file_id_get(const char *path, struct dp_file_id *ret)
{
    struct stat st;
    *ret = (struct dp_file_id){0};
    if (stat(path, &st) < 0)
        return;
    *ret = (struct dp_file_id){
        .exists = true, .dev = st.st_dev, .ino = st.st_ino, .ctime = st.st_ctim};
}

bool dp_file_id_equal(const struct dp_file_id *a, const struct dp_file_id *b)
{
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* kubelet.sock was created (or renamed into place): a new file means a new kubelet. */
static void kubelet_appeared(struct dp_watch *w)
{
    struct dp_file_id now;
    dp_file_id_get(w->kubelet_path, &now);
    if (!now.exists || dp_file_id_equal(&now, &w->kubelet))
        return;
    w->kubelet = now;
    w->fn(DP_WATCH_KUBELET, w->kubelet_name, w->userdata);
}

static void handle(struct dp_watch *w, const struct inotify_event *e)
{
    if (e->mask & IN_Q_OVERFLOW) {
        kubelet_appeared(w);
        w->fn(DP_WATCH_RESCAN, "", w->userdata);
        return;
    }
    if (e->len == 0 || e->name[0] == '.')
        return; /* the kubelet ignores dot-files; rpc binds under one before renaming */
    bool kubelet = strcmp(e->name, w->kubelet_name) == 0;
    if (kubelet && (e->mask & (IN_CREATE | IN_MOVED_TO)))
        kubelet_appeared(w);
    else if (e->mask & (IN_DELETE | IN_MOVED_FROM))
        w->fn(DP_WATCH_REMOVED, e->name, w->userdata);
}

static void on_readable(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            handle(userdata, e);
            p += sizeof(*e) + e->len;
        }
    }
}

static int watch_open(struct dp_watch *w, struct ev_loop *loop)
{
    int r = file_mkdir_p(w->dir, 0755);
    if (r < 0)
        return r;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0)
        return negative_errno();
    if (inotify_add_watch(w->fd, w->dir, WATCH_MASK) < 0)
        return negative_errno();
    return ev_io_add(loop, w->fd, EV_READ, on_readable, w, &w->io);
}

int dp_watch_new(struct ev_loop *loop, const char *dir, const char *kubelet_name, dp_watch_fn fn,
                 void *userdata, struct dp_watch **ret)
{
    _cleanup_(dp_watch_freep) struct dp_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->fd = -1;
    w->fn = fn;
    w->userdata = userdata;
    w->dir = strdup(dir);
    w->kubelet_name = strdup(kubelet_name);
    if (!w->dir || !w->kubelet_name)
        return -ENOMEM;
    if (asprintf(&w->kubelet_path, "%s/%s", dir, kubelet_name) < 0) {
        w->kubelet_path = NULL;
        return -ENOMEM;
    }
    int r = watch_open(w, loop);
    if (r < 0)
        return r;
    /* Watching first, then looking: a kubelet starting in between is seen either way. */
    dp_file_id_get(w->kubelet_path, &w->kubelet);
    *ret = TAKE_PTR(w);
    return 0;
}

struct dp_watch *dp_watch_free(struct dp_watch *w)
{
    if (!w)
        return NULL;
    ev_io_del(w->io);
    if (w->fd >= 0)
        close(w->fd);
    free(w->dir);
    free(w->kubelet_name);
    free(w->kubelet_path);
    free(w);
    return NULL;
}
