/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of NVIDIA spec generation against a fake driver root built in a temporary directory and a
 * hand-made inventory (no NVML): which files are found (libraries of the running version only,
 * regular files only, no symlinked directories followed, odd names skipped), the devices and their
 * nodes (MIG capabilities from mig-minors), the shared edits and hooks, and every refusal (bad
 * roots, no libraries, missing nodes or capability minors).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvcdi.h"
#include "test-tmpdir.h"

#define LIBDIR "/usr/lib/x86_64-linux-gnu"

struct fixture {
    char root[64];
    struct gpu_mig_device migs[2];
    struct gpu_device devices[3];
    struct gpu_inventory inv;
};

static void make_file(const char *root, const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof(path), "%s%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(file_mkdir_p(dir, 0755), 0);
    assert_int_equal(file_write_atomic(path, text, strlen(text), 0644), 0);
}

static void make_link(const char *root, const char *rel, const char *target)
{
    char path[512];
    snprintf(path, sizeof(path), "%s%s", root, rel);
    assert_int_equal(symlink(target, path), 0);
}

static const char MIG_MINORS[] = "config 1\nmonitor 2\n"
                                 "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
                                 "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n"
                                 "gpu1/gi1/access 147\ngarbage line\n";

static void make_root(const char *root)
{
    static const char *const files[] = {
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-caps/nvidia-cap12",
        LIBDIR "/libnvidia-ml.so.550.54.15",
        LIBDIR "/libcuda.so.550.54.15",
        LIBDIR "/libnvidia-ml.so.535.104.05",
        LIBDIR "/libweird name.so.550.54.15",
        LIBDIR "/vdpau/libvdpau_nvidia.so.550.54.15",
        "/usr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
        "/usr/lib/firmware/nvidia/550.54.15/other.bin",
        "/usr/bin/nvidia-smi",
        "/usr/sbin/nvidia-persistenced",
        "/run/nvidia-persistenced/socket",
    };
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        make_file(root, files[i], "");
    make_file(root, "/proc/driver/nvidia-caps/mig-minors", MIG_MINORS);
    make_link(root, LIBDIR "/libcuda.so.1", "libcuda.so.550.54.15");
    make_link(root, LIBDIR "/libnvidia-cfg.so.550.54.15", "/etc/passwd");
    /* Merged /usr: /lib is a link and must not add a second copy of every library. */
    make_link(root, "/lib", "usr/lib");
    /* An absolute link would lead out of the root (to the host's files). */
    make_link(root, "/usr/lib64", "/usr/lib/x86_64-linux-gnu");
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    snprintf(f->root, sizeof(f->root), "/tmp/test_nvcdi_XXXXXX");
    if (!mkdtemp(f->root))
        return -1;
    make_root(f->root);
    f->migs[0] = (struct gpu_mig_device){
        .index = 0, .gi_id = 1, .ci_id = 0, .uuid = "MIG-00000000-0000-4000-8000-000000000001"};
    f->migs[1] = (struct gpu_mig_device){
        .index = 1, .gi_id = 2, .ci_id = 0, .uuid = "MIG-00000000-0000-4000-8000-000000000002"};
    f->devices[0] = (struct gpu_device){.index = 0,
                                        .minor = 0,
                                        .mig_enabled = true,
                                        .uuid = "GPU-00000000-0000-4000-8000-00000000000a",
                                        .n_migs = 2,
                                        .migs = f->migs};
    f->devices[1] = (struct gpu_device){
        .index = 1, .minor = 1, .uuid = "GPU-00000000-0000-4000-8000-00000000000b"};
    f->devices[2] = (struct gpu_device){.index = 2, .minor = 2, .error = 15, .lost = true};
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "550.54.15");
    f->inv.n_devices = 3;
    f->inv.devices = f->devices;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int r = test_tmpdir_remove(f->root);
    free(f);
    return r == 0 ? 0 : -1;
}

static struct cdi_spec *generate(struct fixture *f, const struct nvcdi_options *opts,
                                 size_t *skipped)
{
    struct nvcdi *nv = NULL;
    struct cdi_spec *spec = NULL;
    struct diag d;
    diag_init(&d);
    int r = nvcdi_new(&f->inv, opts, &d, &nv);
    if (r < 0)
        fail_msg("nvcdi_new: %s", d.msg);
    r = nvcdi_spec_new(nv, &f->inv, &d, &spec, skipped);
    if (r < 0)
        fail_msg("nvcdi_spec_new: %s", d.msg);
    nvcdi_free(nv);
    return spec;
}

/* The container paths (or host paths) of a list, joined by spaces. */
static void join_nodes(const struct cdi_edits *e, bool host, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < e->device_nodes.len; i++) {
        const struct cdi_device_node *n = VEC_AT(&e->device_nodes, struct cdi_device_node, i);
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? " " : "", host ? n->host_path : n->path);
    }
}

static void join_mounts(const struct cdi_edits *e, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < e->mounts.len; i++) {
        const struct cdi_mount *m = VEC_AT(&e->mounts, struct cdi_mount, i);
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? " " : "", m->container_path);
    }
}

static void join_strv(char *const *v, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; v[i]; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? " " : "", v[i]);
    }
}

static void test_devices(void **state)
{
    struct fixture *f = *state;
    size_t skipped = 99;
    struct cdi_spec *spec = generate(f, &(struct nvcdi_options){.driver_root = f->root}, &skipped);
    static const char *const names[] = {
        "0",   "GPU-00000000-0000-4000-8000-00000000000a",
        "0:0", "MIG-00000000-0000-4000-8000-000000000001",
        "0:1", "MIG-00000000-0000-4000-8000-000000000002",
        "1",   "GPU-00000000-0000-4000-8000-00000000000b",
        "all",
    };
    char buf[2048], want[1024];
    assert_int_equal(skipped, 1);
    assert_string_equal(spec->kind, "nvidia.com/gpu");
    assert_int_equal(spec->devices.len, ARRAY_SIZE(names));
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        assert_string_equal((*VEC_AT(&spec->devices, struct cdi_device *, i))->name, names[i]);
    join_nodes(&cdi_spec_find_device(spec, "1")->edits, true, buf, sizeof(buf));
    snprintf(want, sizeof(want), "%s/dev/nvidia1", f->root);
    assert_string_equal(buf, want);
    join_nodes(&cdi_spec_find_device(spec, "0:1")->edits, false, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap21 "
                             "/dev/nvidia-caps/nvidia-cap22");
    join_nodes(&cdi_spec_find_device(spec, "all")->edits, false, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 "
                             "/dev/nvidia-caps/nvidia-cap13 /dev/nvidia-caps/nvidia-cap21 "
                             "/dev/nvidia-caps/nvidia-cap22 /dev/nvidia1");
    assert_string_equal(cdi_spec_version(spec), "0.5.0");
    assert_int_equal(cdi_spec_validate(spec, NULL), 0);
    cdi_spec_free(spec);
}

static void test_common_edits(void **state)
{
    struct fixture *f = *state;
    struct cdi_spec *spec = generate(f, &(struct nvcdi_options){.driver_root = f->root}, NULL);
    const struct cdi_edits *e = &spec->edits;
    char buf[2048], want[256];
    join_nodes(e, false, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidiactl /dev/nvidia-uvm");
    join_mounts(e, buf, sizeof(buf));
    assert_string_equal(buf,
                        LIBDIR "/libcuda.so.550.54.15 " LIBDIR "/libnvidia-ml.so.550.54.15 " LIBDIR
                               "/vdpau/libvdpau_nvidia.so.550.54.15 "
                               "/usr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin "
                               "/run/nvidia-persistenced/socket /usr/bin/nvidia-smi "
                               "/usr/sbin/nvidia-persistenced");
    const struct cdi_mount *m = VEC_AT(&e->mounts, struct cdi_mount, 0);
    snprintf(want, sizeof(want), "%s" LIBDIR "/libcuda.so.550.54.15", f->root);
    assert_string_equal(m->host_path, want);
    join_strv(m->options, buf, sizeof(buf));
    assert_string_equal(buf, "ro nosuid nodev rbind rprivate");
    assert_string_equal(*VEC_AT(&e->env, char *, 0), "NVIDIA_VISIBLE_DEVICES=void");
    assert_string_equal(*VEC_AT(&e->env, char *, 1), "NVIDIA_CTK_LIBCUDA_DIR=" LIBDIR);
    static const char *const hooks[] = {
        "nvidia-cdi-hook create-symlinks --link libcuda.so.1::" LIBDIR "/libcuda.so",
        "nvidia-cdi-hook enable-cuda-compat --host-driver-version=550.54.15",
        "nvidia-cdi-hook update-ldcache --folder " LIBDIR " --folder " LIBDIR "/vdpau",
        "nvidia-cdi-hook disable-device-node-modification",
    };
    assert_int_equal(e->hooks.len, ARRAY_SIZE(hooks));
    for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
        const struct cdi_hook *h = VEC_AT(&e->hooks, struct cdi_hook, i);
        join_strv(h->args, buf, sizeof(buf));
        assert_string_equal(buf, hooks[i]);
        assert_string_equal(h->hook_name, "createContainer");
        assert_string_equal(h->path, NVCDI_HOOK_PATH);
        assert_string_equal(h->env[0], "NVIDIA_CTK_DEBUG=false");
    }
    cdi_spec_free(spec);
}

static void test_options(void **state)
{
    struct fixture *f = *state;
    char dev_root[128];
    struct nvcdi_options opts = {
        .kind = NVCDI_KIND_DEVICE_PLUGIN,
        .driver_root = f->root,
        .strategies = NVCDI_NAME_TYPE_INDEX,
        .no_all_device = true,
        .hook_path = "/opt/toolkit/nvidia-cdi-hook",
    };
    struct cdi_spec *spec = generate(f, &opts, NULL);
    static const char *const names[] = {"gpu0", "mig0:0", "mig0:1", "gpu1"};
    assert_string_equal(spec->kind, NVCDI_KIND_DEVICE_PLUGIN);
    assert_int_equal(spec->devices.len, ARRAY_SIZE(names));
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        assert_string_equal((*VEC_AT(&spec->devices, struct cdi_device *, i))->name, names[i]);
    assert_string_equal(VEC_AT(&spec->edits.hooks, struct cdi_hook, 0)->path,
                        "/opt/toolkit/nvidia-cdi-hook");
    cdi_spec_free(spec);

    /* Device nodes from a separate dev root ("/dev" of the host under a containerised driver). */
    snprintf(dev_root, sizeof(dev_root), "%s/", f->root);
    opts = (struct nvcdi_options){.driver_root = f->root, .dev_root = dev_root};
    spec = generate(f, &opts, NULL);
    const struct cdi_device_node *n =
        VEC_AT(&cdi_spec_find_device(spec, "1")->edits.device_nodes, struct cdi_device_node, 0);
    snprintf(dev_root, sizeof(dev_root), "%s/dev/nvidia1", f->root);
    assert_string_equal(n->host_path, dev_root);
    cdi_spec_free(spec);
}

static void test_check_root(void **state)
{
    struct fixture *f = *state;
    char *norm = NULL, path[128];
    struct diag d;
    diag_init(&d);
    assert_int_equal(nvcdi_check_root("/", "root", &d, &norm), 0);
    assert_string_equal(norm, "");
    free(norm);
    snprintf(path, sizeof(path), "%s//usr/", f->root);
    assert_int_equal(nvcdi_check_root(path, "root", &d, &norm), 0);
    snprintf(path, sizeof(path), "%s/usr", f->root);
    assert_string_equal(norm, path);
    free(norm);
    norm = NULL;
    assert_int_equal(nvcdi_check_root("relative", "root", &d, &norm), -EINVAL);
    assert_non_null(strstr(d.msg, "absolute"));
    snprintf(path, sizeof(path), "%s/usr/../usr", f->root);
    assert_int_equal(nvcdi_check_root(path, "root", &d, &norm), -EINVAL);
    assert_int_equal(nvcdi_check_root("/tmp/\n", "root", &d, &norm), -EINVAL);
    snprintf(path, sizeof(path), "%s/nonexistent", f->root);
    assert_int_equal(nvcdi_check_root(path, "root", &d, &norm), -ENOENT);
    snprintf(path, sizeof(path), "%s/dev/nvidia0", f->root);
    assert_int_equal(nvcdi_check_root(path, "root", &d, &norm), -ENOTDIR);
    assert_null(norm);
}

static int try_new(struct fixture *f, const struct nvcdi_options *opts, struct diag *d)
{
    struct nvcdi *nv = NULL;
    struct cdi_spec *spec = NULL;
    int r = nvcdi_new(&f->inv, opts, d, &nv);
    if (r >= 0)
        r = nvcdi_spec_new(nv, &f->inv, d, &spec, NULL);
    cdi_spec_free(spec);
    nvcdi_free(nv);
    return r;
}

static void test_refusals(void **state)
{
    struct fixture *f = *state;
    char path[256];
    struct diag d;
    diag_init(&d);
    /* No libraries of this version. */
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "999.0");
    assert_int_equal(try_new(f, &(struct nvcdi_options){.driver_root = f->root}, &d), -ENOENT);
    assert_non_null(strstr(d.msg, "no libraries of driver 999.0"));
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "../x");
    assert_int_equal(try_new(f, &(struct nvcdi_options){.driver_root = f->root}, &d), -EINVAL);
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "550.54.15");
    assert_int_equal(try_new(f, &(struct nvcdi_options){.kind = "nvidia"}, &d), -EINVAL);
    assert_int_equal(
        try_new(f, &(struct nvcdi_options){.driver_root = f->root, .hook_path = "hook"}, &d),
        -EINVAL);
    assert_int_equal(
        try_new(f, &(struct nvcdi_options){.driver_root = f->root, .strategies = 1u << 8}, &d),
        -EINVAL);

    /* A compute instance mig-minors does not list. */
    f->migs[1].ci_id = 5;
    assert_int_equal(try_new(f, &(struct nvcdi_options){.driver_root = f->root}, &d), -ENOENT);
    assert_non_null(strstr(d.msg, "no capability minor for gpu0/gi2/ci"));
    f->migs[1].ci_id = 0;

    /* A GPU whose device node is not there. */
    snprintf(path, sizeof(path), "%s/dev/nvidia1", f->root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(try_new(f, &(struct nvcdi_options){.driver_root = f->root}, &d), -ENOENT);
    assert_non_null(strstr(d.msg, "/dev/nvidia1 not found"));

    /* MIG devices without mig-minors. */
    snprintf(path, sizeof(path), "%s/proc/driver/nvidia-caps/mig-minors", f->root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(try_new(f, &(struct nvcdi_options){.driver_root = f->root}, &d), -ENOENT);
    assert_non_null(strstr(d.msg, "mig-minors"));

    /* Nothing usable at all. */
    f->inv.n_devices = 0;
    assert_int_equal(try_new(f, &(struct nvcdi_options){.driver_root = f->root}, &d), -ENODEV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_common_edits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
    };
    umask(0022);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
