/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of loading spec files (cdi_spec_load_file): a spec written by the module reads back to the
 * same text in both formats; a hand-written NVIDIA-style YAML spec fills every field of the model;
 * and a table of bad specs, each refused with its error code and the file position or reason a
 * runtime would give (unknown keys, wrong types, names, versions, empty edits, intelRdt).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cdi.h"
#include "test-tmpdir.h"

static struct cdi_spec *sample(void)
{
    static const char *const opts[] = {"ro", "nosuid", "nodev", "bind", NULL};
    static const char *const args[] = {"nvidia-cdi-hook", "update-ldcache", NULL};
    struct cdi_spec *spec = NULL;
    struct cdi_device *dev = NULL;
    assert_int_equal(cdi_spec_new("nvidia.com/gpu", NULL, &spec), 0);
    assert_int_equal(cdi_spec_add_device(spec, "0", NULL, &dev), 0);
    assert_int_equal(
        cdi_edits_add_device_node(
            &dev->edits, &(struct cdi_device_node){.path = "/dev/nvidia0",
                                                   .host_path = "/dev/nvidia0",
                                                   .type = "c",
                                                   .major = 195,
                                                   .minor = 0,
                                                   .set = CDI_NODE_MAJOR | CDI_NODE_MINOR}),
        0);
    assert_int_equal(cdi_spec_add_device(spec, "GPU-5f0c3b9e", NULL, &dev), 0);
    assert_int_equal(
        cdi_edits_add_device_node(&dev->edits, &(struct cdi_device_node){.path = "/dev/nvidia0"}),
        0);
    assert_int_equal(cdi_edits_add_env(&spec->edits, "NVIDIA_VISIBLE_DEVICES", "void"), 0);
    assert_int_equal(cdi_edits_add_mount(&spec->edits, "/usr/lib/libnvidia-ml.so.550.54.15",
                                         "/usr/lib/libnvidia-ml.so.550.54.15", NULL, opts),
                     0);
    assert_int_equal(cdi_edits_add_hook(&spec->edits, "createContainer", "/usr/bin/nvidia-cdi-hook",
                                        args, NULL, 0),
                     0);
    return spec;
}

/* What the module writes, it reads back to the same document. */
static void test_round_trip(void **state)
{
    static const enum cdi_format formats[] = {CDI_FORMAT_JSON, CDI_FORMAT_YAML};
    for (size_t f = 0; f < 2; f++) {
        struct cdi_spec *spec = sample(), *back = NULL;
        char *path = NULL, *text = NULL, *again = NULL;
        size_t len = 0, len2 = 0;
        struct diag d;
        assert_int_equal(cdi_spec_write(spec, *state, NULL, formats[f], NULL, &path), 0);
        assert_int_equal(cdi_spec_load_file(path, &d, &back), 0);
        assert_string_equal(back->kind, "nvidia.com/gpu");
        assert_int_equal(back->devices.len, 2);
        assert_int_equal(cdi_spec_format(spec, formats[f], NULL, &text, &len), 0);
        assert_int_equal(cdi_spec_format(back, formats[f], NULL, &again, &len2), 0);
        assert_string_equal(again, text);
        free(text);
        free(again);
        free(path);
        cdi_spec_free(back);
        cdi_spec_free(spec);
    }
}

/* The shape of what nvidia-ctk writes, by hand: every field lands in the model. */
static void test_nvidia_yaml(void **state)
{
    char *path =
        test_tmpdir_put(*state, "nvidia.yaml",
                        "---\n"
                        "cdiVersion: 0.7.0\n"
                        "kind: nvidia.com/gpu\n"
                        "annotations: {made-by: test}\n"
                        "devices:\n"
                        "- name: all\n"
                        "  annotations: {note: every GPU}\n"
                        "  containerEdits:\n"
                        "    deviceNodes:\n"
                        "    - {path: /dev/nvidia0, hostPath: /run/nvidia/driver/dev/nvidia0, "
                        "type: c, major: 195, minor: 0, fileMode: 438, permissions: rw, uid: 0, "
                        "gid: 44}\n"
                        "    additionalGids: [44]\n"
                        "containerEdits:\n"
                        "  env:\n"
                        "  - NVIDIA_VISIBLE_DEVICES=void\n"
                        "  - EMPTY=\n"
                        "  hooks:\n"
                        "  - hookName: createContainer\n"
                        "    path: /usr/bin/nvidia-cdi-hook\n"
                        "    args: [nvidia-cdi-hook, create-symlinks, --link, a::b]\n"
                        "    env: [X=1]\n"
                        "    timeout: 10\n"
                        "  mounts:\n"
                        "  - hostPath: /usr/bin/nvidia-smi\n"
                        "    containerPath: /usr/bin/nvidia-smi\n"
                        "    type: bind\n"
                        "    options: [ro, nosuid, nodev, bind]\n");
    struct cdi_spec *spec = NULL;
    struct diag d;
    if (cdi_spec_load_file(path, &d, &spec) != 0)
        fail_msg("%s", d.msg);
    assert_string_equal(spec->version, "0.7.0");
    assert_int_equal(spec->annotations.len, 1);
    struct cdi_device *all = cdi_spec_find_device(spec, "all");
    assert_non_null(all);
    assert_int_equal(all->annotations.len, 1);
    const struct cdi_device_node *n = VEC_AT(&all->edits.device_nodes, struct cdi_device_node, 0);
    assert_string_equal(n->host_path, "/run/nvidia/driver/dev/nvidia0");
    assert_string_equal(n->permissions, "rw");
    assert_int_equal(n->major, 195);
    assert_int_equal(n->file_mode, 438);
    assert_int_equal(n->gid, 44);
    assert_int_equal(n->set, CDI_NODE_MAJOR | CDI_NODE_MINOR | CDI_NODE_FILE_MODE | CDI_NODE_UID |
                                 CDI_NODE_GID);
    assert_int_equal(*VEC_AT(&all->edits.additional_gids, uint32_t, 0), 44);
    assert_int_equal(spec->edits.env.len, 2);
    assert_string_equal(*VEC_AT(&spec->edits.env, char *, 1), "EMPTY=");
    const struct cdi_hook *h = VEC_AT(&spec->edits.hooks, struct cdi_hook, 0);
    assert_string_equal(h->args[3], "a::b");
    assert_string_equal(h->env[0], "X=1");
    assert_int_equal(h->timeout, 10);
    const struct cdi_mount *m = VEC_AT(&spec->edits.mounts, struct cdi_mount, 0);
    assert_string_equal(m->type, "bind");
    assert_string_equal(m->options[3], "bind");
    assert_null(m->options[4]);
    cdi_spec_free(spec);
    free(path);
}

static const char GOOD_DEVICE[] = "devices: [{name: gpu0, containerEdits: {deviceNodes: "
                                  "[{path: /dev/nvidia0}]}}]\n";

/* Bad specs (%s stands for a good devices list): the code and a part of the message. */
static void test_bad(void **state)
{
    static const struct {
        const char *text;
        int err;
        const char *msg;
    } cases[] = {
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\nextra: 1\n", -EINVAL, ":3:1: unknown key"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n", -EINVAL, "devices"},
        {"cdiVersion: 9.9.9\nkind: nvidia.com/gpu\n%s", -EINVAL, ":1:13: cdiVersion: unknown"},
        {"cdiVersion: 0.5.0\nkind: nvidia\n%s", -EINVAL, ":2:7: kind"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n", -EINVAL, "no devices"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: a, containerEdits: {}}]\n",
         -EINVAL, "empty"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- {name: -a-, containerEdits: "
         "{env: [A=1]}}\n",
         -EINVAL, ":4:10: device name"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- {name: a, containerEdits: {env: "
         "[A=1]}}\n- {name: a, containerEdits: {env: [A=1]}}\n",
         -EEXIST, "listed twice"},
        {"cdiVersion: 0.3.0\nkind: nvidia.com/gpu\ndevices: [{name: a, containerEdits: "
         "{deviceNodes: [{path: /dev/x, hostPath: /dev/y}]}}]\n",
         -EINVAL, "at least"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: a, containerEdits: {env: "
         "[NOEQUALS]}}]\n",
         -EINVAL, "NAME=value"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: a, containerEdits: "
         "{deviceNodes: [{path: /dev/x, major: x}]}}]\n",
         -EINVAL, "major"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [{name: a, containerEdits: {mounts: "
         "[{hostPath: /a, containerPath: /a, options: [1]}]}}]\n",
         -EINVAL, "options"},
        {"cdiVersion: 0.7.0\nkind: nvidia.com/gpu\ndevices: [{name: a, containerEdits: "
         "{intelRdt: {closID: x}}}]\n",
         -EOPNOTSUPP, "intelRdt"},
        {"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n%s---\nkind: x\n", -EINVAL, "one document"},
        {"- a list\n", -EINVAL, "mapping"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char text[1024], name[32];
        struct diag d;
        struct cdi_spec *spec = NULL;
        const char *mark = strstr(cases[i].text, "%s");
        if (mark)
            snprintf(text, sizeof(text), "%.*s%s%s", (int)(mark - cases[i].text), cases[i].text,
                     GOOD_DEVICE, mark + 2);
        else
            snprintf(text, sizeof(text), "%s", cases[i].text);
        snprintf(name, sizeof(name), "bad%zu.yaml", i);
        char *path = test_tmpdir_put(*state, name, text);
        diag_init(&d);
        int r = cdi_spec_load_file(path, &d, &spec);
        if (r != cases[i].err || !strstr(d.msg, cases[i].msg))
            fail_msg("case %zu: %d \"%s\"", i, r, d.msg);
        assert_null(spec);
        free(path);
    }
}

static void test_missing(void **state)
{
    struct cdi_spec *spec = NULL;
    struct diag d;
    char path[256];
    snprintf(path, sizeof(path), "%s/none.json", (char *)*state);
    assert_int_equal(cdi_spec_load_file(path, &d, &spec), -ENOENT);
    assert_null(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_nvidia_yaml, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_bad, test_tmpdir_setup, test_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_missing, test_tmpdir_setup, test_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
