/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The labels of the bundled node profiles, read through the mock NVML library as `gpuplane
 * discover --mock` reads them, against the patterns NVIDIA's GFD end-to-end tests check
 * (shared/conformance/gfd/<mode>.regex.txt): every pattern must match some "key=value" label. The
 * patterns' bracket sets ("[true|false]") are the alternatives they mean (the directory's README),
 * so they are read as groups. A valid MIG strategy single needs a node whose GPUs all hold MIG
 * devices of one type; the test writes such a profile. vGPU guests are simulated with a sysfs tree
 * holding the PCI config space of a vGPU.
 */
#include <regex.h>
#include <time.h>

#include "discover-internal.h"
#include "gpu-test.h"

#ifndef CONFORMANCE_DIR
#define CONFORMANCE_DIR "../shared/conformance/gfd"
#endif

static const char *conformance_dir(void)
{
    const char *env = getenv("GFD_CONFORMANCE_DIR");
    return env && env[0] ? env : CONFORMANCE_DIR;
}

/* "[none|mps|time-slicing]" -> "(none|mps|time-slicing)"; other bracket sets stay classes. */
static void translate(const char *in, char *out, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; in[i] && o + 1 < n; i++) {
        if (in[i] == '[' && (i == 0 || in[i - 1] != '\\')) {
            const char *end = strchr(in + i, ']');
            if (end && memchr(in + i, '|', (size_t)(end - (in + i)))) {
                out[o++] = '(';
                for (i++; in + i < end && o + 2 < n; i++)
                    out[o++] = in[i];
                out[o++] = ')';
                continue;
            }
        }
        out[o++] = in[i];
    }
    out[o] = '\0';
}

static struct discover_labels labels_of(const char *profile, enum discover_mig mig,
                                        const char *sysfs_root)
{
    struct gpu_read_options opts = {.sysfs_root = sysfs_root};
    struct discover_labels l = {0};
    struct diag d;

    diag_init(&d);
    struct gpu_nvml *nvml = test_open(profile);
    struct gpu_inventory *inv = test_read(nvml, &opts);
    struct discover_input in = {
        .inv = inv,
        .mig = mig,
        .machine = "DGX H100",
        .timestamp = (int64_t)time(NULL),
    };
    int r = discover_labels_compute(&in, &d, &l);
    if (r < 0)
        fail_msg("%s: %d %s", profile, r, d.msg);
    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);
    return l;
}

/* Every pattern of <file> matches some label; returns how many patterns were checked, or -1 when
 * the conformance data is not there. */
static int check_patterns(const struct discover_labels *l, const char *file, const char *what)
{
    char path[4096], line[1024], pattern[1024], text[512];
    int checked = 0;

    snprintf(path, sizeof(path), "%s/%s", conformance_dir(), file);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        translate(line, pattern, sizeof(pattern));
        regex_t re;
        if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
            fail_msg("%s: pattern %s does not compile", file, pattern);
        bool matched = false;
        for (size_t i = 0; i < l->n && !matched; i++) {
            snprintf(text, sizeof(text), "%s=%s", l->v[i].key, l->v[i].value);
            matched = regexec(&re, text, 0, NULL, 0) == 0;
        }
        regfree(&re);
        if (!matched) {
            for (size_t i = 0; i < l->n; i++)
                fprintf(stderr, "  %s=%s\n", l->v[i].key, l->v[i].value);
            fclose(f);
            fail_msg("%s (%s): no label matches %s", what, file, line);
        }
        checked++;
    }
    fclose(f);
    return checked;
}

static void conform(const char *profile, enum discover_mig mig, const char *file)
{
    struct discover_labels l = labels_of(profile, mig, NULL);
    int n = check_patterns(&l, file, profile);
    discover_labels_release(&l);
    if (n < 0)
        skip();
    assert_true(n > 10);
}

static void test_none(void **state)
{
    (void)state;
    conform("dgx-h100", DISCOVER_MIG_NONE, "mig-none.regex.txt");
    conform("pcie-t4", DISCOVER_MIG_NONE, "mig-none.regex.txt");
    conform("a100-mig", DISCOVER_MIG_NONE, "mig-none.regex.txt");
    conform("lost-gpu", DISCOVER_MIG_NONE, "mig-none.regex.txt");
}

static void test_mixed(void **state)
{
    (void)state;
    conform("a100-mig", DISCOVER_MIG_MIXED, "mig-mixed.regex.txt");
}

static void test_values(void **state)
{
    (void)state;
    struct discover_labels l = labels_of("dgx-h100", DISCOVER_MIG_NONE, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.count"), "8");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.memory"), "81559");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.mode"), "compute");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.family"), "hopper");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/cuda.driver-version.full"),
                        "550.54.15");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/cuda.runtime-version.full"), "12.4");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.clique"),
                        "c6d1ec5e-4e43-4d0e-9c5f-9d1b2a3c4e5f.32766");
    discover_labels_release(&l);

    /* lost-gpu: the seven GPUs that answer. */
    l = labels_of("lost-gpu", DISCOVER_MIG_NONE, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.count"), "7");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.mode"), "compute");
    discover_labels_release(&l);

    /* a100-mig, none: every GPU counted, the full GPUs' set with one replica. */
    l = labels_of("a100-mig", DISCOVER_MIG_NONE, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.count"), "4");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.replicas"), "1");
    assert_null(discover_labels_get(&l, "nvidia.com/gpu.clique"));
    discover_labels_release(&l);

    /* a100-mig, mixed: the CI-sliced profiles are labelled too. */
    l = labels_of("a100-mig", DISCOVER_MIG_MIXED, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig-3g.20gb.count"), "2");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig-1g.5gb.count"), "2");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig-1c.3g.20gb.count"), "1");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig-2c.3g.20gb.slices.ci"), "2");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig-1g.5gb.product"),
                        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig-3g.20gb.multiprocessors"), "42");
    discover_labels_release(&l);

    /* a100-mig, single: MIG and full GPUs, several types: the -MIG-INVALID set. */
    l = labels_of("a100-mig", DISCOVER_MIG_SINGLE, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.product"),
                        "NVIDIA-A100-SXM4-40GB-MIG-INVALID");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.count"), "0");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.family"), "ampere");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/mig.strategy"), "single");
    assert_non_null(l.warnings);
    discover_labels_release(&l);
}

static void test_single(void **state)
{
    char path[4096];
    (void)state;
    char *dir = test_tmpdir();
    snprintf(path, sizeof(path), "%s/a100-single.yaml", dir);
    test_write_file(path, "driver: {version: \"550.54.15\", cuda: 12040}\n"
                          "defaults:\n"
                          "  name: \"NVIDIA A100-SXM4-40GB\"\n"
                          "  architecture: ampere\n"
                          "  computeCapability: \"8.0\"\n"
                          "  memory: 40960\n"
                          "  mig:\n"
                          "    capable: true\n"
                          "    enabled: true\n"
                          "    instances: [{profile: 3g.20gb}, {profile: 3g.20gb}]\n"
                          "gpus:\n"
                          "  - {busId: \"0000:07:00.0\"}\n"
                          "  - {busId: \"0000:0f:00.0\"}\n");
    struct discover_labels l = labels_of(path, DISCOVER_MIG_SINGLE, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.product"),
                        "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.count"), "4");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.memory"), "19968");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.multiprocessors"), "42");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/gpu.mode"), "compute");
    int n = check_patterns(&l, "mig-single.regex.txt", "a100-single");
    discover_labels_release(&l);
    test_rmtree(dir);
    free(dir);
    if (n < 0)
        skip();
    assert_true(n > 10);
}

/* A vGPU guest's PCI config space: a capability list with NVIDIA's vendor capability ("VF", then
 * the host driver's version and branch records), as a guest driver sees it. */
static void write_vgpu_config(const char *path)
{
    unsigned char cfg[256] = {0xde, 0x10, 0xb8, 0x1e};
    static const char version[] = "460.16", branch[] = "r460_00";
    cfg[0x06] = 0x10; /* status: capability list */
    cfg[0x0b] = 0x03;
    cfg[0x34] = 0x60; /* first capability */
    cfg[0x60] = 0x05; /* MSI */
    cfg[0x61] = 0xd4;
    unsigned char *cap = cfg + 0xd4;
    cap[0] = 0x09; /* vendor specific */
    cap[1] = 0x00;
    cap[2] = 27;
    cap[3] = 'V';
    cap[4] = 'F';
    cap[5] = 0x00; /* record 0: the host driver */
    cap[6] = 22;
    memcpy(cap + 7, version, sizeof(version) - 1);
    memcpy(cap + 17, branch, sizeof(branch) - 1);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(cfg, 1, sizeof(cfg), f), sizeof(cfg));
    assert_int_equal(fclose(f), 0);
}

static void test_vgpu(void **state)
{
    char path[4096];
    (void)state;
    char *root = test_tmpdir();
    static const char *const bus[] = {"0000:3b:00.0", "0000:5e:00.0", "0000:af:00.0",
                                      "0000:d8:00.0"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, bus[i]);
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
        assert_int_equal(system(cmd), 0);
        snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/config", root, bus[i]);
        write_vgpu_config(path);
        snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/class", root, bus[i]);
        test_write_file(path, "0x030200\n");
    }
    struct discover_labels l = labels_of("pcie-t4", DISCOVER_MIG_NONE, root);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/vgpu.present"), "true");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/vgpu.host-driver-version"), "460.16");
    assert_string_equal(discover_labels_get(&l, "nvidia.com/vgpu.host-driver-branch"), "r460_00");
    int n = check_patterns(&l, "vgpu.regex.txt", "pcie-t4 as a vGPU guest");
    discover_labels_release(&l);

    /* Without the config space (an unprivileged read, or no sysfs): not a vGPU guest. */
    l = labels_of("pcie-t4", DISCOVER_MIG_NONE, NULL);
    assert_string_equal(discover_labels_get(&l, "nvidia.com/vgpu.present"), "false");
    assert_null(discover_labels_get(&l, "nvidia.com/vgpu.host-driver-version"));
    discover_labels_release(&l);
    test_rmtree(root);
    free(root);
    if (n < 0)
        skip();
    assert_int_equal(n, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),   cmocka_unit_test(test_mixed), cmocka_unit_test(test_values),
        cmocka_unit_test(test_single), cmocka_unit_test(test_vgpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
