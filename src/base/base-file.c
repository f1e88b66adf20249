/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Crash-safe file helpers. The atomic write follows the usual recipe (temporary file beside the
 * target, fsync, rename, fsync of the directory) because a rename is only durable once its
 * directory is synced, and a temporary file in another directory could sit on another filesystem.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base-file.h"

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return negative_errno();
        }
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Splits path into a copy of its directory and a pointer to its last component. */
static int split_path(const char *path, char **ret_dir, const char **ret_base)
{
    const char *slash = strrchr(path, '/');
    char *dir;

    if (slash && slash[1] == '\0')
        return -EISDIR;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return -ENOMEM;
    *ret_dir = dir;
    *ret_base = slash ? slash + 1 : path;
    return 0;
}

static int fsync_dir(const char *dir)
{
    _cleanup_close_ int fd = -1;

    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    if (fsync(fd) < 0)
        return negative_errno();
    return 0;
}

/* Writes, syncs and closes the temporary file; the caller renames or unlinks it. */
static int fill_temp(int fd, const void *data, size_t len, mode_t mode)
{
    int r;

    if (fchmod(fd, mode) < 0)
        return negative_errno();
    r = write_all(fd, data, len);
    if (r < 0)
        return r;
    if (fsync(fd) < 0)
        return negative_errno();
    return 0;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    _cleanup_free_ char *dir = NULL;
    _cleanup_free_ char *tmp = NULL;
    const char *base;
    int fd, r;

    r = split_path(path, &dir, &base);
    if (r < 0)
        return r;
    if (asprintf(&tmp, "%s/.%s.tmpXXXXXX", dir, base) < 0) {
        tmp = NULL;
        return -ENOMEM;
    }
    /* mkostemp opens with O_EXCL and mode 0600, so nobody else sees the data before the rename. */
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    r = fill_temp(fd, data, len, mode);
    if (close(fd) < 0 && r >= 0)
        r = negative_errno();
    if (r >= 0 && rename(tmp, path) < 0)
        r = negative_errno();
    if (r < 0) {
        unlink(tmp);
        return r;
    }
    return fsync_dir(dir);
}

int file_read_all(const char *path, size_t cap, char **ret_data, size_t *ret_len)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, alloc = 0;

    /* Room for one byte past the cap (to notice it) and the NUL. */
    if (cap > SIZE_MAX - 2)
        cap = SIZE_MAX - 2;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return negative_errno();
    /* Read until EOF rather than trusting st_size: /proc and /sys files report 0 or 4096. */
    for (;;) {
        ssize_t n;

        if (alloc - len < 2) {
            size_t na = alloc ? (alloc > SIZE_MAX / 2 ? SIZE_MAX : alloc * 2) : 4096;
            char *p;

            if (na > cap + 2)
                na = cap + 2;
            if (na <= alloc)
                return -EFBIG;
            p = realloc(buf, na);
            if (!p)
                return -ENOMEM;
            buf = p;
            alloc = na;
        }
        n = read(fd, buf + len, alloc - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return negative_errno();
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > cap)
            return -EFBIG;
    }
    buf[len] = '\0';
    *ret_data = TAKE_PTR(buf);
    if (ret_len)
        *ret_len = len;
    return 0;
}

int file_lock(const char *path, bool wait, int *ret_fd)
{
    _cleanup_close_ int fd = -1;

    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0)
        return negative_errno();
    while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
        if (errno != EINTR)
            return negative_errno();
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int file_mkdir_p(const char *path, mode_t mode)
{
    _cleanup_free_ char *p = NULL;
    struct stat st;
    char *s;

    if (!path[0])
        return -EINVAL;
    p = strdup(path);
    if (!p)
        return -ENOMEM;
    /* Create each prefix in turn; one that exists is fine as long as the last is a directory. */
    for (s = p + 1;; s++) {
        char c = *s;

        if (c != '/' && c != '\0')
            continue;
        *s = '\0';
        if (s > p && s[-1] != '/' && mkdir(p, mode) < 0 && errno != EEXIST)
            return negative_errno();
        *s = c;
        if (c == '\0')
            break;
    }
    if (stat(path, &st) < 0)
        return negative_errno();
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    return 0;
}
