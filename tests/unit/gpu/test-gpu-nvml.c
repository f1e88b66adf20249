/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading NVML: the exact words for a node without the driver, a library that lacks the required
 * symbols (libc and libm stand in for a wrong file), $GPUPLANE_NVML_LIB, and, through the mock, an
 * nvmlInit that fails (no profile: "Driver Not Loaded"; a broken profile: the mock's
 * file:line:col).
 */
#include "gpu-internal.h"
#include "gpu-test.h"

#define NOT_FOUND                                                                                  \
    "NVML library not found: is the NVIDIA driver installed? Use --nvml-lib to point at it"

/* A pointer the library must leave alone on failure. */
#define SENTINEL ((struct gpu_nvml *)0x1)

static void test_missing_library(void **state)
{
    struct gpu_nvml *nvml = SENTINEL;
    struct diag d;

    diag_init(&d);
    assert_int_equal(gpu_nvml_open("/nonexistent/libnvidia-ml.so.1", &d, &nvml), -ENOENT);
    assert_ptr_equal(nvml, SENTINEL);
    assert_int_equal(strncmp(d.msg, NOT_FOUND, strlen(NOT_FOUND)), 0);
    /* only the dlerror detail may follow, in parentheses */
    const char *rest = d.msg + strlen(NOT_FOUND);
    assert_true(rest[0] == '\0' || (rest[0] == ' ' && rest[1] == '('));
}

static void test_missing_library_from_env(void **state)
{
    struct gpu_nvml *nvml = SENTINEL;
    struct diag d;

    diag_init(&d);
    assert_int_equal(setenv("GPUPLANE_NVML_LIB", "/nonexistent/from-env.so.1", 1), 0);
    assert_int_equal(gpu_nvml_open(NULL, &d, &nvml), -ENOENT);
    assert_int_equal(unsetenv("GPUPLANE_NVML_LIB"), 0);
    assert_ptr_equal(nvml, SENTINEL);
    assert_non_null(strstr(d.msg, NOT_FOUND));
    assert_non_null(strstr(d.msg, "from-env.so.1"));
}

static void test_library_without_symbols(void **state)
{
    static const char *const libs[] = {"libc.so.6", "libm.so.6"};
    for (size_t i = 0; i < ARRAY_SIZE(libs); i++) {
        struct gpu_nvml *nvml = SENTINEL;
        struct diag d;

        diag_init(&d);
        assert_int_equal(gpu_nvml_open(libs[i], &d, &nvml), -ELIBBAD);
        assert_ptr_equal(nvml, SENTINEL);
        assert_non_null(strstr(d.msg, libs[i]));
        assert_non_null(strstr(d.msg, "nvmlInit_v2"));
    }
}

static void test_strerror_without_library(void **state)
{
    assert_string_equal(gpu_nvml_strerror(NULL, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    assert_string_equal(gpu_nvml_strerror(NULL, NVML_ERROR_NOT_SUPPORTED), "Not Supported");
    assert_string_equal(gpu_nvml_strerror(NULL, 12345), "Unknown Error");
    assert_string_equal(gpu_nvml_strerror(NULL, -1), "Unknown Error");
    assert_null(gpu_nvml_close(NULL));
}

#ifdef MOCK_NVML_LIB
static void test_init_driver_not_loaded(void **state)
{
    struct gpu_nvml *nvml = SENTINEL;
    struct diag d;

    diag_init(&d);
    assert_int_equal(unsetenv("MOCK_NVML_PROFILE"), 0);
    assert_int_equal(gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml), -ENODEV);
    assert_ptr_equal(nvml, SENTINEL);
    assert_non_null(strstr(d.msg, "Driver Not Loaded"));
}

static void test_init_bad_profile(void **state)
{
    char *dir = test_tmpdir();
    char path[4200];
    struct gpu_nvml *nvml = SENTINEL;
    struct diag d;

    snprintf(path, sizeof(path), "%s/typo.yaml", dir);
    test_write_file(path, "gpus: []\nmemroy: 5\n");
    test_use_profile(path);
    diag_init(&d);
    assert_int_equal(gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml), -EINVAL);
    assert_ptr_equal(nvml, SENTINEL);
    char want[4300];
    snprintf(want, sizeof(want), "%s:2:1: ", path);
    if (strncmp(d.msg, want, strlen(want)) != 0 || !strstr(d.msg, "memroy"))
        fail_msg("unexpected message: %s", d.msg);
    test_rmtree(dir);
    free(dir);
}

static void test_open_and_close(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("pcie-t4");
    assert_string_equal(gpu_nvml_strerror(nvml, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    assert_non_null(nvml->fn.nvmlEventSetWait_v2);
    /* a second, independent instance: NVML's init is reference counted */
    struct gpu_nvml *second = test_open("pcie-t4");
    assert_ptr_not_equal(second, nvml);
    assert_null(gpu_nvml_close(second));
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_missing_library_from_env),
        cmocka_unit_test(test_library_without_symbols),
        cmocka_unit_test(test_strerror_without_library),
#ifdef MOCK_NVML_LIB
        cmocka_unit_test(test_init_driver_not_loaded),
        cmocka_unit_test(test_init_bad_profile),
        cmocka_unit_test(test_open_and_close),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
