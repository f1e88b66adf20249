/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The status files under the output directory. Other pods' init containers block on them, so a
 * file must never be seen half-written: each is written to a temporary file in the same directory
 * and renamed into place (file_write_atomic). Every name that reaches a path here is checked first:
 * a plain name, never a path, so nothing outside the directory can be written or removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "validate-internal.h"

bool validate_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > VALIDATE_NAME_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* dir/name, or -EINVAL when name is not a plain name. */
static int join(const char *dir, const char *name, char *buf, size_t size)
{
    if (!validate_name_ok(name))
        return -EINVAL;
    int n = snprintf(buf, size, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int validate_dir_prepare(const char *dir, struct diag *d)
{
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return diag_fail(d, -ENAMETOOLONG, "output directory name too long");
    /* Each missing directory is made 0755 whatever the umask: the status files are read by other
     * pods' containers, which may run as other users. */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0755) == 0) {
            if (chmod(path, 0755) < 0)
                return diag_fail(d, negative_errno(), "cannot set the mode of %s: %s", path,
                                 strerror(errno));
        } else if (errno != EEXIST) {
            return diag_fail(d, negative_errno(), "cannot create the output directory %s: %s", path,
                             strerror(errno));
        }
        *p = saved;
        if (!saved)
            break;
    }
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return diag_fail(d, -ENOTDIR, "the output directory %s is not a directory", dir);
    return 0;
}

int validate_file_remove(const char *dir, const char *name, struct diag *d)
{
    char path[4096];
    int r = join(dir, name, path, sizeof(path));
    if (r < 0)
        return diag_fail(d, r, "invalid status file name \"%s\"", name);
    if (unlink(path) < 0 && errno != ENOENT)
        return diag_fail(d, negative_errno(), "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

int validate_file_write(const char *dir, const char *name, const char *body, struct diag *d)
{
    char path[4096];
    int r = join(dir, name, path, sizeof(path));
    if (r < 0)
        return diag_fail(d, r, "invalid status file name \"%s\"", name);
    r = file_write_atomic(path, body, strlen(body), 0644);
    if (r < 0)
        return diag_fail(d, r, "cannot write %s: %s", path, strerror(-r));
    return 0;
}

bool validate_file_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    return join(dir, name, path, sizeof(path)) >= 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

int validate_cleanup(const char *dir, bool all, struct diag *d, unsigned *ret_removed)
{
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    unsigned removed = 0;
    int r = 0;
    if (ret_removed)
        *ret_removed = 0;
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return diag_fail(d, negative_errno(), "cannot open %s: %s", dir, strerror(errno));
    int dup_fd = dup(fd);
    DIR *dp = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!dp) {
        r = negative_errno();
        if (dup_fd >= 0)
            close(dup_fd);
        return diag_fail(d, r, "cannot read %s: %s", dir, strerror(-r));
    }
    for (struct dirent *e; (e = readdir(dp));) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (!all && (e->d_name[0] == '.' || !ends_with(e->d_name, "-ready")))
            continue;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
            continue;
        if (!all && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            continue;
        if (unlinkat(fd, e->d_name, 0) < 0) {
            if (errno == ENOENT)
                continue;
            r = diag_fail(d, negative_errno(), "cannot remove %s/%s: %s", dir, e->d_name,
                          strerror(errno));
            break;
        }
        log_info("removed a status file", "file", e->d_name, "dir", dir);
        removed++;
    }
    closedir(dp);
    if (ret_removed)
        *ret_removed = removed;
    return r;
}
