/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDI specs of the cdi-* device-list strategies, on mock nodes with a fake driver root from
 * mock-nvml/make-driver-root.sh: every CDI name an Allocate answer carries (each device and
 * replica, UUID and index strategies, MIG mixed, IMEX channel, features) resolves to a device of
 * the written spec of its kind; a GPU lost before NVML could name it is left out; classes without
 * devices get no file; writing replaces atomically and removes the files of classes no longer
 * wanted; no specs without a CDI strategy.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "dp-test-gpu.h"
#include "test-tmpdir.h"

#define CDI_CRI "flags:\n  plugin:\n    deviceListStrategy: [cdi-annotations, cdi-cri]\n"

struct fixture {
    char dir[64];
    char root[96];
    char specs[96];
    struct node *n;
    struct dp_cdi cdi;
};

static void make_file(const char *root, const char *rel)
{
    char path[512], dir[512];
    snprintf(path, sizeof(path), "%s%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(file_mkdir_p(dir, 0755), 0);
    assert_int_equal(file_write_atomic(path, "", 0, 0644), 0);
}

/* A node of profile with config, its driver root made from the profile. */
static struct fixture *setup(const char *profile, const char *config)
{
    char cmd[1024];
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_dp_cdi_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
    snprintf(f->specs, sizeof(f->specs), "%s/cdi", f->dir);
    snprintf(cmd, sizeof(cmd), "'%s' '%s/%s.yaml' '%s' >/dev/null", MAKE_DRIVER_ROOT, NODES_DIR,
             profile, f->root);
    assert_int_equal(system(cmd), 0);
    f->n = calloc(1, sizeof(*f->n));
    assert_non_null(f->n);
    node_open(f->n, profile, config);
    free(f->n->cfg.driver_root);
    f->n->cfg.driver_root = strdup(f->root);
    assert_non_null(f->n->cfg.driver_root);
    node_build(f->n, NULL);
    return f;
}

static void build(struct fixture *f)
{
    struct diag d;
    diag_init(&d);
    dp_cdi_release(&f->cdi);
    int r = dp_cdi_build(&f->n->cfg, f->n->inv, f->n->res, &d, &f->cdi);
    if (r < 0)
        fail_msg("dp_cdi_build: %s", d.msg);
}

static void teardown(struct fixture *f)
{
    dp_cdi_release(&f->cdi);
    node_free(f->n);
    assert_int_equal(test_tmpdir_remove(f->dir), 0);
    free(f);
}

static void fixed_uuid(char out[37])
{
    snprintf(out, 37, "%s", "0b8d7e2e-1111-4222-8333-444455556666");
}

/* Every CDI name of an answer resolves in the spec of its kind; the annotation names the same. */
static size_t check_resolves(const struct fixture *f, const V1beta1__ContainerAllocateResponse *c)
{
    struct diag d;
    diag_init(&d);
    assert_true(c->n_cdi_devices > 0);
    for (size_t i = 0; i < c->n_cdi_devices; i++) {
        char *vendor = NULL, *class = NULL, *dev = NULL;
        const struct cdi_spec *spec = NULL;
        assert_int_equal(
            cdi_parse_qualified_name(c->cdi_devices[i]->name, &d, &vendor, &class, &dev), 0);
        assert_string_equal(vendor, DP_CDI_VENDOR);
        for (size_t k = 0; k < DP_CDI_N; k++)
            if (strcmp(class, dp_cdi_class_name((enum dp_cdi_class)k)) == 0)
                spec = f->cdi.specs[k];
        if (!spec || !cdi_spec_find_device(spec, dev))
            fail_msg("%s does not resolve", c->cdi_devices[i]->name);
        assert_int_equal(cdi_spec_validate(spec, &d), 0);
        assert_non_null(strstr(c->annotations[0]->value, c->cdi_devices[i]->name));
        free(vendor);
        free(class);
        free(dev);
    }
    return c->n_cdi_devices;
}

/* Allocates each device of every resource alone and checks the names of the answer. */
static size_t allocate_each(const struct fixture *f)
{
    struct dp_alloc_ctx ctx;
    size_t n = 0;
    dp_alloc_ctx_init(&ctx, &f->n->cfg);
    ctx.uuid_fn = fixed_uuid;
    for (size_t i = 0; i < f->n->res->n; i++) {
        const struct dp_resource *r = &f->n->res->items[i];
        for (size_t k = 0; k < r->n_devices; k++) {
            char *ids[] = {(char *)r->devices[k].id};
            V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
            V1beta1__ContainerAllocateRequest *creqs[] = {&creq};
            V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
            V1beta1__AllocateResponse *resp = NULL;
            struct dp_error err = {0};
            creq.n_devices_ids = 1;
            creq.devices_ids = ids;
            req.n_container_requests = 1;
            req.container_requests = creqs;
            if (dp_allocate(&ctx, r, &req, &err, &resp) < 0)
                fail_msg("dp_allocate %s: %s", ids[0], err.msg);
            n += check_resolves(f, resp->container_responses[0]);
            protobuf_c_message_free_unpacked(&resp->base, NULL);
        }
    }
    return n;
}

static size_t n_devices(const struct cdi_spec *spec)
{
    return spec ? spec->devices.len : 0;
}

static void test_uuid_names_resolve(void **state)
{
    struct fixture *f = setup("dgx-h100", CDI_CRI "sharing:\n  timeSlicing:\n    resources:\n"
                                                  "    - name: gpu\n      replicas: 2\n");
    build(f);
    /* 8 GPUs (replicas share theirs) and "all". */
    assert_int_equal(n_devices(f->cdi.specs[DP_CDI_GPU]), 9);
    assert_string_equal(f->cdi.specs[DP_CDI_GPU]->kind, "k8s.device-plugin.nvidia.com/gpu");
    assert_non_null(cdi_spec_find_device(f->cdi.specs[DP_CDI_GPU], "all"));
    assert_non_null(cdi_spec_find_device(f->cdi.specs[DP_CDI_GPU], f->n->inv->devices[7].uuid));
    assert_null(f->cdi.specs[DP_CDI_IMEX_CHANNEL]);
    assert_null(f->cdi.specs[DP_CDI_GDRCOPY]);
    assert_int_equal(allocate_each(f), 16);
    teardown(f);
}

static void test_index_names_resolve_mig(void **state)
{
    struct fixture *f = setup("a100-mig", "flags:\n  migStrategy: mixed\n  plugin:\n"
                                          "    deviceListStrategy: [cdi-annotations, cdi-cri]\n"
                                          "    deviceIDStrategy: index\n");
    build(f);
    const struct cdi_spec *spec = f->cdi.specs[DP_CDI_GPU];
    assert_non_null(spec);
    assert_non_null(cdi_spec_find_device(spec, "0:0"));
    assert_null(cdi_spec_find_device(spec, f->n->inv->devices[0].migs[0].uuid));
    /* MIG devices carry their capability nodes. */
    const struct cdi_device *mig = cdi_spec_find_device(spec, "0:0");
    assert_int_equal(mig->edits.device_nodes.len, 3);
    assert_true(allocate_each(f) > 4);
    teardown(f);
}

static void test_lost_gpu_left_out(void **state)
{
    struct fixture *f = setup("lost-gpu", CDI_CRI);
    build(f);
    /* GPU 5 was lost before NVML could name it: 7 GPUs and "all". */
    assert_int_equal(n_devices(f->cdi.specs[DP_CDI_GPU]), 8);
    assert_int_equal(allocate_each(f), 7);
    teardown(f);
}

static void test_imex_and_features(void **state)
{
    struct fixture *f = setup("dgx-h100", CDI_CRI "  gdrcopyEnabled: true\n  gdsEnabled: true\n"
                                                  "imex:\n  channelIDs: [0]\n");
    make_file(f->root, "/dev/nvidia-caps-imex-channels/channel0");
    make_file(f->root, "/dev/gdrdrv");
    build(f);
    assert_int_equal(n_devices(f->cdi.specs[DP_CDI_IMEX_CHANNEL]), 1);
    assert_int_equal(n_devices(f->cdi.specs[DP_CDI_GDRCOPY]), 1);
    /* No /dev/nvidia-fs* under the root: an empty spec is dropped, as NVIDIA's. */
    assert_null(f->cdi.specs[DP_CDI_GDS]);
    assert_null(f->cdi.specs[DP_CDI_MOFED]);
    const struct cdi_device *ch = cdi_spec_find_device(f->cdi.specs[DP_CDI_IMEX_CHANNEL], "0");
    assert_non_null(ch);
    const struct cdi_device_node *node = vec_at(&ch->edits.device_nodes, 0);
    assert_string_equal(node->path, "/dev/nvidia-caps-imex-channels/channel0");
    teardown(f);
}

static bool exists(const struct fixture *f, const char *class)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/" DP_CDI_VENDOR "-%s.json", f->specs, class);
    if (stat(path, &st) < 0)
        return false;
    assert_int_equal(st.st_mode & 0777, 0644);
    return true;
}

static void test_write_replace_remove(void **state)
{
    struct diag d;
    diag_init(&d);
    struct fixture *f = setup("pcie-t4", CDI_CRI "  gdrcopyEnabled: true\n");
    make_file(f->root, "/dev/gdrdrv");
    build(f);
    assert_int_equal(dp_cdi_write(&f->cdi, f->specs, &d), 0);
    assert_true(exists(f, "gpu"));
    assert_true(exists(f, "gdrcopy"));
    assert_false(exists(f, "imex-channel"));
    /* A reload without gdrcopy removes its spec and rewrites the other. */
    f->n->cfg.gdrcopy_enabled = false;
    build(f);
    assert_int_equal(dp_cdi_write(&f->cdi, f->specs, &d), 0);
    assert_true(exists(f, "gpu"));
    assert_false(exists(f, "gdrcopy"));
    /* No temporary file is left behind. */
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", f->specs);
    size_t files = 0;
    DIR *dir = opendir(tmp);
    assert_non_null(dir);
    for (struct dirent *e; (e = readdir(dir));)
        files += e->d_name[0] != '.';
    closedir(dir);
    assert_int_equal(files, 1);
    assert_int_equal(dp_cdi_remove(f->specs, &d), 0);
    assert_false(exists(f, "gpu"));
    assert_int_equal(dp_cdi_remove(f->specs, &d), 0); /* twice is fine */
    teardown(f);
}

static void test_not_wanted(void **state)
{
    struct fixture *f = setup("pcie-t4", "flags:\n  plugin:\n    deviceListStrategy: envvar\n");
    build(f);
    assert_false(dp_cdi_wanted(&f->n->cfg));
    for (size_t i = 0; i < DP_CDI_N; i++)
        assert_null(f->cdi.specs[i]);
    teardown(f);
}

static void test_missing_device_node_fails(void **state)
{
    char path[256];
    struct diag d;
    diag_init(&d);
    struct fixture *f = setup("pcie-t4", CDI_CRI);
    snprintf(path, sizeof(path), "%s/dev/nvidia%u", f->root, f->n->inv->devices[1].minor);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dp_cdi_build(&f->n->cfg, f->n->inv, f->n->res, &d, &f->cdi), -ENOENT);
    assert_non_null(strstr(d.msg, "not found"));
    teardown(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_names_resolve),
        cmocka_unit_test(test_index_names_resolve_mig),
        cmocka_unit_test(test_lost_gpu_left_out),
        cmocka_unit_test(test_imex_and_features),
        cmocka_unit_test(test_write_replace_remove),
        cmocka_unit_test(test_not_wanted),
        cmocka_unit_test(test_missing_device_node_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
