/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the gpu tests share: cmocka, the built mock NVML library and the bundled node profiles
 * (paths come from the build as MOCK_NVML_LIB and NODES_DIR), and helpers that load a profile, read
 * its inventory and write scratch files (temporary profiles, sysfs trees, event files).
 */
#pragma once

#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu.h"

#ifndef NODES_DIR
#define NODES_DIR "examples/nodes"
#endif

/* Points the mock at a profile: a bundled name ("dgx-h100") or a path containing '/'. */
static inline void test_use_profile(const char *profile)
{
    char path[4096];
    int n;
    if (strchr(profile, '/'))
        n = snprintf(path, sizeof(path), "%s", profile);
    else
        n = snprintf(path, sizeof(path), "%s/%s.yaml", NODES_DIR, profile);
    assert_true(n > 0 && (size_t)n < sizeof(path));
    assert_int_equal(setenv("MOCK_NVML_PROFILE", path, 1), 0);
}

#ifdef MOCK_NVML_LIB
static inline struct gpu_nvml *test_open(const char *profile)
{
    struct gpu_nvml *nvml = NULL;
    struct diag d;

    diag_init(&d);
    test_use_profile(profile);
    int r = gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml);
    if (r < 0)
        fail_msg("gpu_nvml_open(%s): %d %s", profile, r, d.msg);
    assert_non_null(nvml);
    return nvml;
}
#endif

static inline struct gpu_inventory *test_read(struct gpu_nvml *nvml,
                                              const struct gpu_read_options *opts)
{
    struct gpu_inventory *inv = NULL;
    struct diag d;

    diag_init(&d);
    int r = gpu_inventory_read(nvml, opts, &d, &inv);
    if (r < 0)
        fail_msg("gpu_inventory_read: %d %s", r, d.msg);
    assert_non_null(inv);
    return inv;
}

/* A fresh scratch directory; the caller removes it with test_rmtree. */
static inline char *test_tmpdir(void)
{
    char tmpl[] = "/tmp/gpuplane-gpu-test-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *dir = strdup(tmpl);
    assert_non_null(dir);
    return dir;
}

static inline void test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static inline int test_rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    return remove(path);
}

/* rm -rf dir; the caller frees the name. */
static inline void test_rmtree(const char *dir)
{
    assert_int_equal(nftw(dir, test_rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}
