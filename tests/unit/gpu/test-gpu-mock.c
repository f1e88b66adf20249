/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `--mock PROFILE` selection: bundled names found through $GPUPLANE_NODES_DIR and the source tree,
 * relative paths made absolute, MOCK_NVML_PROFILE exported (and left alone on failure), a malformed
 * profile reported as file:line:col before NVML is loaded, unknown names and a missing mock library
 * reported by name. The selected library and profile are then loaded for real.
 */
#include "gpu-internal.h"
#include "gpu-test.h"

#define SENTINEL ((char *)0x1)

static const char MINI_PROFILE[] =
    "gpus:\n"
    "  - {busId: \"0000:3b:00.0\", name: \"Tesla T4\", memory: 15360, computeCapability: \"7.5\",\n"
    "     architecture: turing}\n";

static void set_mock_lib(void)
{
    assert_int_equal(setenv("GPUPLANE_MOCK_LIB", MOCK_NVML_LIB, 1), 0);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void test_name_from_nodes_dir(void **state)
{
    char *dir = test_tmpdir();
    char path[4200];
    char *lib = NULL;
    struct diag d;

    snprintf(path, sizeof(path), "%s/mini.yaml", dir);
    test_write_file(path, MINI_PROFILE);
    assert_int_equal(setenv("GPUPLANE_NODES_DIR", dir, 1), 0);
    set_mock_lib();
    diag_init(&d);
    assert_int_equal(gpu_mock_select("mini", &d, &lib), 0);
    assert_string_equal(getenv("MOCK_NVML_PROFILE"), path);
    assert_non_null(lib);
    assert_int_equal(lib[0], '/');
    assert_true(ends_with(lib, "libnvidia-ml.so.1"));

    struct gpu_nvml *nvml = NULL;
    struct gpu_inventory *inv = NULL;
    assert_int_equal(gpu_nvml_open(lib, &d, &nvml), 0);
    assert_int_equal(gpu_inventory_read(nvml, NULL, &d, &inv), 0);
    assert_int_equal(inv->n_devices, 1);
    assert_string_equal(inv->devices[0].name, "Tesla T4");
    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);

    assert_int_equal(unsetenv("GPUPLANE_NODES_DIR"), 0);
    free(lib);
    test_rmtree(dir);
    free(dir);
}

static void test_bundled_name_from_source_tree(void **state)
{
    char *lib = NULL;
    struct diag d;

    assert_int_equal(unsetenv("GPUPLANE_NODES_DIR"), 0);
    set_mock_lib();
    diag_init(&d);
    assert_int_equal(gpu_mock_select("dgx-h100", &d, &lib), 0);
    assert_true(ends_with(getenv("MOCK_NVML_PROFILE"), "/examples/nodes/dgx-h100.yaml"));
    assert_int_equal(getenv("MOCK_NVML_PROFILE")[0], '/');
    free(lib);
}

static void test_relative_path(void **state)
{
    char *dir = test_tmpdir();
    char path[4200], cwd[4096];
    char *lib = NULL;
    struct diag d;

    snprintf(path, sizeof(path), "%s/node.yaml", dir);
    test_write_file(path, MINI_PROFILE);
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(dir), 0);
    set_mock_lib();
    diag_init(&d);
    int r = gpu_mock_select("./node.yaml", &d, &lib);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r, 0);
    const char *env = getenv("MOCK_NVML_PROFILE");
    assert_int_equal(env[0], '/');
    assert_true(ends_with(env, "/node.yaml"));
    assert_int_equal(access(env, R_OK), 0);
    free(lib);
    test_rmtree(dir);
    free(dir);
}

static void test_malformed_profile(void **state)
{
    char *dir = test_tmpdir();
    char path[4200], want[4300];
    char *lib = SENTINEL;
    struct diag d;

    snprintf(path, sizeof(path), "%s/bad.yaml", dir);
    test_write_file(path, "gpus:\n  - index: 0\n    uuid: [unclosed\n");
    assert_int_equal(setenv("MOCK_NVML_PROFILE", "before", 1), 0);
    set_mock_lib();
    diag_init(&d);
    assert_true(gpu_mock_select(path, &d, &lib) < 0);
    assert_ptr_equal(lib, SENTINEL);
    assert_string_equal(getenv("MOCK_NVML_PROFILE"), "before");
    snprintf(want, sizeof(want), "%s:", path);
    if (strncmp(d.msg, want, strlen(want)) != 0 || d.line <= 0 || d.col <= 0)
        fail_msg("no position in: %s", d.msg);
    test_rmtree(dir);
    free(dir);
}

static void test_unknown_name(void **state)
{
    char *lib = SENTINEL;
    struct diag d;

    set_mock_lib();
    diag_init(&d);
    assert_int_equal(gpu_mock_select("no-such-node", &d, &lib), -ENOENT);
    assert_ptr_equal(lib, SENTINEL);
    assert_non_null(strstr(d.msg, "no-such-node"));
    diag_init(&d);
    assert_int_equal(gpu_mock_select("/nonexistent/node.yaml", &d, &lib), -ENOENT);
    assert_non_null(strstr(d.msg, "/nonexistent/node.yaml"));
    diag_init(&d);
    assert_int_equal(gpu_mock_select("", &d, &lib), -EINVAL);
    assert_ptr_equal(lib, SENTINEL);
}

static void test_missing_mock_library(void **state)
{
    char *lib = SENTINEL;
    struct diag d;

    assert_int_equal(setenv("GPUPLANE_MOCK_LIB", "/nonexistent/libnvidia-ml.so.1", 1), 0);
    diag_init(&d);
    assert_int_equal(gpu_mock_select("pcie-t4", &d, &lib), -ENOENT);
    assert_non_null(strstr(d.msg, "/nonexistent/libnvidia-ml.so.1"));
    /* without the variable: the test binary has no mock-nvml/ beside it */
    assert_int_equal(unsetenv("GPUPLANE_MOCK_LIB"), 0);
    diag_init(&d);
    assert_int_equal(gpu_mock_select("pcie-t4", &d, &lib), -ENOENT);
    assert_non_null(strstr(d.msg, "mock NVML library not found"));
    assert_ptr_equal(lib, SENTINEL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_from_nodes_dir),
        cmocka_unit_test(test_bundled_name_from_source_tree),
        cmocka_unit_test(test_relative_path),
        cmocka_unit_test(test_malformed_profile),
        cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_missing_mock_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
