/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scratch directories for unit tests: removing one with everything under it, depth first (each
 * directory is empty when its turn comes), without following symbolic links; a cmocka
 * setup/teardown pair that gives each test its own; paths in it, files written in it and a check
 * of what it holds. Include after <cmocka.h>.
 */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int test_tmpdir_remove_one(const char *path, const struct stat *st, int type,
                                  struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

/* 0, or -1 when something could not be removed. */
static inline int test_tmpdir_remove(const char *dir)
{
    return nftw(dir, test_tmpdir_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* cmocka setup: a new directory /tmp/<test program>_XXXXXX, its path (heap) in *state. */
static inline int test_tmpdir_setup(void **state)
{
    char *dir = NULL;
    if (asprintf(&dir, "/tmp/%s_XXXXXX", program_invocation_short_name) < 0)
        return -1;
    if (!mkdtemp(dir)) {
        free(dir);
        return -1;
    }
    *state = dir;
    return 0;
}

/* cmocka teardown of test_tmpdir_setup(): the directory removed with everything in it. */
static inline int test_tmpdir_teardown(void **state)
{
    int r = test_tmpdir_remove(*state);
    free(*state);
    return r == 0 ? 0 : -1;
}

/* dir/name (freed by the caller). */
static inline char *test_tmpdir_path(const char *dir, const char *name)
{
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

/* Writes text to dir/name; the path (freed by the caller). */
static inline char *test_tmpdir_put(const char *dir, const char *name, const char *text)
{
    char *path = test_tmpdir_path(dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* The names in dir besides . and .., sorted, joined by spaces, are want. */
static inline void test_tmpdir_assert_entries(const char *dir, const char *want)
{
    struct dirent **list = NULL;
    char got[512] = "";
    int n = scandir(dir, &list, NULL, alphasort);
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        if (strcmp(list[i]->d_name, ".") != 0 && strcmp(list[i]->d_name, "..") != 0) {
            size_t len = strlen(got);
            snprintf(got + len, sizeof(got) - len, "%s%s", len ? " " : "", list[i]->d_name);
        }
        free(list[i]);
    }
    free(list);
    assert_string_equal(got, want);
}
