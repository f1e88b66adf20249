/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the crash-safe file helpers: atomic replace (content, mode, no temporary left behind,
 * failure cleanup), capped reads, lock contention and mkdir -p. Each test works in its own
 * temporary directory, removed afterwards.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base-file.h"
#include "test-tmpdir.h"

struct tmpdir {
    char path[64];
};

static int setup(void **state)
{
    struct tmpdir *t = calloc(1, sizeof(*t));

    if (!t)
        return -1;
    snprintf(t->path, sizeof(t->path), "/tmp/test_file_XXXXXX");
    if (!mkdtemp(t->path)) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tmpdir *t = *state;
    int r;

    /* Depth first, so each directory is empty when its turn comes. */
    r = test_tmpdir_remove(t->path);
    free(t);
    return r == 0 ? 0 : -1;
}

static char *path_in(const struct tmpdir *t, const char *name)
{
    char *p = NULL;

    assert_true(asprintf(&p, "%s/%s", t->path, name) > 0);
    return p;
}

/* Number of entries in dir besides . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void test_write_atomic(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *p = path_in(t, "state.json");
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    struct stat st;

    assert_int_equal(file_write_atomic(p, "first", 5, 0600), 0);
    assert_int_equal(file_read_all(p, 100, &data, &len), 0);
    assert_string_equal(data, "first");
    assert_int_equal(len, 5);
    free(data);
    data = NULL;

    /* Replace with something shorter, and a different mode. */
    assert_int_equal(file_write_atomic(p, "2nd", 3, 0644), 0);
    assert_int_equal(file_read_all(p, 100, &data, &len), 0);
    assert_string_equal(data, "2nd");
    assert_int_equal(len, 3);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);

    assert_int_equal(file_write_atomic(p, "", 0, 0600), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* Only the target: no temporary file left behind. */
    assert_int_equal(count_entries(t->path), 1);
}

static void test_write_atomic_large(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *p = path_in(t, "big");
    _cleanup_free_ char *big = malloc(3 << 20);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;

    assert_non_null(big);
    for (size_t i = 0; i < (3 << 20); i++)
        big[i] = (char)('a' + i % 26);
    assert_int_equal(file_write_atomic(p, big, 3 << 20, 0600), 0);
    assert_int_equal(file_read_all(p, 3 << 20, &data, &len), 0);
    assert_int_equal(len, 3 << 20);
    assert_memory_equal(data, big, 3 << 20);
}

static void test_write_atomic_fails(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *dir = path_in(t, "sub");
    _cleanup_free_ char *missing = path_in(t, "nodir/x");
    _cleanup_free_ char *slash = path_in(t, "x/");

    assert_int_equal(file_write_atomic(missing, "x", 1, 0600), -ENOENT);
    assert_int_equal(file_write_atomic(slash, "x", 1, 0600), -EISDIR);
    /* rename over a non-empty directory fails after the temporary was written: it must go. */
    assert_int_equal(file_mkdir_p(dir, 0700), 0);
    {
        _cleanup_free_ char *inner = path_in(t, "sub/f");

        assert_int_equal(file_write_atomic(inner, "x", 1, 0600), 0);
    }
    assert_true(file_write_atomic(dir, "x", 1, 0600) < 0);
    assert_int_equal(count_entries(t->path), 1);
}

static void test_read_all(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *p = path_in(t, "f");
    _cleanup_free_ char *data = NULL;
    char *untouched = (char *)"x";
    size_t len = 77;

    assert_int_equal(file_write_atomic(p, "0123456789", 10, 0600), 0);
    assert_int_equal(file_read_all(p, 10, &data, &len), 0);
    assert_int_equal(len, 10);
    assert_string_equal(data, "0123456789");
    assert_int_equal(file_read_all(p, 9, &untouched, &len), -EFBIG);
    assert_string_equal(untouched, "x");
    assert_int_equal(len, 10);
    assert_int_equal(file_read_all(p, 0, &untouched, &len), -EFBIG);
    assert_int_equal(file_read_all("/nonexistent/f", 10, &untouched, &len), -ENOENT);
    /* Files whose size stat does not tell. */
    free(data);
    data = NULL;
    assert_int_equal(file_read_all("/proc/self/status", 1 << 20, &data, &len), 0);
    assert_true(len > 0);
    assert_non_null(strstr(data, "Name:"));
}

static void test_lock(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *p = path_in(t, "lock");
    _cleanup_close_ int a = -1;
    int b = -1;
    struct stat st;

    assert_int_equal(file_lock(p, false, &a), 0);
    assert_true(a >= 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* A second open file description is refused, as another process would be. */
    assert_int_equal(file_lock(p, false, &b), -EWOULDBLOCK);
    assert_int_equal(b, -1);
    close(TAKE_FD(a));
    assert_int_equal(file_lock(p, false, &b), 0);
    assert_true(b >= 0);
    close(b);
}

static void test_lock_wait(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *p = path_in(t, "lock");
    int fd = -1, held[2], release[2], status = 0;
    pid_t pid;
    char c;

    assert_int_equal(pipe(held), 0);
    assert_int_equal(pipe(release), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char cp[128];
        int cfd = -1;

        /* The child leaves by _exit: free first, or valgrind counts the path as a leak. */
        snprintf(cp, sizeof(cp), "%s", p);
        free(TAKE_PTR(p));
        close(held[0]);
        close(release[1]);
        if (file_lock(cp, false, &cfd) < 0)
            _exit(1);
        if (write(held[1], "l", 1) != 1)
            _exit(2);
        /* Hold the lock until the parent closes the release pipe (read returns 0). */
        if (read(release[0], &c, 1) != 0)
            _exit(3);
        _exit(0);
    }
    close(held[1]);
    close(release[0]);
    assert_int_equal(read(held[0], &c, 1), 1);
    close(held[0]);
    assert_int_equal(file_lock(p, false, &fd), -EWOULDBLOCK);
    assert_int_equal(fd, -1);
    /* Let the child go; waiting returns once its lock goes with it. */
    close(release[1]);
    assert_int_equal(file_lock(p, true, &fd), 0);
    assert_true(fd >= 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
}

static void test_mkdir_p(void **state)
{
    struct tmpdir *t = *state;
    _cleanup_free_ char *deep = path_in(t, "a/b//c/");
    _cleanup_free_ char *file = path_in(t, "a/file");
    _cleanup_free_ char *under_file = path_in(t, "a/file/x");
    struct stat st;

    assert_int_equal(file_mkdir_p(deep, 0750), 0);
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0750 & ~(unsigned)0022 & 0777);
    /* Again: already there is fine. */
    assert_int_equal(file_mkdir_p(deep, 0750), 0);
    assert_int_equal(file_write_atomic(file, "x", 1, 0600), 0);
    assert_int_equal(file_mkdir_p(file, 0750), -ENOTDIR);
    assert_int_equal(file_mkdir_p(under_file, 0750), -ENOTDIR);
    assert_int_equal(file_mkdir_p("", 0750), -EINVAL);
    assert_int_equal(file_mkdir_p("/", 0750), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_atomic_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_atomic_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
    };

    umask(0022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
