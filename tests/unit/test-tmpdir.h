/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scratch directories for unit tests: removing one with everything under it, depth first (each
 * directory is empty when its turn comes), without following symbolic links.
 */
#pragma once

#include <ftw.h>
#include <stdio.h>
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
