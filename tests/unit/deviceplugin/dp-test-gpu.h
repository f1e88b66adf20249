/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the device-plugin tests of resources, health, Allocate and GetPreferredAllocation share: a
 * node from the mock NVML library with a bundled profile (paths from the build: MOCK_NVML_LIB,
 * NODES_DIR), a config loaded from text, the resources built from both, and request messages
 * assembled from string lists.
 */
#pragma once

#include "dp-test.h"
#include "dp.h"

struct node {
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct dp_config cfg;
    struct dp_resources *res;
};

static inline void node_open(struct node *n, const char *profile, const char *config)
{
    char path[4096];
    struct diag d;
    diag_init(&d);
    test_clear_env();
    snprintf(path, sizeof(path), "%s/%s.yaml", NODES_DIR, profile);
    assert_int_equal(setenv("MOCK_NVML_PROFILE", path, 1), 0);
    assert_int_equal(setenv("MOCK_NVML_EVENTS", "/dev/null", 1), 0);
    int r = gpu_nvml_open(MOCK_NVML_LIB, &d, &n->nvml);
    if (r < 0)
        fail_msg("gpu_nvml_open: %s", d.msg);
    assert_int_equal(gpu_inventory_read(n->nvml, NULL, &d, &n->inv), 0);
    test_load_ok(&n->cfg, config);
    assert_int_equal(dp_config_validate(&n->cfg, &d), 0);
}

/* Builds the resources (mig_minors may be NULL); asserts success. */
static inline void node_build(struct node *n, const char *mig_minors)
{
    struct diag d;
    diag_init(&d);
    n->res = dp_resources_free(n->res);
    int r = dp_resources_build(&n->cfg, n->inv, mig_minors, &d, &n->res);
    if (r < 0)
        fail_msg("dp_resources_build: %s", d.msg);
}

static inline struct node *node_new(const char *profile, const char *config)
{
    struct node *n = calloc(1, sizeof(*n));
    assert_non_null(n);
    node_open(n, profile, config);
    node_build(n, NULL);
    return n;
}

static inline void node_free(struct node *n)
{
    dp_resources_free(n->res);
    gpu_inventory_free(n->inv);
    gpu_nvml_close(n->nvml);
    dp_config_release(&n->cfg);
    free(n);
}

static inline struct dp_resource *node_resource(const struct node *n, const char *name)
{
    struct dp_resource *r = dp_resources_get(n->res, name);
    if (!r)
        fail_msg("no resource %s", name);
    return r;
}

/* The ids of a list "a,b,c" as a NULL-terminated array inside one allocation; free() it. */
static inline char **test_split(const char *list, size_t *ret_n)
{
    size_t n = 0, len = strlen(list);
    for (const char *p = list; *p; p++)
        n += *p == ',';
    n += len > 0;
    char **v = calloc(1, (n + 1) * sizeof(char *) + len + 1);
    assert_non_null(v);
    char *s = (char *)(v + n + 1);
    memcpy(s, list, len + 1);
    for (size_t i = 0; i < n; i++) {
        v[i] = s;
        s = strchr(s, ',');
        if (s)
            *s++ = '\0';
    }
    *ret_n = n;
    return v;
}

/* The strings of v joined with ','; free() it. */
static inline char *test_join(char **v, size_t n)
{
    struct strbuf sb = STRBUF_INIT;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(strbuf_addf(&sb, "%s%s", i ? "," : "", v[i]), 0);
    return strbuf_detach(&sb, NULL);
}

/* The ids of the resource's devices i..j (inclusive) joined with ','; free() it. */
static inline char *test_ids(const struct dp_resource *r, size_t from, size_t to)
{
    struct strbuf sb = STRBUF_INIT;
    for (size_t i = from; i <= to; i++)
        assert_int_equal(strbuf_addf(&sb, "%s%s", i > from ? "," : "", r->devices[i].id), 0);
    return strbuf_detach(&sb, NULL);
}
