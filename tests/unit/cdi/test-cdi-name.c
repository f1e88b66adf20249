/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the CDI naming rules (cdi.md §4) and the Kubernetes annotation helpers (§6), as tables
 * of names with the verdict of the reference parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cdi.h"

struct name_case {
    const char *name;
    bool valid;
};

static void test_vendor_class(void **state)
{
    static const struct name_case vendors[] = {
        {"nvidia.com", true},
        {"k8s.device-plugin.nvidia.com", true},
        {"a", true},
        {"a_b-c.d9", true},
        {"", false},
        {"9nvidia.com", false},
        {"nvidia.com.", false},
        {"nvidia.com-", false},
        {"-nvidia", false},
        {"nvi dia", false},
        {"nvi/dia", false},
        {"nvidia:com", false},
        {"nvidiä", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(vendors); i++) {
        assert_int_equal(cdi_valid_vendor(vendors[i].name), vendors[i].valid);
        assert_int_equal(cdi_valid_class(vendors[i].name), vendors[i].valid);
    }
    char long_class[65];
    memset(long_class, 'a', 64);
    long_class[64] = '\0';
    assert_false(cdi_valid_class(long_class));
    long_class[63] = '\0';
    assert_true(cdi_valid_class(long_class));
    assert_false(cdi_valid_vendor(NULL));
}

static void test_kind(void **state)
{
    static const struct name_case kinds[] = {
        {"nvidia.com/gpu", true},
        {"k8s.gpu.nvidia.com/claim", true},
        {"management.nvidia.com/gpu", true},
        {"nvidia.com/imex-channel", true},
        {"nvidia.com/gpu.shared", true},
        {"nvidia.com", false},
        {"/gpu", false},
        {"nvidia.com/", false},
        {"nvidia.com/gpu/x", false},
        {"nvidia.com/0gpu", false},
        {"nvidia.com/gpu=0", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        assert_int_equal(cdi_valid_kind(kinds[i].name), kinds[i].valid);
}

static void test_device_name(void **state)
{
    static const struct name_case names[] = {
        {"0", true},
        {"all", true},
        {"0:1", true},
        {"GPU-6b4c1a2e-0000-1111-2222-333344445555", true},
        {"MIG-6b4c1a2e-0000-1111-2222-333344445555", true},
        {"dab5ab50-d59a-42a6-af16-cfd4628c0f7a-gpu-0", true},
        {"gpu_0.a", true},
        {"", false},
        {"-0", false},
        {"0-", false},
        {":0", false},
        {"0:", false},
        {"a b", false},
        {"a/b", false},
        {"a=b", false},
        {"GPU-x::1", true},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        assert_int_equal(cdi_valid_device_name(names[i].name), names[i].valid);
    assert_false(cdi_valid_device_name(NULL));
}

static void test_qualified(void **state)
{
    static const struct name_case names[] = {
        {"nvidia.com/gpu=0", true},
        {"nvidia.com/gpu=GPU-6b4c1a2e-0000-1111-2222-333344445555", true},
        {"k8s.gpu.nvidia.com/claim=dab5ab50-d59a-42a6-af16-cfd4628c0f7a-gpu-0", true},
        {"nvidia.com/gpu=0:1", true},
        {"/dev/nvidia0", false},
        {"nvidia.com/gpu", false},
        {"nvidia.com=0", false},
        {"nvidia.com/gpu=", false},
        {"nvidia.com/gpu=a=b", false},
        {"nvidia.com/g/pu=0", false},
        {"=0", false},
        {"", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        assert_int_equal(cdi_valid_qualified_name(names[i].name), names[i].valid);
}

static void test_parse_qualified(void **state)
{
    char *vendor = NULL, *class = NULL, *device = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(
        cdi_parse_qualified_name("k8s.gpu.nvidia.com/claim=x-gpu-0", &d, &vendor, &class, &device),
        0);
    assert_string_equal(vendor, "k8s.gpu.nvidia.com");
    assert_string_equal(class, "claim");
    assert_string_equal(device, "x-gpu-0");
    free(vendor);
    free(class);
    free(device);
    device = NULL;
    assert_int_equal(cdi_parse_qualified_name("nvidia.com/gpu=0", &d, NULL, NULL, &device), 0);
    assert_string_equal(device, "0");
    free(device);
    device = NULL;
    assert_int_equal(cdi_parse_qualified_name("/dev/nvidia0", &d, NULL, NULL, &device), -EINVAL);
    assert_null(device);
    assert_non_null(strstr(d.msg, "device path"));
    assert_int_equal(cdi_parse_qualified_name("nvidia.com/gpu=-0", &d, NULL, NULL, NULL), -EINVAL);
    assert_non_null(strstr(d.msg, "invalid device name"));
    assert_int_equal(cdi_parse_qualified_name("9v/gpu=0", &d, NULL, NULL, NULL), -EINVAL);
    assert_non_null(strstr(d.msg, "invalid vendor"));
}

static void test_qualified_name(void **state)
{
    char *s = NULL;
    assert_int_equal(cdi_qualified_name("nvidia.com/gpu", "GPU-1", NULL, &s), 0);
    assert_string_equal(s, "nvidia.com/gpu=GPU-1");
    free(s);
    s = NULL;
    assert_int_equal(cdi_qualified_name("nvidia.com", "0", NULL, &s), -EINVAL);
    assert_int_equal(cdi_qualified_name("nvidia.com/gpu", "0 1", NULL, &s), -EINVAL);
    assert_null(s);
}

static void test_annotation_key(void **state)
{
    char *key = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(cdi_annotation_key(NULL, "nvidia-device-plugin",
                                        "bd3d7bd6-7c0b-4a4e-9d1f-2a5e1c8b9f00", &d, &key),
                     0);
    assert_string_equal(key,
                        "cdi.k8s.io/nvidia-device-plugin_bd3d7bd6-7c0b-4a4e-9d1f-2a5e1c8b9f00");
    free(key);
    /* '/' in the id becomes '_'. */
    assert_int_equal(cdi_annotation_key("example.com/", "plugin", "a/b", &d, &key), 0);
    assert_string_equal(key, "example.com/plugin_a_b");
    free(key);
    key = NULL;
    char id[64];
    memset(id, 'a', 60);
    id[60] = '\0';
    assert_int_equal(cdi_annotation_key(NULL, "plugin", id, &d, &key), -EINVAL);
    assert_non_null(strstr(d.msg, "at most 63"));
    assert_int_equal(cdi_annotation_key(NULL, "-plugin", "x", &d, &key), -EINVAL);
    assert_int_equal(cdi_annotation_key(NULL, "plugin", "x-", &d, &key), -EINVAL);
    assert_int_equal(cdi_annotation_key(NULL, "plugin", "x y", &d, &key), -EINVAL);
    assert_int_equal(cdi_annotation_key(NULL, "", "x", &d, &key), -EINVAL);
    assert_int_equal(cdi_annotation_key("cdi.k8s.io", "plugin", "x", &d, &key), -EINVAL);
    assert_int_equal(cdi_annotation_key("Bad_Prefix/", "plugin", "x", &d, &key), -EINVAL);
    assert_null(key);
}

static void test_annotation_key_random(void **state)
{
    char *a = NULL, *b = NULL;
    assert_int_equal(cdi_annotation_key_random(NULL, "nvidia-device-plugin", NULL, &a), 0);
    assert_int_equal(cdi_annotation_key_random(NULL, "nvidia-device-plugin", NULL, &b), 0);
    assert_int_equal(strlen(a), strlen("cdi.k8s.io/nvidia-device-plugin_") + 36);
    assert_int_equal(strncmp(a, "cdi.k8s.io/nvidia-device-plugin_", 32), 0);
    assert_int_equal(a[32 + 14], '4'); /* UUID version 4 */
    assert_string_not_equal(a, b);
    free(a);
    free(b);
}

static void test_annotation_value(void **state)
{
    const char *names[] = {"k8s.device-plugin.nvidia.com/gpu=GPU-a",
                           "k8s.device-plugin.nvidia.com/gpu=GPU-b"};
    const char *bad[] = {"k8s.device-plugin.nvidia.com/gpu=GPU-a", "GPU-b"};
    char *v = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(cdi_annotation_value(names, 2, &d, &v), 0);
    assert_string_equal(v, "k8s.device-plugin.nvidia.com/gpu=GPU-a,"
                           "k8s.device-plugin.nvidia.com/gpu=GPU-b");
    free(v);
    v = NULL;
    assert_int_equal(cdi_annotation_value(bad, 2, &d, &v), -EINVAL);
    assert_non_null(strstr(d.msg, "GPU-b"));
    assert_int_equal(cdi_annotation_value(names, 0, &d, &v), -EINVAL);
    assert_null(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vendor_class),     cmocka_unit_test(test_kind),
        cmocka_unit_test(test_device_name),      cmocka_unit_test(test_qualified),
        cmocka_unit_test(test_parse_qualified),  cmocka_unit_test(test_qualified_name),
        cmocka_unit_test(test_annotation_key),   cmocka_unit_test(test_annotation_key_random),
        cmocka_unit_test(test_annotation_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
