/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the CDI spec model: building specs, the minimum cdiVersion for each feature (cdi.md
 * §2), the checks a loader would apply, merging edits for an "all" device, and the exact JSON and
 * YAML text (key order included).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cdi.h"

static const char *const RO[] = {"ro", "nosuid", NULL};

static struct cdi_spec *new_spec(const char *kind)
{
    struct cdi_spec *spec = NULL;
    assert_int_equal(cdi_spec_new(kind, NULL, &spec), 0);
    return spec;
}

static struct cdi_device *add_device(struct cdi_spec *spec, const char *name)
{
    struct cdi_device *dev = NULL;
    assert_int_equal(cdi_spec_add_device(spec, name, NULL, &dev), 0);
    return dev;
}

static void test_new(void **state)
{
    struct cdi_spec *spec = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(cdi_spec_new("nvidia.com", &d, &spec), -EINVAL);
    assert_null(spec);
    assert_non_null(strstr(d.msg, "invalid CDI kind"));
    spec = new_spec("k8s.gpu.nvidia.com/claim");
    assert_string_equal(spec->vendor, "k8s.gpu.nvidia.com");
    assert_string_equal(spec->class, "claim");
    struct cdi_device *dev = add_device(spec, "a");
    assert_ptr_equal(cdi_spec_find_device(spec, "a"), dev);
    assert_null(cdi_spec_find_device(spec, "b"));
    assert_int_equal(cdi_spec_add_device(spec, "a", &d, NULL), -EEXIST);
    assert_non_null(strstr(d.msg, "defined twice"));
    assert_int_equal(cdi_spec_add_device(spec, "a b", &d, NULL), -EINVAL);
    assert_int_equal(spec->devices.len, 1);
    cdi_spec_free(spec);
    assert_null(cdi_spec_free(NULL));
}

/* Each row: what a spec uses, and the version it then needs. */
enum feature {
    F_NONE,
    F_MOUNT_TYPE,
    F_HOST_PATH,
    F_DIGIT_NAME,
    F_SPEC_ANNOTATION,
    F_DEVICE_ANNOTATION,
    F_DOTTED_CLASS,
    F_GIDS,
};

static void use_feature(struct cdi_spec **spec, enum feature f)
{
    *spec = new_spec(f == F_DOTTED_CLASS ? "example.com/gpu.shared" : "example.com/gpu");
    struct cdi_device *dev = add_device(*spec, f == F_DIGIT_NAME ? "0" : "dev");
    struct cdi_device_node node = {.path = "/dev/x"};
    if (f == F_HOST_PATH)
        node.host_path = "/host/dev/x";
    assert_int_equal(cdi_edits_add_device_node(&dev->edits, &node), 0);
    if (f == F_MOUNT_TYPE)
        assert_int_equal(cdi_edits_add_mount(&dev->edits, "/a", "/b", "bind", RO), 0);
    if (f == F_SPEC_ANNOTATION)
        assert_int_equal(cdi_spec_set_annotation(*spec, "example.com/x", "y", NULL), 0);
    if (f == F_DEVICE_ANNOTATION)
        assert_int_equal(cdi_device_set_annotation(dev, "x", "y", NULL), 0);
    if (f == F_GIDS)
        assert_int_equal(cdi_edits_add_gid(&(*spec)->edits, 44), 0);
}

static void test_min_version(void **state)
{
    static const struct {
        enum feature f;
        const char *version;
    } cases[] = {
        {F_NONE, "0.3.0"},
        {F_MOUNT_TYPE, "0.4.0"},
        {F_HOST_PATH, "0.5.0"},
        {F_DIGIT_NAME, "0.5.0"},
        {F_SPEC_ANNOTATION, "0.6.0"},
        {F_DEVICE_ANNOTATION, "0.6.0"},
        {F_DOTTED_CLASS, "0.6.0"},
        {F_GIDS, "0.7.0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct cdi_spec *spec = NULL;
        use_feature(&spec, cases[i].f);
        assert_string_equal(cdi_spec_min_version(spec), cases[i].version);
        assert_string_equal(cdi_spec_version(spec), cases[i].version);
        assert_int_equal(cdi_spec_validate(spec, NULL), 0);
        cdi_spec_free(spec);
    }
}

static void test_declared_version(void **state)
{
    struct cdi_spec *spec = NULL;
    struct diag d;
    diag_init(&d);
    use_feature(&spec, F_HOST_PATH);
    assert_int_equal(cdi_spec_set_version(spec, "0.4.0", &d), 0);
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "must be at least v0.5.0"));
    assert_int_equal(cdi_spec_set_version(spec, "v1.0.0", &d), 0);
    assert_string_equal(cdi_spec_version(spec), "1.0.0");
    assert_int_equal(cdi_spec_validate(spec, &d), 0);
    assert_int_equal(cdi_spec_set_version(spec, "2.0.0", &d), -EINVAL);
    assert_string_equal(cdi_spec_version(spec), "1.0.0");
    assert_int_equal(cdi_spec_set_version(spec, NULL, &d), 0);
    assert_string_equal(cdi_spec_version(spec), "0.5.0");
    cdi_spec_free(spec);
    assert_true(cdi_valid_version("0.3.0"));
    assert_true(cdi_valid_version("v1.1.0"));
    assert_false(cdi_valid_version("1.1"));
    assert_int_equal(cdi_version_compare("v0.5.0", "0.5.0"), 0);
    assert_true(cdi_version_compare("1.0.0", "0.8.0") > 0);
}

static void test_validate(void **state)
{
    struct diag d;
    diag_init(&d);
    struct cdi_spec *spec = new_spec("example.com/gpu");
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "no devices"));
    struct cdi_device *dev = add_device(spec, "a");
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "empty device edits"));
    assert_int_equal(cdi_edits_add_env(&dev->edits, "A", "1"), 0);
    assert_int_equal(cdi_spec_validate(spec, &d), 0);

    assert_int_equal(cdi_edits_add_device_node(&dev->edits,
                                               &(struct cdi_device_node){
                                                   .path = "dev/rel",
                                               }),
                     0);
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "not absolute"));
    cdi_spec_free(spec);

    spec = new_spec("example.com/gpu");
    dev = add_device(spec, "a");
    assert_int_equal(cdi_edits_add_hook(&dev->edits, "preStart", "/bin/x", NULL, NULL, 0), 0);
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "unknown hook name"));
    cdi_spec_free(spec);

    spec = new_spec("example.com/gpu");
    dev = add_device(spec, "a");
    assert_int_equal(cdi_edits_add_device_node(&dev->edits,
                                               &(struct cdi_device_node){
                                                   .path = "/dev/x",
                                                   .permissions = "rwx",
                                               }),
                     0);
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "invalid permissions"));
    cdi_spec_free(spec);

    spec = new_spec("example.com/gpu");
    dev = add_device(spec, "a");
    const char *env[] = {"NOEQUALS", NULL};
    assert_int_equal(cdi_edits_add_hook(&dev->edits, "createContainer", "/bin/x", NULL, env, 0), 0);
    assert_int_equal(cdi_spec_validate(spec, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "NAME=value"));
    cdi_spec_free(spec);

    assert_int_equal(cdi_edits_add_env(&(struct cdi_edits){0}, "A=B", "1"), -EINVAL);
}

static void test_duplicates_and_merge(void **state)
{
    struct cdi_edits a, b;
    cdi_edits_init(&a);
    cdi_edits_init(&b);
    struct cdi_device_node n0 = {.path = "/dev/nvidia0", .host_path = "/dev/nvidia0"};
    struct cdi_device_node n0_other = {.path = "/dev/nvidia0", .host_path = "/other"};
    struct cdi_device_node n1 = {.path = "/dev/nvidia1", .host_path = "/dev/nvidia1"};
    assert_int_equal(cdi_edits_add_device_node(&a, &n0), 0);
    assert_int_equal(cdi_edits_add_device_node(&a, &n0), 0);
    assert_int_equal(a.device_nodes.len, 1);
    assert_int_equal(cdi_edits_add_device_node(&a, &n0_other), -EEXIST);
    assert_int_equal(cdi_edits_add_mount(&a, "/h", "/c", NULL, RO), 0);
    assert_int_equal(cdi_edits_add_mount(&a, "/h", "/c", NULL, RO), 0);
    assert_int_equal(cdi_edits_add_mount(&a, "/h2", "/c", NULL, RO), -EEXIST);
    assert_int_equal(a.mounts.len, 1);
    assert_int_equal(cdi_edits_add_env(&a, "X", "1"), 0);

    assert_int_equal(cdi_edits_add_device_node(&b, &n0), 0);
    assert_int_equal(cdi_edits_add_device_node(&b, &n1), 0);
    assert_int_equal(cdi_edits_add_env(&b, "X", "1"), 0);
    assert_int_equal(cdi_edits_add_env(&b, "Y", "2"), 0);
    const char *args[] = {"hook", "run", NULL};
    assert_int_equal(cdi_edits_add_hook(&b, "createContainer", "/bin/hook", args, NULL, 5), 0);
    assert_int_equal(cdi_edits_add_gid(&b, 44), 0);

    assert_int_equal(cdi_edits_merge(&a, &b), 0);
    assert_int_equal(cdi_edits_merge(&a, &b), 0);
    assert_int_equal(a.device_nodes.len, 2);
    assert_int_equal(a.env.len, 2);
    assert_int_equal(a.hooks.len, 1);
    assert_int_equal(a.additional_gids.len, 1);
    assert_string_equal(VEC_AT(&a.device_nodes, struct cdi_device_node, 1)->path, "/dev/nvidia1");
    assert_false(cdi_edits_is_empty(&a));
    cdi_edits_release(&a);
    cdi_edits_release(&b);
}

static struct cdi_spec *sample_spec(void)
{
    struct cdi_spec *spec = new_spec("example.com/gpu");
    struct cdi_device *dev = add_device(spec, "0");
    assert_int_equal(
        cdi_edits_add_device_node(&dev->edits,
                                  &(struct cdi_device_node){
                                      .path = "/dev/nvidia0",
                                      .host_path = "/dev/nvidia0",
                                      .type = "c",
                                      .major = 195,
                                      .minor = 0,
                                      .permissions = "rw",
                                      .uid = 0,
                                      .set = CDI_NODE_MAJOR | CDI_NODE_MINOR | CDI_NODE_UID,
                                  }),
        0);
    assert_int_equal(cdi_edits_add_env(&spec->edits, "NVIDIA_VISIBLE_DEVICES", "void"), 0);
    assert_int_equal(cdi_edits_add_mount(&spec->edits, "/h/lib.so", "/lib.so", NULL, RO), 0);
    const char *args[] = {"nvidia-cdi-hook", "update-ldcache", NULL};
    assert_int_equal(
        cdi_edits_add_hook(&spec->edits, "createContainer", "/usr/bin/hook", args, NULL, 0), 0);
    return spec;
}

static const char SAMPLE_JSON[] = "{\n"
                                  "  \"cdiVersion\": \"0.5.0\",\n"
                                  "  \"kind\": \"example.com/gpu\",\n"
                                  "  \"devices\": [\n"
                                  "    {\n"
                                  "      \"name\": \"0\",\n"
                                  "      \"containerEdits\": {\n"
                                  "        \"deviceNodes\": [\n"
                                  "          {\n"
                                  "            \"path\": \"/dev/nvidia0\",\n"
                                  "            \"hostPath\": \"/dev/nvidia0\",\n"
                                  "            \"type\": \"c\",\n"
                                  "            \"major\": 195,\n"
                                  "            \"minor\": 0,\n"
                                  "            \"permissions\": \"rw\",\n"
                                  "            \"uid\": 0\n"
                                  "          }\n"
                                  "        ]\n"
                                  "      }\n"
                                  "    }\n"
                                  "  ],\n"
                                  "  \"containerEdits\": {\n"
                                  "    \"env\": [\n"
                                  "      \"NVIDIA_VISIBLE_DEVICES=void\"\n"
                                  "    ],\n"
                                  "    \"hooks\": [\n"
                                  "      {\n"
                                  "        \"hookName\": \"createContainer\",\n"
                                  "        \"path\": \"/usr/bin/hook\",\n"
                                  "        \"args\": [\n"
                                  "          \"nvidia-cdi-hook\",\n"
                                  "          \"update-ldcache\"\n"
                                  "        ]\n"
                                  "      }\n"
                                  "    ],\n"
                                  "    \"mounts\": [\n"
                                  "      {\n"
                                  "        \"hostPath\": \"/h/lib.so\",\n"
                                  "        \"containerPath\": \"/lib.so\",\n"
                                  "        \"options\": [\n"
                                  "          \"ro\",\n"
                                  "          \"nosuid\"\n"
                                  "        ]\n"
                                  "      }\n"
                                  "    ]\n"
                                  "  }\n"
                                  "}\n";

static const char SAMPLE_YAML[] = "---\n"
                                  "cdiVersion: \"0.5.0\"\n"
                                  "kind: \"example.com/gpu\"\n"
                                  "devices:\n"
                                  "  - name: \"0\"\n"
                                  "    containerEdits:\n"
                                  "      deviceNodes:\n"
                                  "        - path: \"/dev/nvidia0\"\n"
                                  "          hostPath: \"/dev/nvidia0\"\n"
                                  "          type: \"c\"\n"
                                  "          major: 195\n"
                                  "          minor: 0\n"
                                  "          permissions: \"rw\"\n"
                                  "          uid: 0\n"
                                  "containerEdits:\n"
                                  "  env:\n"
                                  "    - \"NVIDIA_VISIBLE_DEVICES=void\"\n"
                                  "  hooks:\n"
                                  "    - hookName: \"createContainer\"\n"
                                  "      path: \"/usr/bin/hook\"\n"
                                  "      args:\n"
                                  "        - \"nvidia-cdi-hook\"\n"
                                  "        - \"update-ldcache\"\n"
                                  "  mounts:\n"
                                  "    - hostPath: \"/h/lib.so\"\n"
                                  "      containerPath: \"/lib.so\"\n"
                                  "      options:\n"
                                  "        - \"ro\"\n"
                                  "        - \"nosuid\"\n";

static void test_format(void **state)
{
    struct cdi_spec *spec = sample_spec();
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(cdi_spec_format(spec, CDI_FORMAT_JSON, NULL, &text, &len), 0);
    assert_string_equal(text, SAMPLE_JSON);
    assert_int_equal(len, strlen(SAMPLE_JSON));
    free(text);
    assert_int_equal(cdi_spec_format(spec, CDI_FORMAT_YAML, NULL, &text, &len), 0);
    assert_string_equal(text, SAMPLE_YAML);
    free(text);
    cdi_spec_free(spec);
}

static void test_format_annotations_and_quoting(void **state)
{
    struct cdi_spec *spec = new_spec("example.com/gpu");
    struct cdi_device *dev = add_device(spec, "a");
    assert_int_equal(cdi_device_set_annotation(dev, "example.com/k", "yes", NULL), 0);
    assert_int_equal(cdi_device_set_annotation(dev, "example.com/k", "no", NULL), 0);
    assert_int_equal(cdi_device_set_annotation(dev, "bad key", "x", NULL), -EINVAL);
    assert_int_equal(cdi_edits_add_env(&dev->edits, "Q", "a \"b\"\n"), 0);
    char *text = NULL;
    assert_int_equal(cdi_spec_format(spec, CDI_FORMAT_YAML, NULL, &text, NULL), 0);
    assert_non_null(strstr(text, "cdiVersion: \"0.6.0\""));
    assert_non_null(strstr(text, "    annotations:\n      \"example.com/k\": \"no\"\n"));
    assert_non_null(strstr(text, "- \"Q=a \\\"b\\\"\\n\""));
    free(text);
    json_t *doc = NULL;
    assert_int_equal(cdi_spec_to_json(spec, NULL, &doc), 0);
    json_t *ann =
        json_object_get(json_array_get(json_object_get(doc, "devices"), 0), "annotations");
    assert_string_equal(json_string_value(json_object_get(ann, "example.com/k")), "no");
    json_decref(doc);
    cdi_spec_free(spec);
}

static void test_format_invalid(void **state)
{
    struct cdi_spec *spec = new_spec("example.com/gpu");
    char *text = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(cdi_spec_format(spec, CDI_FORMAT_JSON, &d, &text, NULL), -EINVAL);
    assert_null(text);
    /* Paths from outside may not be UTF-8; jansson refuses them and we say so. */
    struct cdi_device *dev = add_device(spec, "a");
    assert_int_equal(
        cdi_edits_add_device_node(&dev->edits, &(struct cdi_device_node){.path = "/dev/\xff"}), 0);
    assert_int_equal(cdi_spec_format(spec, CDI_FORMAT_JSON, &d, &text, NULL), -ENOMEM);
    assert_non_null(strstr(d.msg, "UTF-8"));
    cdi_spec_free(spec);
    enum cdi_format f;
    assert_int_equal(cdi_format_parse("yaml", &f), 0);
    assert_int_equal(f, CDI_FORMAT_YAML);
    assert_int_equal(cdi_format_parse("json", &f), 0);
    assert_int_equal(f, CDI_FORMAT_JSON);
    assert_int_equal(cdi_format_parse("toml", &f), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new),
        cmocka_unit_test(test_min_version),
        cmocka_unit_test(test_declared_version),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_duplicates_and_merge),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_annotations_and_quoting),
        cmocka_unit_test(test_format_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
