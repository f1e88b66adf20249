/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-claim CDI specs, written for claims decoded from JSON on the mock A100 MIG node (the mock
 * NVML library, a fake driver root from mock-nvml/make-driver-root.sh, the CDI root and MPS root in
 * a temporary directory): the file's name, mode and content read back (kind, device names, the
 * GPU's and the MIG device's nodes, the shared edits at spec level, MPS's env and mounts), the
 * returned CDI IDs, rewriting and removing (twice), and the refusals (a device not on the node, a
 * UID that must not become a file name, a claim without devices).
 *
 * With DRA_CDI_SPEC_OUT set to a directory, every spec this test writes is also copied there, for
 * tests/integration/test_dra_cdi_schema.py to check against the CDI JSON schema.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dra-claim.h"
#include "test-tmpdir.h"

#define UID "dab5ab50-d59a-42a6-af16-cfd4628c0f7a"
#define UID2 "0d1c2a3b-0000-4000-8000-000000000000"
#define DRIVER "gpu.nvidia.com"
#define NODE "node-a"
#define KIND "k8s.gpu.nvidia.com/claim"

struct fixture {
    char dir[64];
    char root[96], cdi[96], mps[96];
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct nvcdi *nv;
    struct dra_cdi_options opts;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char cmd[1024], path[4096];
    struct diag d;
    diag_init(&d);
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_dra_cdi_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
    snprintf(f->cdi, sizeof(f->cdi), "%s/cdi", f->dir);
    snprintf(f->mps, sizeof(f->mps), "%s/mps", f->dir);
    snprintf(cmd, sizeof(cmd), "'%s' '%s/a100-mig.yaml' '%s' >/dev/null", MAKE_DRIVER_ROOT,
             NODES_DIR, f->root);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/a100-mig.yaml", NODES_DIR);
    assert_int_equal(setenv("MOCK_NVML_PROFILE", path, 1), 0);
    assert_int_equal(setenv("MOCK_NVML_EVENTS", "/dev/null", 1), 0);
    if (gpu_nvml_open(MOCK_NVML_LIB, &d, &f->nvml) < 0 ||
        gpu_inventory_read(f->nvml, NULL, &d, &f->inv) < 0)
        fail_msg("mock NVML: %s", d.msg);
    const struct nvcdi_options o = {.kind = NVCDI_KIND_CLAIM, .driver_root = f->root};
    if (nvcdi_new(f->inv, &o, &d, &f->nv) < 0)
        fail_msg("nvcdi_new: %s", d.msg);
    f->opts.mps_root = f->mps;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    nvcdi_free(f->nv);
    gpu_inventory_free(f->inv);
    gpu_nvml_close(f->nvml);
    int r = test_tmpdir_remove(f->dir);
    free(f);
    return r == 0 ? 0 : -1;
}

/* ---- helpers ---- */

#define RES(req, dev)                                                                              \
    "{\"request\": \"" req "\", \"driver\": \"" DRIVER "\", \"pool\": \"" NODE                     \
    "\", \"device\": \"" dev "\"}"
#define MPS_CONFIG(requests)                                                                       \
    "{\"source\": \"FromClaim\", \"requests\": [" requests "], \"opaque\": {\"driver\": "          \
    "\"" DRIVER "\", \"parameters\": {\"apiVersion\": \"resource.nvidia.com/v1beta1\", "           \
    "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": \"MPS\"}}}}"

static struct dra_claim *claim(const char *uid, const char *results, const char *configs)
{
    char text[4096];
    json_error_t err;
    struct dra_claim *c = NULL;
    struct diag d;
    diag_init(&d);
    snprintf(text, sizeof(text),
             "{\"metadata\": {\"name\": \"c\", \"namespace\": \"ns\", \"uid\": \"%s\"}, "
             "\"status\": {\"allocation\": {\"devices\": {\"results\": [%s], \"config\": [%s]}}, "
             "\"reservedFor\": [{\"resource\": \"pods\", \"name\": \"p\", \"uid\": \"u\"}]}}",
             uid, results, configs);
    json_t *obj = json_loads(text, 0, &err);
    if (!obj)
        fail_msg("bad test JSON: %s", err.text);
    if (dra_claim_decode(obj, uid, DRIVER, NODE, &d, &c) < 0)
        fail_msg("dra_claim_decode: %s", d.msg);
    json_decref(obj);
    return c;
}

/* Copies a written spec to $DRA_CDI_SPEC_OUT (when set) for the schema check. */
static void export_spec(const char *path, const char *as)
{
    const char *out = getenv("DRA_CDI_SPEC_OUT");
    char *data = NULL, dst[4096];
    size_t len = 0;
    if (!out || !out[0])
        return;
    assert_int_equal(file_read_all(path, 1 << 20, &data, &len), 0);
    snprintf(dst, sizeof(dst), "%s/%s", out, as);
    assert_int_equal(file_write_atomic(dst, data, len, 0644), 0);
    free(data);
}

static char **write_ok(struct fixture *f, const struct dra_claim *c)
{
    char **ids = NULL;
    struct diag d;
    diag_init(&d);
    if (dra_cdi_write_with(f->nv, f->inv, f->cdi, c, &f->opts, &d, &ids) < 0)
        fail_msg("dra_cdi_write_with: %s", d.msg);
    assert_non_null(ids);
    return ids;
}

/* The spec file of uid, loaded (YAML) as JSON. */
static json_t *load_spec(struct fixture *f, const char *uid, mode_t *ret_mode)
{
    char path[4096];
    struct stat st;
    struct doc *doc = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(dra_cdi_path(f->cdi, uid, path, sizeof(path)), 0);
    assert_int_equal(stat(path, &st), 0);
    *ret_mode = st.st_mode & 07777;
    if (doc_load_file(path, &d, &doc) < 0)
        fail_msg("%s: %s", path, d.msg);
    json_t *root = json_incref(doc_root(doc, 0));
    doc_free(doc);
    return root;
}

static json_t *find_device(json_t *spec, const char *name)
{
    size_t i;
    json_t *dev;
    json_array_foreach(json_object_get(spec, "devices"), i, dev)
    {
        if (strcmp(json_string_value(json_object_get(dev, "name")), name) == 0)
            return json_object_get(dev, "containerEdits");
    }
    fail_msg("no device %s", name);
    return NULL;
}

/* The values of key (a string, or the "path"/"containerPath" member) in edits[list], joined. */
static void join(json_t *edits, const char *list, const char *key, char *buf, size_t n)
{
    size_t i;
    json_t *v;
    buf[0] = '\0';
    json_array_foreach(json_object_get(edits, list), i, v)
    {
        const char *s = key ? json_string_value(json_object_get(v, key)) : json_string_value(v);
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? " " : "", s ? s : "?");
    }
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- tests ---- */

static void test_write(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_claim_freep) struct dra_claim *c =
        claim(UID, RES("gpu", "gpu-2") "," RES("mig/small", "gpu-0-mig-1g5gb-19-2"),
              MPS_CONFIG("\"mig\""));
    char **ids = write_ok(f, c);
    char buf[4096], want[1024], path[4096];
    mode_t mode;
    assert_string_equal(ids[0], KIND "=" UID "-gpu-2");
    assert_string_equal(ids[1], KIND "=" UID "-gpu-0-mig-1g5gb-19-2");
    assert_null(ids[2]);
    dra_strv_free(ids);

    assert_int_equal(dra_cdi_path(f->cdi, UID, path, sizeof(path)), 0);
    snprintf(want, sizeof(want), "%s/k8s.gpu.nvidia.com-claim_" UID ".yaml", f->cdi);
    assert_string_equal(path, want);
    export_spec(path, "claim-mig-mps.yaml");

    _cleanup_json_ json_t *spec = load_spec(f, UID, &mode);
    assert_int_equal(mode, 0644);
    assert_string_equal(json_string_value(json_object_get(spec, "kind")), KIND);
    assert_int_equal(json_array_size(json_object_get(spec, "devices")), 2);

    json_t *gpu = find_device(spec, UID "-gpu-2");
    join(gpu, "deviceNodes", "path", buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia2");
    assert_null(json_object_get(gpu, "env"));

    json_t *mig = find_device(spec, UID "-gpu-0-mig-1g5gb-19-2");
    join(mig, "deviceNodes", "path", buf, sizeof(buf));
    assert_true(strncmp(buf, "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap", 40) == 0);
    join(mig, "env", NULL, buf, sizeof(buf));
    assert_string_equal(buf, "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps");
    join(mig, "mounts", "containerPath", buf, sizeof(buf));
    assert_string_equal(buf, "/tmp/nvidia-mps /dev/shm");
    join(mig, "mounts", "hostPath", buf, sizeof(buf));
    snprintf(want, sizeof(want), "%s/" UID "/pipe %s/" UID "/shm", f->mps, f->mps);
    assert_string_equal(buf, want);
    snprintf(path, sizeof(path), "%s/" UID "/pipe", f->mps);
    assert_true(is_dir(path));

    /* The shared edits are at spec level, once. */
    json_t *common = json_object_get(spec, "containerEdits");
    join(common, "deviceNodes", "path", buf, sizeof(buf));
    assert_non_null(strstr(buf, "/dev/nvidiactl"));
    join(common, "env", NULL, buf, sizeof(buf));
    assert_non_null(strstr(buf, "NVIDIA_VISIBLE_DEVICES=void"));
    assert_true(json_array_size(json_object_get(common, "mounts")) > 0);
}

static void test_rewrite_and_remove(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_claim_freep) struct dra_claim *c = claim(
        UID, RES("gpu", "gpu-3") "," RES("mig", "gpu-1-mig-3g20gb-9-0"), MPS_CONFIG("\"mig\""));
    char path[4096], dir[4096];
    char *first = NULL, *second = NULL;
    size_t n1, n2;
    struct diag d;
    diag_init(&d);
    dra_strv_free(write_ok(f, c));
    assert_int_equal(dra_cdi_path(f->cdi, UID, path, sizeof(path)), 0);
    assert_int_equal(file_read_all(path, 1 << 20, &first, &n1), 0);
    dra_strv_free(write_ok(f, c));
    assert_int_equal(file_read_all(path, 1 << 20, &second, &n2), 0);
    assert_int_equal(n1, n2);
    assert_memory_equal(first, second, n1);
    free(first);
    free(second);
    export_spec(path, "claim-gpu-mig.yaml");

    /* What a control daemon leaves in its pipe directory goes too. */
    snprintf(dir, sizeof(dir), "%s/" UID "/pipe/control", f->mps);
    assert_int_equal(file_write_atomic(dir, "", 0, 0600), 0);
    assert_int_equal(dra_cdi_remove_with(f->cdi, UID, &f->opts, &d), 0);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(dir, sizeof(dir), "%s/" UID "/pipe", f->mps);
    assert_false(is_dir(dir));
    snprintf(dir, sizeof(dir), "%s/" UID, f->mps);
    assert_false(is_dir(dir));
    assert_true(is_dir(f->mps));
    /* Unprepare may run again after a restart. */
    assert_int_equal(dra_cdi_remove_with(f->cdi, UID, &f->opts, &d), 0);
    assert_int_equal(dra_cdi_remove(f->cdi, UID, &d), 0);
}

static void test_same_device_twice(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_claim_freep) struct dra_claim *c =
        claim(UID2, RES("a", "gpu-2") "," RES("b", "gpu-2"), "");
    char **ids = write_ok(f, c);
    mode_t mode;
    assert_string_equal(ids[0], KIND "=" UID2 "-gpu-2");
    assert_string_equal(ids[1], KIND "=" UID2 "-gpu-2");
    dra_strv_free(ids);
    _cleanup_json_ json_t *spec = load_spec(f, UID2, &mode);
    assert_int_equal(json_array_size(json_object_get(spec, "devices")), 1);
}

static void test_refused(void **state)
{
    struct fixture *f = *state;
    char path[4096];
    char **ids = NULL;
    struct diag d;
    diag_init(&d);
    _cleanup_(dra_claim_freep) struct dra_claim *c =
        claim(UID, RES("gpu", "gpu-2") "," RES("gpu", "gpu-9"), "");
    assert_int_equal(dra_cdi_write_with(f->nv, f->inv, f->cdi, c, &f->opts, &d, &ids), -ENOENT);
    assert_string_equal(d.msg, "claim " UID
                               ": device gpu-9 is not on this node (or NVML cannot reach it)");
    assert_null(ids);
    assert_int_equal(dra_cdi_path(f->cdi, UID, path, sizeof(path)), 0);
    assert_int_equal(access(path, F_OK), -1);

    /* A UID becomes a file name: only the UUID shape gets that far. */
    static const char *const bad[] = {"../../etc/passwd", "",
                                      "DAB5AB50-D59A-42A6-AF16-CFD4628C0F7A", "x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        free(c->uid);
        c->uid = strdup(bad[i]);
        assert_int_equal(dra_cdi_write(f->nv, f->inv, f->cdi, c, &d, &ids), -EINVAL);
        assert_int_equal(dra_cdi_remove(f->cdi, bad[i], &d), -EINVAL);
        assert_int_equal(dra_cdi_path(f->cdi, bad[i], path, sizeof(path)), -EINVAL);
    }
    assert_int_equal(dra_cdi_path(f->cdi, UID, path, 20), -ENAMETOOLONG);
}

static void test_no_devices(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_claim_freep) struct dra_claim *full = claim(UID, RES("gpu", "gpu-2"), "");
    _cleanup_(dra_claim_freep) struct dra_claim *empty = claim(UID, "", "");
    char path[4096];
    dra_strv_free(write_ok(f, full));
    assert_int_equal(dra_cdi_path(f->cdi, UID, path, sizeof(path)), 0);
    assert_int_equal(access(path, F_OK), 0);
    char **ids = write_ok(f, empty);
    assert_null(ids[0]);
    dra_strv_free(ids);
    assert_int_equal(access(path, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewrite_and_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_device_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_devices, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
