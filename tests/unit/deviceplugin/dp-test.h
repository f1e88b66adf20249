/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the device-plugin tests share: cmocka, loading a config from text with the outcome checked,
 * the effective configuration as compact JSON, and a clean environment (every variable of the
 * settings table unset) so a developer's shell cannot change a result.
 */
#pragma once

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dp-config.h"

static inline void test_clear_env(void)
{
    for (size_t i = 0; i < dp_n_settings; i++) {
        if (dp_settings[i].env)
            unsetenv(dp_settings[i].env);
        if (dp_settings[i].env_alias)
            unsetenv(dp_settings[i].env_alias);
    }
}

static inline int test_setup_env(void **state)
{
    (void)state;
    test_clear_env();
    return 0;
}

/* Loads text on top of the defaults into cfg (which the caller releases); asserts success. */
static inline void test_load_ok(struct dp_config *cfg, const char *text)
{
    struct diag d;
    diag_init(&d);
    assert_int_equal(dp_config_init(cfg), 0);
    int r = dp_config_load_string(cfg, "c.yaml", text, strlen(text), &d);
    if (r < 0)
        print_error("unexpected failure: %s\n", d.msg);
    assert_int_equal(r, 0);
}

/* The config as compact JSON with sorted keys; the caller frees. */
static inline char *test_json(const struct dp_config *cfg)
{
    json_t *j = NULL;
    assert_int_equal(dp_config_to_json(cfg, &j), 0);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    assert_non_null(s);
    return s;
}

/* The JSON of one member path ("flags.migStrategy") of the effective config; caller frees. */
static inline char *test_json_at(const struct dp_config *cfg, const char *path)
{
    json_t *j = NULL, *v;
    char part[64];
    assert_int_equal(dp_config_to_json(cfg, &j), 0);
    v = j;
    for (const char *p = path; v && *p;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        snprintf(part, sizeof(part), "%.*s", (int)n, p);
        v = json_is_array(v) ? json_array_get(v, strtoul(part, NULL, 10))
                             : json_object_get(v, part);
        p += n + (dot ? 1 : 0);
    }
    assert_non_null(v);
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(j);
    assert_non_null(s);
    return s;
}

static inline void test_assert_json_at(const struct dp_config *cfg, const char *path,
                                       const char *want)
{
    char *got = test_json_at(cfg, path);
    if (strcmp(got, want) != 0)
        print_error("%s: got %s, want %s\n", path, got, want);
    assert_string_equal(got, want);
    free(got);
}
