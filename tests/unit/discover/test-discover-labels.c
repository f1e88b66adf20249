/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The label engine of `gpuplane discover` on synthetic inventories, one table row per rule of
 * docs/discover-labels.md: each row builds a node, picks a MIG strategy and sharing, and lists
 * labels with the value they must have (NULL: the label must be absent). Then the helpers:
 * sanitising, the family table, get/equal, and the warnings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "discover-internal.h"

#define MAX_GPUS 8
#define MAX_MIGS 8

struct fx {
    struct gpu_inventory inv;
    struct gpu_device devs[MAX_GPUS];
    struct gpu_mig_device migs[MAX_GPUS][MAX_MIGS];
    struct discover_share shares[4];
    struct discover_input in;
};

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "550.54.15");
    f->inv.cuda_driver_version = 12040;
    f->inv.devices = f->devs;
    f->in.inv = &f->inv;
    f->in.shares = f->shares;
    f->in.machine = "DGX H100";
    f->in.timestamp = 1724632719;
}

static struct gpu_device *add_gpu(struct fx *f, const char *name, int cc_major, int cc_minor,
                                  unsigned mib)
{
    assert_true(f->inv.n_devices < MAX_GPUS);
    size_t i = f->inv.n_devices++;
    struct gpu_device *g = &f->devs[i];
    g->index = (unsigned)i;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->uuid, sizeof(g->uuid), "GPU-%zu", i);
    g->cc_major = cc_major;
    g->cc_minor = cc_minor;
    g->memory_bytes = (uint64_t)mib << 20;
    g->pci_class = 0x030200;
    g->migs = f->migs[i];
    return g;
}

static void add_mig(struct fx *f, struct gpu_device *g, const char *profile, unsigned gi,
                    unsigned ci, unsigned mib, unsigned sms)
{
    (void)f;
    assert_true(g->n_migs < MAX_MIGS);
    struct gpu_mig_device *m = &g->migs[g->n_migs++];
    g->mig_capable = g->mig_enabled = true;
    snprintf(m->profile, sizeof(m->profile), "%s", profile);
    m->gi_slices = gi;
    m->ci_slices = ci;
    m->memory_bytes = (uint64_t)mib << 20;
    m->multiprocessors = sms;
    m->engines_known = true;
    m->copy_engines = gi;
    m->decoders = gi / 2;
    m->encoders = 0;
    m->jpeg_engines = gi == 7 ? 1 : 0;
    m->ofa_engines = gi == 7 ? 1 : 0;
}

static void add_share(struct fx *f, const char *resource, unsigned replicas, bool renamed,
                      const char *strategy)
{
    f->shares[f->in.n_shares++] = (struct discover_share){resource, replicas, renamed, strategy};
}

#define A100 "NVIDIA A100-SXM4-40GB"
#define H100 "NVIDIA H100 80GB HBM3"

/* ---- node setups ---- */

static void h100x2(struct fx *f)
{
    for (int i = 0; i < 2; i++)
        add_gpu(f, H100, 9, 0, 81559)->mig_capable = true;
}

static void t4(struct fx *f)
{
    add_gpu(f, "Tesla T4", 7, 5, 15360);
}

static void ada(struct fx *f)
{
    add_gpu(f, "NVIDIA L40S", 8, 9, 46068)->pci_class = 0x030000;
}

static void volta(struct fx *f)
{
    add_gpu(f, "Tesla V100-SXM2-16GB", 7, 0, 16384);
}

static void blackwell10(struct fx *f)
{
    add_gpu(f, "NVIDIA B200", 10, 0, 183359);
}

static void blackwell12(struct fx *f)
{
    add_gpu(f, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 12, 0, 97887);
}

static void rubin(struct fx *f)
{
    add_gpu(f, "NVIDIA R100", 13, 0, 200000);
}

static void undefined_cc(struct fx *f)
{
    add_gpu(f, "Future GPU", 14, 0, 1024);
}

static void cc_unknown(struct fx *f)
{
    add_gpu(f, "No CC GPU", 0, 0, 1024);
}

static void driver_two_parts(struct fx *f)
{
    t4(f);
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "560.28");
    f->inv.cuda_driver_version = 12060;
}

static void driver_bad(struct fx *f)
{
    t4(f);
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "1.2.3.4");
    f->inv.cuda_driver_version = 0;
}

static void machine_messy(struct fx *f)
{
    t4(f);
    f->in.machine = "  PowerEdge   R750xa (Dell)\n";
}

static void machine_unreadable(struct fx *f)
{
    t4(f);
    f->in.machine = NULL;
    f->in.timestamp = -1;
}

static void mixed_classes(struct fx *f)
{
    t4(f);
    add_gpu(f, "Tesla T4", 7, 5, 15360)->pci_class = 0x030000;
}

static void class_unknown(struct fx *f)
{
    t4(f);
    f->devs[0].pci_class = 0;
}

static void sharing_ts(struct fx *f)
{
    h100x2(f);
    add_share(f, "nvidia.com/gpu", 4, false, "time-slicing");
}

static void sharing_renamed(struct fx *f)
{
    h100x2(f);
    add_share(f, "nvidia.com/gpu", 4, true, "time-slicing");
}

static void sharing_mps(struct fx *f)
{
    h100x2(f);
    add_share(f, "nvidia.com/gpu", 2, false, "mps");
}

static void sharing_one(struct fx *f)
{
    h100x2(f);
    add_share(f, "nvidia.com/gpu", 1, false, "time-slicing");
}

/* Two A100s with MIG: 1g.5gb x 7 each (single-valid). */
static void mig_uniform(struct fx *f)
{
    for (int i = 0; i < 2; i++) {
        struct gpu_device *g = add_gpu(f, A100, 8, 0, 40960);
        for (int j = 0; j < 7; j++)
            add_mig(f, g, "1g.5gb", 1, 1, 4864, 14);
    }
}

static void mig_uniform_mps(struct fx *f)
{
    mig_uniform(f);
    add_share(f, "nvidia.com/gpu", 2, false, "mps");
}

static void mig_uniform_shared(struct fx *f)
{
    mig_uniform(f);
    add_share(f, "nvidia.com/gpu", 3, false, "time-slicing");
}

static void mig_empty(struct fx *f)
{
    add_gpu(f, A100, 8, 0, 40960)->mig_enabled = true;
    f->devs[0].mig_capable = true;
}

static void mig_and_full(struct fx *f)
{
    struct gpu_device *g = add_gpu(f, A100, 8, 0, 40960);
    add_mig(f, g, "1g.5gb", 1, 1, 4864, 14);
    add_gpu(f, A100, 8, 0, 40960)->mig_capable = true;
}

/* Like a100-mig.yaml: two MIG GPUs with several profiles, CI-sliced ones and a +me, two full. */
static void mig_several(struct fx *f)
{
    struct gpu_device *g0 = add_gpu(f, A100, 8, 0, 40960);
    add_mig(f, g0, "3g.20gb", 3, 3, 19968, 42);
    add_mig(f, g0, "2g.10gb", 2, 2, 9984, 28);
    add_mig(f, g0, "1g.5gb+me", 1, 1, 4864, 14);
    add_mig(f, g0, "1g.5gb", 1, 1, 4864, 14);
    struct gpu_device *g1 = add_gpu(f, A100, 8, 0, 40960);
    add_mig(f, g1, "3g.20gb", 3, 3, 19968, 42);
    add_mig(f, g1, "1c.3g.20gb", 3, 1, 19968, 14);
    add_mig(f, g1, "2c.3g.20gb", 3, 2, 19968, 28);
    add_gpu(f, A100, 8, 0, 40960)->mig_capable = true;
    add_gpu(f, A100, 8, 0, 40960)->mig_capable = true;
}

static void mig_several_shared(struct fx *f)
{
    mig_several(f);
    add_share(f, "nvidia.com/mig-1g.5gb", 4, false, "time-slicing");
    add_share(f, "nvidia.com/gpu", 2, false, "time-slicing");
}

static void two_models(struct fx *f)
{
    add_gpu(f, "Tesla T4", 7, 5, 15360);
    add_gpu(f, H100, 9, 0, 81559);
}

static void lost_one(struct fx *f)
{
    h100x2(f);
    add_gpu(f, H100, 9, 0, 0)->error = 15; /* NVML_ERROR_GPU_IS_LOST */
    f->devs[2].lost = true;
    f->devs[2].pci_class = 0;
}

static void lost_all(struct fx *f)
{
    add_gpu(f, "", -1, -1, 0)->error = 15;
    add_gpu(f, "", -1, -1, 0)->error = 15;
}

static void no_gpus(struct fx *f)
{
    (void)f;
}

static void fabric_same(struct fx *f)
{
    h100x2(f);
    for (int i = 0; i < 2; i++) {
        f->devs[i].fabric_attached = true;
        snprintf(f->devs[i].fabric_cluster_uuid, sizeof(f->devs[i].fabric_cluster_uuid),
                 "6fa2bd3e-0d56-4e39-9a44-b4e8fd1a9b1f");
        f->devs[i].fabric_clique_id = 32766;
    }
}

static void fabric_differ(struct fx *f)
{
    fabric_same(f);
    f->devs[1].fabric_clique_id = 1;
}

static void fabric_partial(struct fx *f)
{
    fabric_same(f);
    add_gpu(f, H100, 9, 0, 81559);
}

static void vgpu_guest(struct fx *f)
{
    t4(f);
    f->devs[0].vgpu_guest = true;
    snprintf(f->devs[0].vgpu_host_driver_version, GPU_VGPU_VERSION_MAX, "460.16");
    snprintf(f->devs[0].vgpu_host_driver_branch, GPU_VGPU_VERSION_MAX, "r460_00");
}

/* ---- the table ---- */

struct kv {
    const char *key;
    const char *value; /* NULL: absent */
};

struct row {
    const char *name;
    void (*setup)(struct fx *f);
    enum discover_mig mig;
    size_t warnings;
    struct kv expect[40];
};

#define G "nvidia.com/gpu."
#define C "nvidia.com/cuda."

static const struct row rows[] = {
    {"h100 none",
     h100x2,
     DISCOVER_MIG_NONE,
     0,
     {{"nvidia.com/gfd.timestamp", "1724632719"},
      {C "driver.major", "550"},
      {C "driver.minor", "54"},
      {C "driver.rev", "15"},
      {C "driver-version.major", "550"},
      {C "driver-version.minor", "54"},
      {C "driver-version.revision", "15"},
      {C "driver-version.full", "550.54.15"},
      {C "runtime.major", "12"},
      {C "runtime.minor", "4"},
      {C "runtime-version.major", "12"},
      {C "runtime-version.minor", "4"},
      {C "runtime-version.full", "12.4"},
      {G "machine", "DGX-H100"},
      {G "count", "2"},
      {G "product", "NVIDIA-H100-80GB-HBM3"},
      {G "memory", "81559"},
      {G "family", "hopper"},
      {G "compute.major", "9"},
      {G "compute.minor", "0"},
      {G "replicas", "1"},
      {G "sharing-strategy", "none"},
      {G "mode", "compute"},
      {"nvidia.com/mig.capable", "true"},
      {"nvidia.com/mps.capable", "false"},
      {"nvidia.com/vgpu.present", "false"},
      {"nvidia.com/vgpu.host-driver-version", NULL},
      {G "clique", NULL},
      {"nvidia.com/mig.strategy", NULL},
      {G "multiprocessors", NULL}}},
    {"h100 single without MIG",
     h100x2,
     DISCOVER_MIG_SINGLE,
     0,
     {{"nvidia.com/mig.strategy", "single"},
      {G "product", "NVIDIA-H100-80GB-HBM3"},
      {G "count", "2"},
      {G "replicas", "1"}}},
    {"h100 mixed without MIG",
     h100x2,
     DISCOVER_MIG_MIXED,
     0,
     {{"nvidia.com/mig.strategy", "mixed"}, {G "product", "NVIDIA-H100-80GB-HBM3"}}},
    {"t4 turing",
     t4,
     DISCOVER_MIG_NONE,
     0,
     {{G "family", "turing"},
      {G "compute.major", "7"},
      {G "compute.minor", "5"},
      {G "product", "Tesla-T4"},
      {G "memory", "15360"},
      {"nvidia.com/mig.capable", "false"}}},
    {"volta", volta, DISCOVER_MIG_NONE, 0, {{G "family", "volta"}}},
    {"ada graphics",
     ada,
     DISCOVER_MIG_NONE,
     0,
     {{G "family", "ada-lovelace"}, {G "mode", "graphics"}, {G "compute.minor", "9"}}},
    {"blackwell 10", blackwell10, DISCOVER_MIG_NONE, 0, {{G "family", "blackwell"}}},
    {"blackwell 12",
     blackwell12,
     DISCOVER_MIG_NONE,
     0,
     {{G "family", "blackwell"}, {G "product", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}}},
    {"rubin", rubin, DISCOVER_MIG_NONE, 0, {{G "family", "rubin"}}},
    {"undefined family",
     undefined_cc,
     DISCOVER_MIG_NONE,
     0,
     {{G "family", "undefined"}, {G "compute.major", "14"}}},
    {"compute capability 0",
     cc_unknown,
     DISCOVER_MIG_NONE,
     0,
     {{G "family", NULL},
      {G "compute.major", NULL},
      {G "compute.minor", NULL},
      {G "product", "No-CC-GPU"}}},
    {"driver with 2 parts",
     driver_two_parts,
     DISCOVER_MIG_NONE,
     0,
     {{C "driver.major", "560"},
      {C "driver.minor", "28"},
      {C "driver.rev", ""},
      {C "driver-version.revision", ""},
      {C "driver-version.full", "560.28"},
      {C "runtime-version.full", "12.6"}}},
    {"driver malformed",
     driver_bad,
     DISCOVER_MIG_NONE,
     2,
     {{C "driver.major", NULL},
      {C "driver-version.full", NULL},
      {C "runtime.major", NULL},
      {G "product", "Tesla-T4"}}},
    {"machine sanitised",
     machine_messy,
     DISCOVER_MIG_NONE,
     0,
     {{G "machine", "PowerEdge-R750xa-Dell"}}},
    {"machine unreadable, no timestamp",
     machine_unreadable,
     DISCOVER_MIG_NONE,
     0,
     {{G "machine", "unknown"}, {"nvidia.com/gfd.timestamp", NULL}}},
    {"mixed PCI classes", mixed_classes, DISCOVER_MIG_NONE, 0, {{G "mode", "unknown"}}},
    {"unknown PCI class", class_unknown, DISCOVER_MIG_NONE, 0, {{G "mode", "unknown"}}},
    {"time-slicing",
     sharing_ts,
     DISCOVER_MIG_NONE,
     0,
     {{G "product", "NVIDIA-H100-80GB-HBM3-SHARED"},
      {G "replicas", "4"},
      {G "sharing-strategy", "time-slicing"},
      {"nvidia.com/mps.capable", "false"}}},
    {"time-slicing renamed",
     sharing_renamed,
     DISCOVER_MIG_NONE,
     0,
     {{G "product", "NVIDIA-H100-80GB-HBM3"},
      {G "replicas", "4"},
      {G "sharing-strategy", "time-slicing"}}},
    {"mps",
     sharing_mps,
     DISCOVER_MIG_NONE,
     0,
     {{G "product", "NVIDIA-H100-80GB-HBM3-SHARED"},
      {G "replicas", "2"},
      {G "sharing-strategy", "mps"},
      {"nvidia.com/mps.capable", "true"}}},
    {"one replica is no sharing",
     sharing_one,
     DISCOVER_MIG_NONE,
     0,
     {{G "product", "NVIDIA-H100-80GB-HBM3"}, {G "replicas", "1"}, {G "sharing-strategy", "none"}}},
    {"MIG none: counts MIG GPUs, replicas 0",
     mig_uniform,
     DISCOVER_MIG_NONE,
     0,
     {{G "product", "NVIDIA-A100-SXM4-40GB"},
      {G "count", "2"},
      {G "replicas", "0"},
      {G "sharing-strategy", "none"},
      {G "memory", "40960"},
      {G "family", "ampere"},
      {G "multiprocessors", NULL},
      {"nvidia.com/mig-1g.5gb.count", NULL}}},
    {"MIG single valid",
     mig_uniform,
     DISCOVER_MIG_SINGLE,
     0,
     {{"nvidia.com/mig.strategy", "single"},
      {G "product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
      {G "count", "14"},
      {G "replicas", "1"},
      {G "sharing-strategy", "none"},
      {G "memory", "4864"},
      {G "multiprocessors", "14"},
      {G "slices.gi", "1"},
      {G "slices.ci", "1"},
      {G "engines.copy", "1"},
      {G "engines.decoder", "0"},
      {G "engines.encoder", "0"},
      {G "engines.jpeg", "0"},
      {G "engines.ofa", "0"},
      {G "mode", "compute"},
      {G "family", "ampere"},
      {G "compute.major", "8"},
      {G "compute.minor", "0"}}},
    {"MIG single shared",
     mig_uniform_shared,
     DISCOVER_MIG_SINGLE,
     0,
     {{G "product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"},
      {G "replicas", "3"},
      {G "sharing-strategy", "time-slicing"}}},
    {"MPS with MIG enabled",
     mig_uniform_mps,
     DISCOVER_MIG_SINGLE,
     0,
     {{"nvidia.com/mps.capable", "false"}}},
    {"MIG single: empty MIG GPU",
     mig_empty,
     DISCOVER_MIG_SINGLE,
     1,
     {{G "product", "NVIDIA-A100-SXM4-40GB-MIG-INVALID"},
      {G "count", "0"},
      {G "replicas", "0"},
      {G "sharing-strategy", ""},
      {G "memory", "0"},
      {G "family", "ampere"},
      {G "compute.major", "8"},
      {G "compute.minor", "0"},
      {G "multiprocessors", NULL}}},
    {"MIG single: MIG and full GPUs",
     mig_and_full,
     DISCOVER_MIG_SINGLE,
     1,
     {{G "product", "NVIDIA-A100-SXM4-40GB-MIG-INVALID"},
      {G "count", "0"},
      {G "memory", "0"},
      {G "family", "ampere"}}},
    {"MIG single: several profiles",
     mig_several,
     DISCOVER_MIG_SINGLE,
     1,
     {{G "product", "NVIDIA-A100-SXM4-40GB-MIG-INVALID"},
      {G "count", "0"},
      {G "replicas", "0"},
      {G "sharing-strategy", ""},
      {G "compute.major", "8"}}},
    {"MIG mixed",
     mig_several,
     DISCOVER_MIG_MIXED,
     0,
     {{"nvidia.com/mig.strategy", "mixed"},
      {G "product", "NVIDIA-A100-SXM4-40GB"},
      {G "count", "4"},
      {G "replicas", "1"},
      {G "memory", "40960"},
      {G "multiprocessors", NULL},
      {"nvidia.com/mig-3g.20gb.count", "2"},
      {"nvidia.com/mig-3g.20gb.product", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"},
      {"nvidia.com/mig-3g.20gb.replicas", "1"},
      {"nvidia.com/mig-3g.20gb.sharing-strategy", "none"},
      {"nvidia.com/mig-3g.20gb.memory", "19968"},
      {"nvidia.com/mig-3g.20gb.multiprocessors", "42"},
      {"nvidia.com/mig-3g.20gb.slices.gi", "3"},
      {"nvidia.com/mig-3g.20gb.slices.ci", "3"},
      {"nvidia.com/mig-3g.20gb.engines.copy", "3"},
      {"nvidia.com/mig-3g.20gb.engines.decoder", "1"},
      {"nvidia.com/mig-3g.20gb.engines.encoder", "0"},
      {"nvidia.com/mig-3g.20gb.engines.jpeg", "0"},
      {"nvidia.com/mig-3g.20gb.engines.ofa", "0"},
      {"nvidia.com/mig-2g.10gb.count", "1"},
      {"nvidia.com/mig-1g.5gb.count", "1"},
      {"nvidia.com/mig-1g.5gb.me.count", "1"},
      {"nvidia.com/mig-1g.5gb.me.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb.me"},
      {"nvidia.com/mig-1g.5gb+me.count", NULL},
      {"nvidia.com/mig-1c.3g.20gb.count", "1"},
      {"nvidia.com/mig-1c.3g.20gb.slices.ci", "1"},
      {"nvidia.com/mig-1c.3g.20gb.slices.gi", "3"},
      {"nvidia.com/mig-2c.3g.20gb.count", "1"},
      {"nvidia.com/mig-2c.3g.20gb.multiprocessors", "28"}}},
    {"MIG mixed shared",
     mig_several_shared,
     DISCOVER_MIG_MIXED,
     0,
     {{"nvidia.com/mig-1g.5gb.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"},
      {"nvidia.com/mig-1g.5gb.replicas", "4"},
      {"nvidia.com/mig-1g.5gb.sharing-strategy", "time-slicing"},
      {"nvidia.com/mig-3g.20gb.replicas", "1"},
      {"nvidia.com/mig-3g.20gb.product", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"},
      {G "product", "NVIDIA-A100-SXM4-40GB-SHARED"},
      {G "replicas", "2"}}},
    {"several models: last wins",
     two_models,
     DISCOVER_MIG_NONE,
     1,
     {{G "product", "NVIDIA-H100-80GB-HBM3"},
      {G "count", "1"},
      {G "family", "hopper"},
      {G "memory", "81559"}}},
    {"a lost GPU is left out",
     lost_one,
     DISCOVER_MIG_NONE,
     0,
     {{G "count", "2"}, {G "mode", "compute"}, {G "product", "NVIDIA-H100-80GB-HBM3"}}},
    {"fabric agrees",
     fabric_same,
     DISCOVER_MIG_NONE,
     0,
     {{G "clique", "6fa2bd3e-0d56-4e39-9a44-b4e8fd1a9b1f.32766"}}},
    {"fabric attached and not",
     fabric_partial,
     DISCOVER_MIG_NONE,
     0,
     {{G "clique", "6fa2bd3e-0d56-4e39-9a44-b4e8fd1a9b1f.32766"}}},
    {"fabric disagrees", fabric_differ, DISCOVER_MIG_NONE, 1, {{G "clique", NULL}}},
    {"vgpu guest",
     vgpu_guest,
     DISCOVER_MIG_NONE,
     0,
     {{"nvidia.com/vgpu.present", "true"},
      {"nvidia.com/vgpu.host-driver-version", "460.16"},
      {"nvidia.com/vgpu.host-driver-branch", "r460_00"}}},
};

static size_t n_warnings(const struct discover_labels *l)
{
    size_t n = 0;
    while (l->warnings && l->warnings[n])
        n++;
    return n;
}

static void check_sorted_unique(const struct discover_labels *l)
{
    for (size_t i = 1; i < l->n; i++)
        assert_true(strcmp(l->v[i - 1].key, l->v[i].key) < 0);
}

static void test_table(void **state)
{
    (void)state;
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        const struct row *row = &rows[r];
        struct fx f;
        struct discover_labels l = {0};
        struct diag d;

        diag_init(&d);
        fx_init(&f);
        row->setup(&f);
        f.in.mig = row->mig;
        int ret = discover_labels_compute(&f.in, &d, &l);
        if (ret < 0)
            fail_msg("%s: %d %s", row->name, ret, d.msg);
        check_sorted_unique(&l);
        assert_true(l.n > 0);
        for (size_t i = 0; i < sizeof(row->expect) / sizeof(row->expect[0]); i++) {
            const struct kv *e = &row->expect[i];
            if (!e->key)
                break;
            const char *got = discover_labels_get(&l, e->key);
            if (!e->value && got)
                fail_msg("%s: %s=%s, expected no such label", row->name, e->key, got);
            if (e->value && (!got || strcmp(got, e->value) != 0))
                fail_msg("%s: %s=%s, expected %s", row->name, e->key, got ? got : "(absent)",
                         e->value);
        }
        if (n_warnings(&l) != row->warnings)
            fail_msg("%s: %zu warnings (first: %s), expected %zu", row->name, n_warnings(&l),
                     l.warnings ? l.warnings[0] : "-", row->warnings);
        discover_labels_release(&l);
    }
}

static void compute(void (*setup)(struct fx *), enum discover_mig mig, struct discover_labels *l)
{
    struct fx f;
    struct diag d;
    diag_init(&d);
    fx_init(&f);
    setup(&f);
    f.in.mig = mig;
    assert_int_equal(discover_labels_compute(&f.in, &d, l), 0);
}

static void test_no_labels(void **state)
{
    struct discover_labels l = {0};
    (void)state;
    compute(no_gpus, DISCOVER_MIG_NONE, &l);
    assert_int_equal(l.n, 0);
    discover_labels_release(&l);
    compute(lost_all, DISCOVER_MIG_MIXED, &l);
    assert_int_equal(l.n, 0);
    assert_null(discover_labels_get(&l, "nvidia.com/gpu.count"));
    discover_labels_release(&l);
}

static void test_warning_names_models(void **state)
{
    struct discover_labels l = {0};
    (void)state;
    compute(two_models, DISCOVER_MIG_NONE, &l);
    assert_int_equal(n_warnings(&l), 1);
    assert_non_null(strstr(l.warnings[0], "Tesla T4"));
    assert_non_null(strstr(l.warnings[0], H100));
    discover_labels_release(&l);
}

static void test_bad_input(void **state)
{
    struct discover_labels l = {0};
    struct discover_input in = {0};
    struct diag d;
    (void)state;
    diag_init(&d);
    assert_int_equal(discover_labels_compute(&in, &d, &l), -EINVAL);
    assert_int_equal(l.n, 0);
}

static void test_sanitise(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"},
        {"Tesla T4", "Tesla-T4"},
        {"  a   b  ", "a-b"},
        {"a\tb", "ab"}, /* a tab is not in the kept set: dropped, not a separator */
        {"PowerEdge R750xa (Dell) #1", "PowerEdge-R750xa-Dell-1"},
        {"x_y.z-w", "x_y.z-w"},
        {"a ( b", "a-b"},
        {"(((", ""},
        {"", ""},
        {"Ünïcode GPU", "ncode-GPU"},
    };
    char out[64];
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        discover_sanitise(cases[i].in, out, sizeof(out));
        if (strcmp(out, cases[i].out) != 0)
            fail_msg("sanitise(\"%s\") = \"%s\", expected \"%s\"", cases[i].in, out, cases[i].out);
    }
    char small[5];
    discover_sanitise("abc def", small, sizeof(small));
    assert_string_equal(small, "abc-");
    discover_sanitise(NULL, small, sizeof(small));
    assert_string_equal(small, "");
}

static void test_equal(void **state)
{
    struct discover_labels a = {0}, b = {0}, c = {0};
    (void)state;
    compute(h100x2, DISCOVER_MIG_NONE, &a);
    compute(h100x2, DISCOVER_MIG_NONE, &b);
    compute(sharing_ts, DISCOVER_MIG_NONE, &c);
    assert_true(discover_labels_equal(&a, &b));
    assert_false(discover_labels_equal(&a, &c));
    assert_null(discover_labels_get(&a, "nvidia.com/nothing"));
    discover_labels_release(&a);
    discover_labels_release(&b);
    discover_labels_release(&c);
    discover_labels_release(&c); /* released twice is fine */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_no_labels),
        cmocka_unit_test(test_warning_names_models),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_sanitise),
        cmocka_unit_test(test_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
