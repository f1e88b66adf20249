/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the mock NVML tests: loads the built library with dlopen and resolves every symbol of
 * NVML_FUNCTIONS (as src/gpu does), points it at a profile, and writes throwaway profiles and fault
 * files into a private temporary directory that teardown removes.
 */
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu-nvml-abi.h"

struct nvml {
#define MOCK_TEST_FIELD(ret, name, params) ret(*name) params;
    NVML_FUNCTIONS(MOCK_TEST_FIELD)
#undef MOCK_TEST_FIELD
    const char *(*profile_error)(void);
    void *dl;
};

static struct nvml N;
static char tmp_dir[64];
static char tmp_files[32][128];
static size_t n_tmp_files;

static inline void nvml_load(void)
{
    N.dl = dlopen(MOCK_NVML_LIB, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(N.dl);
#define MOCK_TEST_RESOLVE(ret, name, params)                                                       \
    N.name = (ret(*) params)dlsym(N.dl, #name);                                                    \
    assert_non_null(N.name);
    NVML_FUNCTIONS(MOCK_TEST_RESOLVE)
#undef MOCK_TEST_RESOLVE
    N.profile_error = (const char *(*)(void))dlsym(N.dl, "mock_nvml_profile_error");
    assert_non_null(N.profile_error);
}

static inline int group_setup(void **state)
{
    (void)state;
    nvml_load();
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/mock-nvml-test-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static inline int group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < n_tmp_files; i++)
        unlink(tmp_files[i]);
    rmdir(tmp_dir);
    /* The library stays loaded: its globals must stay visible to valgrind's leak check. */
    return 0;
}

/* Writes text to a new file of the temporary directory and returns its path (static storage). */
static inline const char *tmp_write(const char *name, const char *text)
{
    char *path;
    FILE *f;

    assert_true(n_tmp_files < 32);
    path = tmp_files[n_tmp_files++];
    snprintf(path, 128, "%s/%s", tmp_dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Appends one line to a file, as a test injecting a fault does. */
static inline void tmp_append(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    size_t n = strlen(line);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, line, n), (ssize_t)n);
    assert_int_equal(write(fd, "\n", 1), 1);
    close(fd);
}

static inline void use_profile(const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s.yaml", NODES_DIR, name);
    assert_int_equal(setenv("MOCK_NVML_PROFILE", path, 1), 0);
}

static inline void init_profile(const char *name)
{
    use_profile(name);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
}

static inline nvmlDevice_t dev(unsigned index)
{
    nvmlDevice_t d = NULL;

    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(index, &d), NVML_SUCCESS);
    return d;
}

static inline uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
