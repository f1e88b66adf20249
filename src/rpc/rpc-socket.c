/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The unix socket files a server listens on. The kubelet finds plugins by the socket files in a
 * directory, so their life matters: a socket appears only once it listens with its final mode
 * (bound under a dot-name, which the plugin watcher ignores, then renamed), a stale socket from a
 * previous run is replaced but nothing else is, and at the end a server removes only the file it
 * created (same inode), never a successor's.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc-server-internal.h"

#define LISTEN_BACKLOG 128

/* "<dir>/.<base>.<pid>.tmp": a sibling, so rename() is atomic, and hidden from the watcher. */
static int temp_path(const char *path, char *buf, size_t size)
{
    _cleanup_free_ char *d = strdup(path), *b = strdup(path);
    int n;

    if (!d || !b)
        return -ENOMEM;
    n = snprintf(buf, size, "%s/.%s.%ld.tmp", dirname(d), basename(b), (long)getpid());
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return 0;
}

static int check_path(const char *path, struct diag *d)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return diag_fail(d, negative_errno(), "cannot inspect %s: %m", path);
    }
    if (!S_ISSOCK(st.st_mode))
        return diag_fail(d, -EEXIST, "%s exists and is not a socket; refusing to replace it", path);
    /* A socket left by an earlier run: the rename below replaces it. */
    return 0;
}

static int bind_at(int fd, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);

    if (len >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, len + 1);
    (void)unlink(path);
    if (bind(fd, (struct sockaddr *)&sa,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1)) < 0)
        return negative_errno();
    return 0;
}

int rpc_socket_listen(const char *path, mode_t mode, int *ret_fd, dev_t *ret_dev, ino_t *ret_ino,
                      struct diag *d)
{
    _cleanup_close_ int fd = -1;
    char tmp[sizeof(((struct sockaddr_un *)NULL)->sun_path)];
    struct stat st;
    int r;

    r = check_path(path, d);
    if (r < 0)
        return r;
    if (strlen(path) >= sizeof(tmp))
        return diag_fail(d, -ENAMETOOLONG, "socket path too long: %s", path);
    r = temp_path(path, tmp, sizeof(tmp));
    if (r < 0)
        return diag_fail(d, r, "socket path too long for its temporary name: %s", path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return diag_fail(d, negative_errno(), "socket: %m");
    r = bind_at(fd, tmp);
    if (r < 0)
        return diag_fail(d, r, "cannot bind %s: %s", tmp, strerror(-r));
    if (chmod(tmp, mode) < 0 || listen(fd, LISTEN_BACKLOG) < 0 || rename(tmp, path) < 0) {
        r = negative_errno();
        (void)unlink(tmp);
        return diag_fail(d, r, "cannot set up socket %s: %s", path, strerror(-r));
    }
    if (stat(path, &st) < 0) {
        r = negative_errno();
        return diag_fail(d, r, "cannot inspect %s: %s", path, strerror(-r));
    }
    *ret_dev = st.st_dev;
    *ret_ino = st.st_ino;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

void rpc_socket_remove(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;

    /* Another instance may have replaced our socket since: leave its file alone. */
    if (lstat(path, &st) < 0 || st.st_dev != dev || st.st_ino != ino)
        return;
    (void)unlink(path);
}
