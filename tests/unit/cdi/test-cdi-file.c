/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of CDI spec files: names (cdi.md §5), the atomic write (content, mode 0644 whatever the
 * umask, no temporary file left, a directory created when missing, a file in the way refused) and
 * idempotent removal. Each test works in its own temporary directory.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cdi.h"
#include "test-tmpdir.h"

static struct cdi_spec *sample(const char *kind)
{
    struct cdi_spec *spec = NULL;
    struct cdi_device *dev = NULL;
    assert_int_equal(cdi_spec_new(kind, NULL, &spec), 0);
    assert_int_equal(cdi_spec_add_device(spec, "gpu0", NULL, &dev), 0);
    assert_int_equal(
        cdi_edits_add_device_node(&dev->edits, &(struct cdi_device_node){.path = "/dev/nvidia0"}),
        0);
    return spec;
}

static void test_file_name(void **state)
{
    static const struct {
        const char *kind, *id;
        enum cdi_format format;
        const char *want;
    } cases[] = {
        {"nvidia.com/gpu", NULL, CDI_FORMAT_JSON, "nvidia.com-gpu.json"},
        {"k8s.device-plugin.nvidia.com/gpu", NULL, CDI_FORMAT_JSON,
         "k8s.device-plugin.nvidia.com-gpu.json"},
        {"k8s.gpu.nvidia.com/claim", "dab5ab50-d59a-42a6-af16-cfd4628c0f7a", CDI_FORMAT_YAML,
         "k8s.gpu.nvidia.com-claim_dab5ab50-d59a-42a6-af16-cfd4628c0f7a.yaml"},
        {"example.com/x", "ns/claim", CDI_FORMAT_YAML, "example.com-x_ns_claim.yaml"},
    };
    char *name = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(
            cdi_spec_file_name(cases[i].kind, cases[i].id, cases[i].format, NULL, &name), 0);
        assert_string_equal(name, cases[i].want);
        free(name);
    }
    name = NULL;
    assert_int_equal(cdi_spec_file_name("nvidia.com", NULL, CDI_FORMAT_JSON, NULL, &name), -EINVAL);
    assert_int_equal(cdi_spec_file_name("a.com/b", "../etc", CDI_FORMAT_JSON, NULL, &name),
                     -EINVAL);
    assert_int_equal(cdi_spec_file_name("a.com/b", "x y", CDI_FORMAT_JSON, NULL, &name), -EINVAL);
    assert_int_equal(cdi_spec_file_name("a.com/b", "", CDI_FORMAT_JSON, NULL, &name), -EINVAL);
    assert_null(name);
}

static void test_write(void **state)
{
    const char *dir = *state;
    struct cdi_spec *spec = sample("nvidia.com/gpu");
    char *path = NULL, *text = NULL, *want = NULL;
    size_t len = 0;
    struct stat st;
    mode_t old = umask(077);
    assert_int_equal(cdi_spec_write(spec, dir, NULL, CDI_FORMAT_JSON, NULL, &path), 0);
    umask(old);
    char *expect = test_tmpdir_path(dir, "nvidia.com-gpu.json");
    assert_string_equal(path, expect);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(file_read_all(path, 1 << 20, &text, &len), 0);
    assert_int_equal(cdi_spec_format(spec, CDI_FORMAT_JSON, NULL, &want, NULL), 0);
    assert_string_equal(text, want);
    test_tmpdir_assert_entries(dir, "nvidia.com-gpu.json");
    /* Replacing keeps one file and no temporary. */
    free(path);
    assert_int_equal(cdi_spec_write(spec, dir, NULL, CDI_FORMAT_JSON, NULL, NULL), 0);
    assert_int_equal(cdi_spec_write(spec, dir, "c1", CDI_FORMAT_YAML, NULL, NULL), 0);
    test_tmpdir_assert_entries(dir, "nvidia.com-gpu.json nvidia.com-gpu_c1.yaml");
    free(expect);
    free(text);
    free(want);
    cdi_spec_free(spec);
}

static void test_write_creates_dir(void **state)
{
    struct cdi_spec *spec = sample("nvidia.com/gpu");
    char *sub = test_tmpdir_path(*state, "run/cdi");
    struct stat st;
    assert_int_equal(cdi_spec_write(spec, sub, NULL, CDI_FORMAT_YAML, NULL, NULL), 0);
    assert_int_equal(stat(sub, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    test_tmpdir_assert_entries(sub, "nvidia.com-gpu.yaml");
    free(sub);
    cdi_spec_free(spec);
}

static void test_write_fails(void **state)
{
    const char *dir = *state;
    struct cdi_spec *spec = sample("nvidia.com/gpu");
    char *file = test_tmpdir_path(dir, "afile");
    char *path = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(file_write_atomic(file, "x", 1, 0644), 0);
    assert_int_equal(cdi_spec_write(spec, file, NULL, CDI_FORMAT_JSON, &d, &path), -ENOTDIR);
    assert_non_null(strstr(d.msg, "not a directory"));
    assert_null(path);
    /* An invalid spec is refused before anything is written. */
    struct cdi_spec *empty = NULL;
    assert_int_equal(cdi_spec_new("nvidia.com/gpu", NULL, &empty), 0);
    assert_int_equal(cdi_spec_write(empty, dir, NULL, CDI_FORMAT_JSON, &d, NULL), -EINVAL);
    test_tmpdir_assert_entries(dir, "afile");
    cdi_spec_free(empty);
    cdi_spec_free(spec);
    free(file);
}

static void test_remove(void **state)
{
    const char *dir = *state;
    struct cdi_spec *spec = sample("k8s.gpu.nvidia.com/claim");
    assert_int_equal(cdi_spec_write(spec, dir, "uid-1", CDI_FORMAT_YAML, NULL, NULL), 0);
    assert_int_equal(cdi_spec_write(spec, dir, "uid-2", CDI_FORMAT_YAML, NULL, NULL), 0);
    assert_int_equal(cdi_spec_remove(dir, "k8s.gpu.nvidia.com/claim", "uid-1", NULL), 0);
    test_tmpdir_assert_entries(dir, "k8s.gpu.nvidia.com-claim_uid-2.yaml");
    assert_int_equal(cdi_spec_remove(dir, "k8s.gpu.nvidia.com/claim", "uid-1", NULL), 0);
    assert_int_equal(cdi_spec_remove(dir, "bad", "uid-1", NULL), -EINVAL);
    cdi_spec_free(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_name),
        cmocka_unit_test_setup_teardown(test_write, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_write_creates_dir, test_tmpdir_setup,
                                        test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_write_fails, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_remove, test_tmpdir_setup, test_tmpdir_teardown),
    };
    umask(0022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
