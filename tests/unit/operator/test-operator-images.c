/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVIDIA's image rule, one row per case: repository/image/version composition, digests, the image
 * alone, the environment fallbacks (NVIDIA's variable first, then GPUPLANE_IMAGE for gpuplane's
 * components), incomplete fields, and the driver's OS suffix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "operator-policy-internal.h"

/* The environment a row sees: "NAME=value" entries. */
static const char *const *test_env;

static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; test_env && test_env[i]; i++)
        if (strncmp(test_env[i], name, n) == 0 && test_env[i][n] == '=')
            return test_env[i] + n + 1;
    return NULL;
}

struct image_case {
    enum op_component comp;
    const char *repository, *image, *version;
    const char *env[4];
    const char *os_tag;
    const char *want;  /* the image, or NULL for an error */
    const char *error; /* a substring of the error */
};

static const struct image_case CASES[] = {
    {OP_DEVICE_PLUGIN,
     "registry.local/gpuplane",
     "gpuplane",
     "v0.2.0",
     {NULL},
     NULL,
     "registry.local/gpuplane/gpuplane:v0.2.0",
     NULL},
    {OP_DEVICE_PLUGIN,
     "registry.local",
     "gpuplane",
     "sha256:abcd",
     {NULL},
     NULL,
     "registry.local/gpuplane@sha256:abcd",
     NULL},
    /* NVIDIA's images for the components gpuplane serves stand for gpuplane's (a ClusterPolicy of
     * NVIDIA's operator, unchanged), wherever they are mirrored and however they are named */
    {OP_DEVICE_PLUGIN,
     "nvcr.io/nvidia",
     "k8s-device-plugin",
     "v0.20.0",
     {"GPUPLANE_IMAGE=gp"},
     NULL,
     "gp",
     NULL},
    {OP_GFD,
     NULL,
     "mirror.local/nvidia/k8s-device-plugin@sha256:12",
     NULL,
     {"GPUPLANE_IMAGE=gp"},
     NULL,
     "gp",
     NULL},
    {OP_DCGM_EXPORTER,
     "nvcr.io/nvidia/k8s",
     "dcgm-exporter",
     "4.2.3-4.1.3-ubuntu22.04",
     {"GPUPLANE_IMAGE=gp"},
     NULL,
     "gp",
     NULL},
    {OP_VALIDATOR,
     NULL,
     NULL,
     NULL,
     {"VALIDATOR_IMAGE=nvcr.io/nvidia/gpu-operator:v26.7.0", "GPUPLANE_IMAGE=gp"},
     NULL,
     "gp",
     NULL},
    {OP_DEVICE_PLUGIN,
     "nvcr.io/nvidia",
     "k8s-device-plugin",
     "v0.20.0",
     {NULL},
     NULL,
     NULL,
     "spec.devicePlugin: nvcr.io/nvidia/k8s-device-plugin:v0.20.0 is NVIDIA's image, which "
     "cannot run gpuplane; set GPUPLANE_IMAGE"},
    /* NVIDIA's own components keep NVIDIA's images */
    {OP_TOOLKIT,
     "nvcr.io/nvidia/k8s",
     "container-toolkit",
     "v1.20.0",
     {"GPUPLANE_IMAGE=gp"},
     NULL,
     "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
     NULL},
    /* image alone: verbatim (what digest-rewriting tools set) */
    {OP_GFD,
     NULL,
     "registry.local/gpuplane@sha256:ffff",
     NULL,
     {"GFD_IMAGE=x"},
     NULL,
     "registry.local/gpuplane@sha256:ffff",
     NULL},
    /* the fields win over the environment */
    {OP_VALIDATOR,
     "r",
     "i",
     "v",
     {"VALIDATOR_IMAGE=env", "GPUPLANE_IMAGE=gp"},
     NULL,
     "r/i:v",
     NULL},
    /* nothing set: NVIDIA's variable, then GPUPLANE_IMAGE */
    {OP_VALIDATOR,
     NULL,
     NULL,
     NULL,
     {"VALIDATOR_IMAGE=env/validator:1", "GPUPLANE_IMAGE=gp"},
     NULL,
     "env/validator:1",
     NULL},
    {OP_VALIDATOR,
     NULL,
     NULL,
     NULL,
     {"GPUPLANE_IMAGE=ghcr.io/x/gpuplane:0.1.0"},
     NULL,
     "ghcr.io/x/gpuplane:0.1.0",
     NULL},
    {OP_DEVICE_PLUGIN,
     NULL,
     NULL,
     NULL,
     {"DEVICE_PLUGIN_IMAGE=dp:1", "GPUPLANE_IMAGE=gp"},
     NULL,
     "dp:1",
     NULL},
    {OP_DCGM_EXPORTER, NULL, NULL, NULL, {"GPUPLANE_IMAGE=gp"}, NULL, "gp", NULL},
    {OP_DCGM_EXPORTER, NULL, NULL, NULL, {"DCGM_EXPORTER_IMAGE=ex"}, NULL, "ex", NULL},
    {OP_GFD, NULL, NULL, NULL, {"GFD_IMAGE=", "GPUPLANE_IMAGE=gp"}, NULL, "gp", NULL},
    {OP_DRA_DRIVER, NULL, NULL, NULL, {"GPUPLANE_IMAGE=gp"}, NULL, "gp", NULL},
    {OP_TOOLKIT, NULL, NULL, NULL, {"CONTAINER_TOOLKIT_IMAGE=tk:1"}, NULL, "tk:1", NULL},
    /* NVIDIA's own images never fall back to gpuplane's */
    {OP_TOOLKIT,
     NULL,
     NULL,
     NULL,
     {"GPUPLANE_IMAGE=gp"},
     NULL,
     NULL,
     "spec.toolkit: no image: set repository, image and version, or CONTAINER_TOOLKIT_IMAGE in "
     "the operator's environment"},
    {OP_DRIVER, NULL, NULL, NULL, {"GPUPLANE_IMAGE=gp"}, NULL, NULL, "spec.driver: no image"},
    {OP_DRA_DRIVER,
     NULL,
     NULL,
     NULL,
     {NULL},
     NULL,
     NULL,
     "spec.draDriver: no image: set repository, image and version, or GPUPLANE_IMAGE in the "
     "operator's environment"},
    {OP_GFD, NULL, NULL, NULL, {NULL}, NULL, NULL, "or GFD_IMAGE or GPUPLANE_IMAGE in"},
    /* incomplete fields are an error (v26.7), not a concatenation */
    {OP_GFD,
     "nvcr.io/nvidia",
     NULL,
     "v1",
     {"GPUPLANE_IMAGE=gp"},
     NULL,
     NULL,
     "spec.gfd: repository, image and version must all be set (repository=nvcr.io/nvidia, "
     "image=, version=v1)"},
    {OP_GFD, NULL, "x", "v1", {NULL}, NULL, NULL, "must all be set"},
    {OP_GFD, "r", "x", NULL, {NULL}, NULL, NULL, "must all be set"},
    /* the driver's OS suffix */
    {OP_DRIVER,
     "nvcr.io/nvidia",
     "driver",
     "595.91.07",
     {NULL},
     "ubuntu22.04",
     "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04",
     NULL},
    {OP_DRIVER,
     "nvcr.io/nvidia",
     "driver",
     "595.91.07",
     {NULL},
     NULL,
     "nvcr.io/nvidia/driver:595.91.07",
     NULL},
    {OP_DRIVER,
     "nvcr.io/nvidia",
     "driver",
     "sha256:1234",
     {NULL},
     "ubuntu22.04",
     "nvcr.io/nvidia/driver@sha256:1234",
     NULL},
    {OP_DRIVER,
     NULL,
     NULL,
     NULL,
     {"DRIVER_IMAGE=nvcr.io/nvidia/driver:550"},
     "rhel9",
     "nvcr.io/nvidia/driver:550-rhel9",
     NULL},
    /* only the driver gets the suffix */
    {OP_TOOLKIT,
     "nvcr.io/nvidia/k8s",
     "container-toolkit",
     "v1.20.0",
     {NULL},
     "ubuntu22.04",
     "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
     NULL},
};

static void test_image_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        const struct image_case *t = &CASES[i];
        struct op_policy p;
        struct diag d;
        char *out = NULL;

        memset(&p, 0, sizeof(p));
        p.comp[t->comp].repository = (char *)t->repository;
        p.comp[t->comp].image = (char *)t->image;
        p.comp[t->comp].version = (char *)t->version;
        test_env = t->env;
        diag_init(&d);
        int r = op_component_image(&p, t->comp, fake_getenv, t->os_tag, &out, &d);
        if (t->want) {
            if (r < 0)
                fail_msg("case %zu: %s", i, d.msg);
            assert_string_equal(out, t->want);
            free(out);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_null(out);
            if (!strstr(d.msg, t->error))
                fail_msg("case %zu: message \"%s\", want \"%s\"", i, d.msg, t->error);
        }
    }
    test_env = NULL;
}

/* The driver manager's image: its own section and variable, no gpuplane fallback. */
static void test_image_path_sections(void **state)
{
    (void)state;
    struct op_component_spec s;
    const char *const env[] = {"DRIVER_MANAGER_IMAGE=dm:1", NULL};
    struct diag d;
    char *out = NULL;

    memset(&s, 0, sizeof(s));
    test_env = env;
    assert_int_equal(op_image_path(&s, "spec.driver.manager", "DRIVER_MANAGER_IMAGE", NULL,
                                   fake_getenv, &out, &d),
                     0);
    assert_string_equal(out, "dm:1");
    free(out);
    out = NULL;
    test_env = NULL;
    diag_init(&d);
    assert_int_equal(op_image_path(&s, "spec.driver.manager", "DRIVER_MANAGER_IMAGE", NULL,
                                   fake_getenv, &out, &d),
                     -EINVAL);
    assert_non_null(strstr(d.msg, "spec.driver.manager: no image"));
    /* No getenv at all: nothing from the environment. */
    diag_init(&d);
    assert_int_equal(op_image_path(&s, "k", "A", "B", NULL, &out, &d), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_image_table),
        cmocka_unit_test(test_image_path_sections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
