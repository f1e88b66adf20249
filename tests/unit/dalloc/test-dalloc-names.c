/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the name-format checkers (src/dalloc/dalloc-names.c) on their own: one table per kind of
 * name, each row a name and either NULL (valid) or a piece of the reason it is refused. Edges are
 * the lengths (63, 253, 32 and one more), the first and last characters, upper case, and the
 * '/'-separated parts of qualified and pool names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dalloc-names.h"

struct row {
    const char *name;
    const char *why; /* NULL: valid; else a substring of the reason */
};

#define LABEL "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
#define SUBDOMAIN "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric"
#define C_ID "a valid C identifier must start with alphabetic character or '_'"

/* A name of n copies of ch (n < 512), in one of a few static buffers so a row can hold two. */
static const char *rep(char ch, size_t n)
{
    static char bufs[4][512];
    static size_t next;
    char *b = bufs[next++ % 4];

    memset(b, ch, n);
    b[n] = '\0';
    return b;
}

static void check(const char *kind, const char *(*fn)(const char *), const struct row *rows,
                  size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *why = fn(rows[i].name);
        if (!rows[i].why && why)
            fail_msg("%s \"%s\": refused (%s), want valid", kind, rows[i].name, why);
        if (rows[i].why && (!why || !strstr(why, rows[i].why)))
            fail_msg("%s \"%s\": got \"%s\", want \"%s\"", kind, rows[i].name,
                     why ? why : "(valid)", rows[i].why);
    }
}

#define CHECK(fn, rows) check(#fn, fn, rows, sizeof(rows) / sizeof(rows[0]))

static void test_dns_label(void **state)
{
    char max[64], over[65];
    const struct row rows[] = {
        {"a", NULL},
        {"0", NULL},
        {"gpu-0", NULL},
        {"a--b", NULL},
        {"9x", NULL},
        {max, NULL},
        {over, "must be no more than 63 characters"},
        {"", LABEL},
        {"-a", LABEL},
        {"a-", LABEL},
        {"dA", LABEL},
        {"a.b", LABEL},
        {"a_b", LABEL},
        {"a b", LABEL},
        {"\xc3\xa9", LABEL},
    };

    (void)state;
    snprintf(max, sizeof(max), "%s", rep('a', 63));
    snprintf(over, sizeof(over), "%s", rep('a', 64));
    CHECK(dalloc_name_dns_label, rows);
}

static void test_dns_subdomain(void **state)
{
    char max[254], over[255], long_label[80];
    const struct row rows[] = {
        {"a", NULL},
        {"class-a", NULL},
        {"gpu.nvidia.com", NULL},
        {"1.2.3", NULL},
        {max, NULL},
        /* the API server limits the whole name only, not each label */
        {long_label, NULL},
        {over, "must be no more than 253 characters"},
        {"", SUBDOMAIN},
        {".a", SUBDOMAIN},
        {"a.", SUBDOMAIN},
        {"a..b", SUBDOMAIN},
        {"a.-b", SUBDOMAIN},
        {"a-.b", SUBDOMAIN},
        {"Gpu.example.com", SUBDOMAIN},
        {"a/b", SUBDOMAIN},
    };

    (void)state;
    snprintf(max, sizeof(max), "%s", rep('a', 253));
    snprintf(over, sizeof(over), "%s", rep('a', 254));
    snprintf(long_label, sizeof(long_label), "%s.com", rep('b', 70));
    CHECK(dalloc_name_dns_subdomain, rows);
}

static void test_driver(void **state)
{
    char max[64], over[65];
    const struct row rows[] = {
        {"a", NULL},
        {"gpu.nvidia.com", NULL},
        {max, NULL},
        {over, "must be no more than 63 characters"},
        {"Bad_Driver", SUBDOMAIN},
        {"GPU.nvidia.com", SUBDOMAIN},
        {"a..b", SUBDOMAIN},
    };

    (void)state;
    snprintf(max, sizeof(max), "%s.com", rep('x', 59));
    snprintf(over, sizeof(over), "%s.com", rep('x', 60));
    CHECK(dalloc_name_driver, rows);
}

static void test_c_identifier(void **state)
{
    char max[33], over[34];
    const struct row rows[] = {
        {"a", NULL},       {"_", NULL},   {"pcieRoot", NULL},
        {"Model_2", NULL}, {max, NULL},   {over, "must be no more than 32 characters"},
        {"", C_ID},        {"2x", C_ID},  {"a-b", C_ID},
        {"a.b", C_ID},     {"a/b", C_ID},
    };

    (void)state;
    snprintf(max, sizeof(max), "%s", rep('Z', 32));
    snprintf(over, sizeof(over), "%s", rep('Z', 33));
    CHECK(dalloc_name_c_identifier, rows);
}

static void test_qualified(void **state)
{
    char dom_max[80], dom_over[80], id_over[80];
    const struct row rows[] = {
        {"memory", NULL},
        {"gpu.nvidia.com/productName", NULL},
        {"resource.kubernetes.io/pcieRoot", NULL},
        {"a/_x", NULL},
        {dom_max, NULL},
        {dom_over, "must be no more than 63 characters"},
        {id_over, "must be no more than 32 characters"},
        {"", C_ID},
        {"1gpu", C_ID},
        {"gpu-count", C_ID},
        {"/x", "the domain must not be empty"},
        {"a.com/", "the name must not be empty"},
        {"A.com/x", SUBDOMAIN},
        {"a.com/x-y", C_ID},
        {"a/b/c", "separated by one '/'"},
    };

    (void)state;
    snprintf(dom_max, sizeof(dom_max), "%s/x", rep('d', 63));
    snprintf(dom_over, sizeof(dom_over), "%s/x", rep('d', 64));
    snprintf(id_over, sizeof(id_over), "a.com/%s", rep('i', 33));
    CHECK(dalloc_name_qualified, rows);
}

static void test_fully_qualified(void **state)
{
    const struct row rows[] = {
        {"gpu.nvidia.com/productName", NULL},   {"a/x", NULL},   {"numa", "must include a domain"},
        {"/x", "the domain must not be empty"}, {"a/x-y", C_ID}, {"a/b/c", "separated by one '/'"},
    };

    (void)state;
    CHECK(dalloc_name_fully_qualified, rows);
}

static void test_pool(void **state)
{
    char max[254], over[255];
    const struct row rows[] = {
        {"p1", NULL},
        {"node-1", NULL},
        {"gpu.example.com/node-1/mig", NULL},
        {max, NULL},
        {over, "must be no more than 253 characters"},
        {"", SUBDOMAIN},
        {"/p", SUBDOMAIN},
        {"p/", SUBDOMAIN},
        {"a//b", SUBDOMAIN},
        {"Pool", SUBDOMAIN},
        {"a/b_c", SUBDOMAIN},
    };

    (void)state;
    /* 126 + '/' + 126 = 253 */
    snprintf(max, sizeof(max), "%s/%s", rep('a', 126), rep('b', 126));
    snprintf(over, sizeof(over), "%s/%s", rep('a', 126), rep('b', 127));
    CHECK(dalloc_name_pool, rows);
}

static void test_label_key(void **state)
{
    char name_max[64], name_over[65], prefix_over[300];
    const struct row rows[] = {
        {"k", NULL},
        {"gpu", NULL},
        {"Key_1.x-y", NULL},
        {"example.com/unhealthy", NULL},
        {"nvidia.com/GPU.Xid-79", NULL},
        {name_max, NULL},
        {name_over, "name part must be no more than 63 characters"},
        {prefix_over, "prefix part must be no more than 253 characters"},
        {"", "name part must be non-empty"},
        {"example.com/", "name part must be non-empty"},
        {"/k", "prefix part must be non-empty"},
        {"Example.com/k", "prefix part a lowercase RFC 1123 subdomain"},
        {"-k", "name part must consist of alphanumeric characters"},
        {"k_", "name part must consist of alphanumeric characters"},
        {"a b", "name part must consist of alphanumeric characters"},
        {"a/b/c", "with an optional DNS subdomain prefix and '/'"},
    };

    (void)state;
    snprintf(name_max, sizeof(name_max), "%s", rep('K', 63));
    snprintf(name_over, sizeof(name_over), "%s", rep('K', 64));
    snprintf(prefix_over, sizeof(prefix_over), "%s/k", rep('p', 254));
    CHECK(dalloc_name_label_key, rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dns_label), cmocka_unit_test(test_dns_subdomain),
        cmocka_unit_test(test_driver),    cmocka_unit_test(test_c_identifier),
        cmocka_unit_test(test_qualified), cmocka_unit_test(test_fully_qualified),
        cmocka_unit_test(test_pool),      cmocka_unit_test(test_label_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
