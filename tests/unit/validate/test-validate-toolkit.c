/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the toolkit check on fixture files: the runtime configuration reader on a table of TOML
 * texts (containerd v1, v2 and v3 layouts, CRI-O, dotted keys, inline tables, comments, strings
 * that look like headers, other handlers), then the whole check on a fake host root: a CDI spec
 * found in either directory, bad and foreign specs passed over, a containerd drop-in with its
 * runtime binary present or missing, CRI-O, and nothing at all.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cdi.h"
#include "test-tmpdir.h"
#include "validate-internal.h"

static void test_scan(void **state)
{
    static const struct {
        const char *text;
        const char *handler;
        bool found;
        const char *binary;
    } cases[] = {
        /* containerd config version 2, as the toolkit writes it */
        {"version = 2\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
         "  runtime_type = \"io.containerd.runc.v2\"\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
         "  BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n",
         "nvidia", true, "/usr/local/nvidia/toolkit/nvidia-container-runtime"},
        /* version 3 (containerd 2.x), literal string, spaces around dots */
        {"[ plugins . 'io.containerd.cri.v1.runtime' . containerd.runtimes.nvidia.options ]\n"
         "BinaryName = '/opt/nvidia-container-runtime' # the runtime\n",
         "nvidia", true, "/opt/nvidia-container-runtime"},
        /* version 1 */
        {"[plugins.cri.containerd.runtimes.nvidia]\nruntime_type = "
         "\"io.containerd.runtime.v1.linux\"\n",
         "nvidia", true, ""},
        /* dotted keys under a parent table */
        {"[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
         "runtimes.nvidia.options.BinaryName = \"/bin/ncr\"\n",
         "nvidia", true, "/bin/ncr"},
        /* an inline table */
        {"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes]\n"
         "nvidia = { runtime_type = \"io.containerd.runc.v2\" }\n",
         "nvidia", true, ""},
        /* CRI-O */
        {"[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/local/nvidia/toolkit/ncr\"\n",
         "nvidia", true, "/usr/local/nvidia/toolkit/ncr"},
        /* another handler name */
        {"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia-cdi]\n", "nvidia-cdi",
         true, ""},
        {"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia-cdi]\n", "nvidia",
         false, ""},
        /* runc only */
        {"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
         "BinaryName = \"/usr/bin/runc\"\n",
         "nvidia", false, ""},
        /* commented out */
        {"# [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n", "nvidia", false,
         ""},
        /* a header inside a multi-line string is no header */
        {"description = \"\"\"\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
         "\"\"\"\n",
         "nvidia", false, ""},
        /* a line of a multi-line array that looks like a header */
        {"x = [\n  [\"plugins\"],\n]\n", "nvidia", false, ""},
        /* a later table's keys do not belong to the handler */
        {"[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
         "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n"
         "BinaryName = \"/usr/bin/runc\"\n",
         "nvidia", true, ""},
        /* a '#' inside a string is not a comment */
        {"[crio.runtime.runtimes.nvidia]\nruntime_path = \"/a#b\"\n", "nvidia", true, "/a#b"},
        {"", "nvidia", false, ""},
        {"[unterminated\n[\"a\".\n= \"x\"\n[[]]\n", "nvidia", false, ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct validate_runtime_hit hit;
        validate_scan_runtime_config(cases[i].text, cases[i].handler, &hit);
        if (hit.found != cases[i].found || strcmp(hit.binary, cases[i].binary) != 0)
            fail_msg("case %zu: found %d binary \"%s\"", i, hit.found, hit.binary);
    }
}

/* ---- the check on a fake host root ---- */

struct fixture {
    char *root;
    struct validate_options o;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char *argv[] = {(char *)"validate", (char *)"toolkit", NULL};
    struct diag d;
    if (!f)
        return -1;
    f->root = strdup("/tmp/test_validate_toolkit_XXXXXX");
    if (!f->root || !mkdtemp(f->root))
        return -1;
    validate_options_init(&f->o);
    if (validate_options_parse(2, argv, &f->o, &d) < 0)
        return -1;
    free(f->o.host_ctr);
    f->o.host_ctr = strdup(f->root);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int r = test_tmpdir_remove(f->root);
    validate_options_release(&f->o);
    free(f->root);
    free(f);
    return r == 0 ? 0 : -1;
}

/* Writes text at root + path, making the directories. */
static void put(const char *root, const char *path, const char *text)
{
    char full[4096];
    snprintf(full, sizeof(full), "%s%s", root, path);
    char *slash = strrchr(full, '/');
    *slash = '\0';
    assert_int_equal(file_mkdir_p(full, 0755), 0);
    *slash = '/';
    FILE *fp = fopen(full, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void put_spec(const char *root, const char *dir, const char *kind, unsigned devices)
{
    struct cdi_spec *spec = NULL;
    char path[4096];
    assert_int_equal(cdi_spec_new(kind, NULL, &spec), 0);
    for (unsigned i = 0; i < devices; i++) {
        struct cdi_device *dev = NULL;
        char name[16], node[32];
        snprintf(name, sizeof(name), "gpu%u", i);
        snprintf(node, sizeof(node), "/dev/nvidia%u", i);
        assert_int_equal(cdi_spec_add_device(spec, name, NULL, &dev), 0);
        assert_int_equal(
            cdi_edits_add_device_node(&dev->edits, &(struct cdi_device_node){.path = node}), 0);
    }
    snprintf(path, sizeof(path), "%s%s", root, dir);
    assert_int_equal(cdi_spec_write(spec, path, NULL, CDI_FORMAT_YAML, NULL, NULL), 0);
    cdi_spec_free(spec);
}

static int check(struct fixture *f, char *msg, size_t n)
{
    struct diag d;
    diag_init(&d);
    int r = validate_toolkit(&f->o, &d);
    snprintf(msg, n, "%s", d.msg);
    return r;
}

static void test_nothing(void **state)
{
    char msg[DIAG_MSG_MAX];
    assert_int_equal(check(*state, msg, sizeof(msg)), VALIDATE_NOT_READY);
    assert_non_null(strstr(msg, "no CDI spec of kind nvidia.com/gpu"));
    assert_non_null(strstr(msg, "no runtime handler \"nvidia\""));
}

static void test_cdi(void **state)
{
    struct fixture *f = *state;
    char msg[DIAG_MSG_MAX], path[4096];
    size_t devices = 0;
    /* Neither a broken file, nor another kind, nor a file that is not .json/.yaml counts. */
    put(f->root, "/etc/cdi/broken.yaml", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [\n");
    put(f->root, "/etc/cdi/notes.txt", "not a spec\n");
    put_spec(f->root, "/etc/cdi", "management.nvidia.com/gpu", 1);
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_NOT_READY);
    assert_non_null(strstr(msg, "broken.yaml"));
    put_spec(f->root, "/var/run/cdi", "nvidia.com/gpu", 3);
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_READY);
    struct diag d;
    assert_int_equal(validate_find_cdi_spec(f->root, "/etc/cdi,/var/run/cdi", "nvidia.com/gpu",
                                            path, sizeof(path), &devices, &d),
                     VALIDATE_READY);
    assert_non_null(strstr(path, "/var/run/cdi/nvidia.com-gpu.yaml"));
    assert_int_equal(devices, 3);
    /* Only the directories asked for are read. */
    free(f->o.cdi_dirs);
    f->o.cdi_dirs = strdup("/etc/cdi");
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_NOT_READY);
}

static void test_containerd(void **state)
{
    struct fixture *f = *state;
    char msg[DIAG_MSG_MAX];
    put(f->root, "/etc/containerd/config.toml",
        "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n");
    put(f->root, "/etc/containerd/conf.d/99-nvidia.toml",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
        "BinaryName = \"/usr/local/nvidia/toolkit/nvidia-container-runtime\"\n");
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_NOT_READY);
    assert_non_null(strstr(msg, "which does not exist"));
    put(f->root, "/usr/local/nvidia/toolkit/nvidia-container-runtime", "#!/bin/sh\n");
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_READY);
    /* Another runtime class is another handler. */
    free(f->o.runtime_class);
    f->o.runtime_class = strdup("nvidia-legacy");
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_NOT_READY);
    free(f->o.runtime_class);
    f->o.runtime_class = strdup("Not/A/Handler");
    assert_int_equal(check(f, msg, sizeof(msg)), -EINVAL);
}

static void test_crio(void **state)
{
    struct fixture *f = *state;
    char msg[DIAG_MSG_MAX];
    put(f->root, "/etc/crio/crio.conf.d/99-nvidia.conf",
        "[crio.runtime.runtimes.nvidia]\nruntime_path = \"nvidia-container-runtime\"\n");
    /* A bare name is looked up in the runtime's PATH: nothing to check on disk. */
    assert_int_equal(check(f, msg, sizeof(msg)), VALIDATE_READY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan),
        cmocka_unit_test_setup_teardown(test_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cdi, setup, teardown),
        cmocka_unit_test_setup_teardown(test_containerd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crio, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
