/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device names as NVIDIA's gpu.nvidia.com driver publishes them: a table of hand-made GPUs and MIG
 * devices (profiles with dots, '+', upper case; buffers too small), the shape check a claim's
 * device names get, and every device of the bundled mock node profiles (through the mock NVML
 * library) named, found again by its name, and checked to be a DNS label unique on its node.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dra-claim.h"

static void test_names_table(void **state)
{
    static const struct {
        unsigned minor;
        const char *profile; /* NULL: the full GPU */
        unsigned gi_profile, start;
        const char *want; /* NULL: refused */
    } cases[] = {
        {0, NULL, 0, 0, "gpu-0"},
        {7, NULL, 0, 0, "gpu-7"},
        {12, NULL, 0, 0, "gpu-12"},
        {0, "1g.5gb", 19, 0, "gpu-0-mig-1g5gb-19-0"},
        {3, "3g.20gb", 9, 4, "gpu-3-mig-3g20gb-9-4"},
        {1, "1c.3g.20gb", 9, 4, "gpu-1-mig-1c3g20gb-9-4"},
        {0, "1g.10gb+me", 20, 6, "gpu-0-mig-1g10gb-me-20-6"},
        {0, "1G.5GB", 19, 1, "gpu-0-mig-1g5gb-19-1"},
        {0, "1g.5gb_x", 19, 1, "gpu-0-mig-1g5gb-x-19-1"},
        {0, "...", 19, 1, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct gpu_device gpu = {.minor = cases[i].minor};
        struct gpu_mig_device mig = {.gi_profile_id = cases[i].gi_profile,
                                     .placement_start = cases[i].start};
        char buf[128];
        if (cases[i].profile)
            snprintf(mig.profile, sizeof(mig.profile), "%s", cases[i].profile);
        int r = dra_device_name(&gpu, cases[i].profile ? &mig : NULL, buf, sizeof(buf));
        if (!cases[i].want) {
            assert_int_equal(r, -EINVAL);
            continue;
        }
        if (r < 0 || strcmp(buf, cases[i].want) != 0)
            fail_msg("case %zu: %d \"%s\", want \"%s\"", i, r, buf, cases[i].want);
    }
}

static void test_name_too_long(void **state)
{
    struct gpu_device gpu = {.minor = 10};
    struct gpu_mig_device mig = {.gi_profile_id = 19, .profile = "1g.5gb"};
    char buf[32];
    assert_int_equal(dra_device_name(&gpu, NULL, buf, 6), -ENAMETOOLONG);
    assert_int_equal(dra_device_name(&gpu, NULL, buf, 7), 0);
    assert_string_equal(buf, "gpu-10");
    assert_int_equal(dra_device_name(&gpu, &mig, buf, 21), -ENAMETOOLONG);
    assert_int_equal(dra_device_name(&gpu, &mig, buf, 22), 0);
    assert_string_equal(buf, "gpu-10-mig-1g5gb-19-0");
}

static void test_device_type(void **state)
{
    static const struct {
        const char *name;
        int want; /* DRA_DEVICE_*, or -1: refused */
    } cases[] = {
        {"gpu-0", DRA_DEVICE_GPU},
        {"gpu-15", DRA_DEVICE_GPU},
        {"gpu-0-mig-1g5gb-19-0", DRA_DEVICE_MIG},
        {"gpu-2-mig-1g10gb-me-20-6", DRA_DEVICE_MIG},
        {"gpu-", -1},
        {"gpu-01", -1},
        {"gpu-x", -1},
        {"gpu-0-", -1},
        {"gpu-0-mig-", -1},
        {"gpu-0-mig-1g5gb-", -1},
        {"gpu-0-mig-1G5GB-19-0", -1},
        {"gpu-0-mig-1g.5gb-19-0", -1},
        {"gpu-vfio-0", -1},
        {"channel-0", -1},
        {"", -1},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        enum dra_device_type t = (enum dra_device_type)99;
        int r = dra_device_type(cases[i].name, &t);
        if (cases[i].want < 0 ? r != -EINVAL : (r != 0 || (int)t != cases[i].want))
            fail_msg("\"%s\": %d type %d, want %d", cases[i].name, r, t, cases[i].want);
    }
}

/* ---- the mock node profiles ---- */

static struct gpu_inventory *read_profile(const char *profile, struct gpu_nvml **ret_nvml)
{
    char path[4096];
    struct gpu_inventory *inv = NULL;
    struct diag d;
    diag_init(&d);
    snprintf(path, sizeof(path), "%s/%s.yaml", NODES_DIR, profile);
    assert_int_equal(setenv("MOCK_NVML_PROFILE", path, 1), 0);
    assert_int_equal(setenv("MOCK_NVML_EVENTS", "/dev/null", 1), 0);
    if (gpu_nvml_open(MOCK_NVML_LIB, &d, ret_nvml) < 0)
        fail_msg("gpu_nvml_open(%s): %s", profile, d.msg);
    if (gpu_inventory_read(*ret_nvml, NULL, &d, &inv) < 0)
        fail_msg("gpu_inventory_read(%s): %s", profile, d.msg);
    return inv;
}

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

/* Names every usable device of the profile, finds each again, checks uniqueness; returns how many
 * MIG devices there were. */
static size_t round_trip(const char *profile)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = read_profile(profile, &nvml);
    char names[64][64];
    size_t n = 0, migs = 0;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (g->error)
            continue;
        for (size_t k = 0; k <= g->n_migs; k++) {
            const struct gpu_mig_device *m = k == 0 ? NULL : &g->migs[k - 1];
            const struct gpu_device *fg = NULL;
            const struct gpu_mig_device *fm = NULL;
            enum dra_device_type t;
            assert_true(n < ARRAY_SIZE(names));
            assert_int_equal(dra_device_name(g, m, names[n], sizeof(names[n])), 0);
            if (!dns_label(names[n]))
                fail_msg("%s: \"%s\" is not a DNS label", profile, names[n]);
            for (size_t j = 0; j < n; j++)
                if (strcmp(names[j], names[n]) == 0)
                    fail_msg("%s: \"%s\" twice", profile, names[n]);
            assert_int_equal(dra_device_find(inv, names[n], &fg, &fm), 0);
            assert_ptr_equal(fg, g);
            assert_ptr_equal(fm, m);
            assert_int_equal(dra_device_type(names[n], &t), 0);
            assert_int_equal(t, m ? DRA_DEVICE_MIG : DRA_DEVICE_GPU);
            migs += m != NULL;
            n++;
        }
    }
    return migs;
}

static void test_mock_profiles(void **state)
{
    assert_int_equal(round_trip("a100-mig"), 7);
    assert_int_equal(round_trip("dgx-h100"), 0);
    assert_int_equal(round_trip("pcie-t4"), 0);
    assert_int_equal(round_trip("lost-gpu"), 0);
}

static void test_mock_a100_names(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = read_profile("a100-mig", &nvml);
    const struct gpu_device *g = NULL;
    const struct gpu_mig_device *m = NULL;
    /* GPU 0's 1g.5gb devices sit at memory slices 2 and 3 (examples/nodes/a100-mig.yaml). */
    assert_int_equal(dra_device_find(inv, "gpu-0-mig-1g5gb-19-2", &g, &m), 0);
    assert_string_equal(m->uuid, "MIG-ef6c445d-3bb2-47b0-bea4-b7e16699dd96");
    assert_int_equal(dra_device_find(inv, "gpu-0-mig-1g5gb-19-3", &g, &m), 0);
    assert_string_equal(m->uuid, "MIG-d7e0f2c7-4329-4742-b88c-20a54f711b04");
    assert_int_equal(dra_device_find(inv, "gpu-3", &g, &m), 0);
    assert_null(m);
    assert_string_equal(g->uuid, "GPU-4b61c9a8-f9d3-4474-ae4d-e98fe236b3e3");
    assert_int_equal(dra_device_find(inv, "gpu-0-mig-1g5gb-19-4", &g, &m), -ENOENT);
    assert_int_equal(dra_device_find(inv, "gpu-4", &g, &m), -ENOENT);
    assert_int_equal(dra_device_find(inv, "gpu-0-mig-1g.5gb-19-2", &g, &m), -ENOENT);
    assert_int_equal(dra_device_find(inv, "", &g, &m), -ENOENT);
}

static void test_mock_lost_gpu(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = read_profile("lost-gpu", &nvml);
    const struct gpu_device *g = NULL;
    const struct gpu_mig_device *m = NULL;
    size_t lost = 0;
    for (size_t i = 0; i < inv->n_devices; i++) {
        char name[32];
        if (!inv->devices[i].error)
            continue;
        lost++;
        assert_int_equal(dra_device_name(&inv->devices[i], NULL, name, sizeof(name)), 0);
        /* Either another GPU has the name, or nothing does: never the lost one. */
        if (dra_device_find(inv, name, &g, &m) == 0)
            assert_ptr_not_equal(g, &inv->devices[i]);
    }
    assert_true(lost > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_table),     cmocka_unit_test(test_name_too_long),
        cmocka_unit_test(test_device_type),     cmocka_unit_test(test_mock_profiles),
        cmocka_unit_test(test_mock_a100_names), cmocka_unit_test(test_mock_lost_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
