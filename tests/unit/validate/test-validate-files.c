/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the status files: which names are accepted, the output directory made 0755, writing
 * (content, mode 0644 whatever the umask, no temporary file left beside it, a file replaced whole
 * rather than rewritten in place), removal, cleanup (only *-ready, dot files kept; everything with
 * CLEANUP_ALL) and waiting for files (present, created later by another thread, a directory that
 * appears late, timeout).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-tmpdir.h"
#include "validate-internal.h"

static void touch(const char *dir, const char *name)
{
    char *p = test_tmpdir_path(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    free(p);
}

static void test_names(void **state)
{
    static const char *const good[] = {
        "driver-ready", "toolkit-ready", ".driver-ctr-ready", "a", "x_y.z-1", "..."};
    static const char *const bad[] = {"",     ".",   "..",   "a/b",   "/abs",
                                      "../x", "a b", "a\nb", "tab\t", "ü"};
    char longest[VALIDATE_NAME_MAX + 2];
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        if (!validate_name_ok(good[i]))
            fail_msg("refused %s", good[i]);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        if (validate_name_ok(bad[i]))
            fail_msg("accepted \"%s\"", bad[i]);
    memset(longest, 'a', sizeof(longest) - 1);
    longest[VALIDATE_NAME_MAX] = '\0';
    assert_true(validate_name_ok(longest));
    longest[VALIDATE_NAME_MAX] = 'a';
    longest[VALIDATE_NAME_MAX + 1] = '\0';
    assert_false(validate_name_ok(longest));
}

static void test_prepare(void **state)
{
    char *dir = test_tmpdir_path(*state, "run/nvidia/validations");
    struct stat st;
    struct diag d;
    mode_t old = umask(077);
    assert_int_equal(validate_dir_prepare(dir, &d), 0);
    umask(old);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(validate_dir_prepare(dir, &d), 0); /* already there */
    touch(*state, "file");
    char *file = test_tmpdir_path(*state, "file");
    assert_true(validate_dir_prepare(file, &d) < 0);
    free(file);
    free(dir);
}

static void test_write(void **state)
{
    const char *dir = *state;
    char *path = test_tmpdir_path(dir, "driver-ready");
    struct diag d;
    struct stat st1, st2;
    char *text = NULL;
    size_t len = 0;
    mode_t old = umask(077);
    assert_int_equal(validate_file_write(dir, "driver-ready", "IS_HOST_DRIVER=true\n", &d), 0);
    umask(old);
    assert_int_equal(file_read_all(path, 1024, &text, &len), 0);
    assert_string_equal(text, "IS_HOST_DRIVER=true\n");
    free(text);
    assert_int_equal(stat(path, &st1), 0);
    assert_int_equal(st1.st_mode & 07777, 0644);
    assert_true(validate_file_exists(dir, "driver-ready"));
    /* A second write replaces the file (a new inode, renamed over it) and leaves nothing else. */
    assert_int_equal(validate_file_write(dir, "driver-ready", "", &d), 0);
    assert_int_equal(stat(path, &st2), 0);
    assert_true(st1.st_ino != st2.st_ino);
    assert_int_equal(st2.st_size, 0);
    test_tmpdir_assert_entries(dir, "driver-ready");
    /* Names are checked before they become paths. */
    assert_int_equal(validate_file_write(dir, "../escape", "x", &d), -EINVAL);
    assert_int_equal(validate_file_remove(dir, "a/b", &d), -EINVAL);
    assert_false(validate_file_exists(dir, "../x"));
    assert_int_equal(validate_file_remove(dir, "driver-ready", &d), 0);
    assert_int_equal(validate_file_remove(dir, "driver-ready", &d), 0); /* already gone */
    assert_false(validate_file_exists(dir, "driver-ready"));
    test_tmpdir_assert_entries(dir, "");
    free(path);
}

static void test_write_fails(void **state)
{
    struct diag d;
    char *missing = test_tmpdir_path(*state, "missing");
    diag_init(&d);
    assert_true(validate_file_write(missing, "driver-ready", "x", &d) < 0);
    assert_non_null(strstr(d.msg, "cannot write"));
    free(missing);
}

static void test_cleanup(void **state)
{
    const char *dir = *state;
    struct diag d;
    unsigned n = 99;
    char *sub = test_tmpdir_path(dir, "sub-ready");
    touch(dir, "driver-ready");
    touch(dir, "toolkit-ready");
    touch(dir, ".driver-ctr-ready");
    touch(dir, "workload-type");
    touch(dir, "ready");
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(validate_cleanup(dir, false, &d, &n), 0);
    assert_int_equal(n, 2);
    test_tmpdir_assert_entries(dir, ".driver-ctr-ready ready sub-ready workload-type");
    assert_int_equal(validate_cleanup(dir, true, &d, &n), 0);
    assert_int_equal(n, 3);
    test_tmpdir_assert_entries(dir, "sub-ready");
    char *none = test_tmpdir_path(dir, "none");
    assert_int_equal(validate_cleanup(none, false, &d, &n), 0);
    assert_int_equal(n, 0);
    free(none);
    free(sub);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct later {
    const char *dir;
    const char *name;
    bool make_dir;
    unsigned delay_ms;
};

static void *write_later(void *p)
{
    const struct later *l = p;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)l->delay_ms * 1000000};
    nanosleep(&ts, NULL);
    if (l->make_dir)
        (void)mkdir(l->dir, 0755);
    if (validate_file_write(l->dir, l->name, "", NULL) < 0)
        abort();
    return NULL;
}

static void test_wait(void **state)
{
    const char *dir = *state;
    char *names[] = {(char *)"driver-ready", (char *)"toolkit-ready"};
    pthread_t t;
    touch(dir, "driver-ready");
    /* One there, one missing: times out. */
    uint64_t t0 = mono_ms();
    assert_int_equal(validate_wait_files(dir, names, 2, 200, 50), -ETIMEDOUT);
    assert_true(mono_ms() - t0 >= 200);
    /* The other one arrives by rename: woken at once, long before the log interval. */
    struct later l = {.dir = dir, .name = "toolkit-ready", .delay_ms = 100};
    assert_int_equal(pthread_create(&t, NULL, write_later, &l), 0);
    t0 = mono_ms();
    assert_int_equal(validate_wait_files(dir, names, 2, 10000, 60000), 0);
    assert_true(mono_ms() - t0 < 5000);
    assert_int_equal(pthread_join(t, NULL), 0);
    /* A directory that does not exist yet: polled until it does. */
    char *late = test_tmpdir_path(dir, "late");
    struct later l2 = {.dir = late, .name = "plugin-ready", .make_dir = true, .delay_ms = 100};
    char *plugin[] = {(char *)"plugin-ready"};
    assert_int_equal(pthread_create(&t, NULL, write_later, &l2), 0);
    assert_int_equal(validate_wait_files(late, plugin, 1, 10000, 60000), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    free(late);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_prepare, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_write, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_write_fails, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cleanup, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_wait, test_tmpdir_setup, test_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
