/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the client's pure pieces: kube_path and its name checks, Status parsing into reason and
 * message, the watch stream's line splitter and event decoder, and the token bucket's arithmetic.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube-internal.h"

static void test_path(void **state)
{
    static const struct {
        const char *gv, *res, *ns, *name, *want;
        int r;
    } cases[] = {
        {"v1", "pods", "default", "p-1", "/api/v1/namespaces/default/pods/p-1", 0},
        {"v1", "nodes", NULL, "node.example.com", "/api/v1/nodes/node.example.com", 0},
        {"resource.k8s.io/v1", "resourceslices", NULL, NULL,
         "/apis/resource.k8s.io/v1/resourceslices", 0},
        {"resource.k8s.io/v1", "resourceclaims", "ns", NULL,
         "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims", 0},
        {"v1", "pods", "Default", "p", NULL, -EINVAL}, /* upper case */
        {"v1", "pods", "a.b", "p", NULL, -EINVAL},     /* a namespace is a label: no dots */
        {"v1", "pods", "-ns", "p", NULL, -EINVAL},     /* starts with '-' */
        {"v1", "pods", "ns", "../secrets", NULL, -EINVAL},
        {"v1", "pods", "ns", "a/b", NULL, -EINVAL},
        {"v1", "pods", "ns", "a?watch=1", NULL, -EINVAL},
        {"v1", "pods", "ns", "a..b", NULL, -EINVAL}, /* empty label */
        {"v1", "pods", "ns", "", NULL, -EINVAL},
        {"v1", "pods", "ns", "x.", NULL, -EINVAL},
        {"v1", "po ds", NULL, NULL, NULL, -EINVAL},
        {"../v1", "pods", NULL, NULL, NULL, -EINVAL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char buf[256];
        struct diag d;
        diag_init(&d);
        int r =
            kube_path(buf, sizeof(buf), cases[i].gv, cases[i].res, cases[i].ns, cases[i].name, &d);
        if (r != cases[i].r)
            fail_msg("case %zu: %d %s", i, r, d.msg);
        if (r == 0)
            assert_string_equal(buf, cases[i].want);
        else
            assert_true(strlen(d.msg) > 0);
    }

    /* a label of 63 characters is fine, 64 is not; a name of 253 is fine, 254 is not */
    char label[70], name[260], buf[512];
    struct diag d;
    memset(label, 'a', 63);
    label[63] = '\0';
    assert_int_equal(kube_path(buf, sizeof(buf), "v1", "pods", label, "x", &d), 0);
    label[63] = 'a';
    label[64] = '\0';
    assert_int_equal(kube_path(buf, sizeof(buf), "v1", "pods", label, "x", &d), -EINVAL);
    for (size_t i = 0; i < 253; i++)
        name[i] = i % 2 ? '.' : 'b';
    name[253] = '\0';
    assert_int_equal(kube_path(buf, sizeof(buf), "v1", "nodes", NULL, name, &d), 0);
    name[253] = '.';
    name[254] = 'b';
    name[255] = '\0';
    assert_int_equal(kube_path(buf, sizeof(buf), "v1", "nodes", NULL, name, &d), -EINVAL);

    /* too small a buffer */
    assert_int_equal(kube_path(buf, 10, "v1", "pods", "default", "p", &d), -ENAMETOOLONG);
}

static void describe(int status, const char *body, char *reason, char *message)
{
    json_t *v = body ? json_loads(body, 0, NULL) : NULL;
    kube_status_describe(status, v, body, body ? strlen(body) : 0, reason, 64, message, 256);
    json_decref(v);
}

static void test_status(void **state)
{
    char reason[64], message[256];
    describe(404,
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
             "\"resourceclaims.resource.k8s.io \\\"x\\\" not found\",\"reason\":\"NotFound\","
             "\"code\":404}",
             reason, message);
    assert_string_equal(reason, "NotFound");
    assert_string_equal(message, "resourceclaims.resource.k8s.io \"x\" not found");

    /* a Status without reason or message: named after the HTTP status */
    describe(409, "{\"kind\":\"Status\",\"code\":409}", reason, message);
    assert_string_equal(reason, "Conflict");
    assert_string_equal(message, "HTTP 409");

    /* not a Status: a proxy's page, cut short and made printable */
    describe(503, "<html>\n<body>upstream\tdown</body></html>\n", reason, message);
    assert_string_equal(reason, "ServiceUnavailable");
    assert_string_equal(message, "HTTP 503: <html> <body>upstream down</body></html>");
    char big[1000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    describe(500, big, reason, message);
    assert_int_equal(strlen(message), strlen("HTTP 500: ") + 200);

    describe(418, NULL, reason, message);
    assert_string_equal(reason, "");
    assert_string_equal(message, "HTTP 418");

    /* a JSON body that is not a Status */
    describe(400, "{\"error\":\"bad\"}", reason, message);
    assert_string_equal(reason, "BadRequest");
    assert_string_equal(message, "HTTP 400: {\"error\":\"bad\"}");
}

static void test_lines(void **state)
{
    struct strbuf buf = STRBUF_INIT;
    char *line = NULL;
    size_t len;
    assert_int_equal(strbuf_addstr(&buf, "{\"a\":1}\n{\"b\""), 0);
    assert_int_equal(kube_lines_next(&buf, &line, &len), 0);
    assert_non_null(line);
    assert_string_equal(line, "{\"a\":1}");
    assert_int_equal(len, 7);
    free(line);
    assert_int_equal(kube_lines_next(&buf, &line, &len), 0);
    assert_null(line); /* incomplete */
    assert_int_equal(strbuf_addstr(&buf, ":2}\n\n"), 0);
    assert_int_equal(kube_lines_next(&buf, &line, &len), 0);
    assert_string_equal(line, "{\"b\":2}");
    free(line);
    assert_int_equal(kube_lines_next(&buf, &line, &len), 0);
    assert_string_equal(line, "");
    free(line);
    assert_int_equal(buf.len, 0);
    strbuf_release(&buf);
}

static void test_decode(void **state)
{
    static const struct {
        const char *line;
        int r;
        enum kube_wire_event type;
        const char *name;
    } cases[] = {
        {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}", 0, KUBE_WIRE_ADDED,
         "a"},
        {"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\r", 0,
         KUBE_WIRE_MODIFIED, "b"},
        {"  {\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}  ", 0,
         KUBE_WIRE_DELETED, "c"},
        {"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}", 0,
         KUBE_WIRE_BOOKMARK, NULL},
        {"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}", 0, KUBE_WIRE_ERROR,
         NULL},
        {"", -ENODATA, 0, NULL},
        {"   \r", -ENODATA, 0, NULL},
        {"{\"type\":\"ADDED\"", -EINVAL, 0, NULL},
        {"[1]", -EINVAL, 0, NULL},
        {"{\"object\":{}}", -EINVAL, 0, NULL},
        {"{\"type\":\"ADDED\",\"object\":[]}", -EINVAL, 0, NULL},
        {"{\"type\":\"RENAMED\",\"object\":{}}", -EINVAL, 0, NULL},
        {"{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}", -EINVAL, 0, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        enum kube_wire_event type = KUBE_WIRE_ERROR;
        json_t *obj = NULL;
        struct diag d;
        diag_init(&d);
        int r = kube_watch_decode(cases[i].line, strlen(cases[i].line), &type, &obj, &d);
        if (r != cases[i].r)
            fail_msg("case %zu: %d %s", i, r, d.msg);
        if (r == 0) {
            assert_int_equal(type, cases[i].type);
            assert_true(json_is_object(obj));
            if (cases[i].name)
                assert_string_equal(
                    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")),
                    cases[i].name);
            json_decref(obj);
        } else {
            assert_null(obj);
            if (r == -EINVAL)
                assert_non_null(strstr(d.msg, "watch event"));
        }
    }
}

static void test_bucket(void **state)
{
    struct kube_bucket b;
    /* 5 qps, burst 2: two at once, then one every 200 ms */
    kube_bucket_init(&b, 5, 2, 1000);
    assert_int_equal(kube_bucket_take(&b, 1000), 0);
    assert_int_equal(kube_bucket_take(&b, 1000), 0);
    assert_int_equal(kube_bucket_take(&b, 1000), 200);
    assert_int_equal(kube_bucket_take(&b, 1100), 100);
    assert_int_equal(kube_bucket_take(&b, 1200), 0);
    assert_int_equal(kube_bucket_take(&b, 1200), 200);
    /* a long quiet spell saves up at most burst tokens */
    assert_int_equal(kube_bucket_take(&b, 100000), 0);
    assert_int_equal(kube_bucket_take(&b, 100000), 0);
    assert_int_equal(kube_bucket_take(&b, 100000), 200);
    /* time going backwards adds nothing */
    assert_int_equal(kube_bucket_take(&b, 50000), 200);

    /* defaults: 5 qps, burst 10 */
    kube_bucket_init(&b, 0, 0, 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(kube_bucket_take(&b, 0), 0);
    assert_int_equal(kube_bucket_take(&b, 0), 200);

    /* a high rate never asks to wait 0 ms while empty */
    kube_bucket_init(&b, 100000, 1, 0);
    assert_int_equal(kube_bucket_take(&b, 0), 0);
    assert_int_equal(kube_bucket_take(&b, 0), 1);

    /* over 10 s at 5 qps, burst 1: 50 (+1) requests get through, no more */
    kube_bucket_init(&b, 5, 1, 0);
    unsigned granted = 0;
    for (uint64_t t = 0; t <= 10000; t++)
        while (kube_bucket_take(&b, t) == 0)
            granted++;
    assert_int_equal(granted, 51);
}

static void test_add_query(void **state)
{
    char *s = kube_path_add_query("/api/v1/pods", "watch=1");
    assert_string_equal(s, "/api/v1/pods?watch=1");
    free(s);
    s = kube_path_add_query("/api/v1/pods?labelSelector=a%3Db", "watch=1");
    assert_string_equal(s, "/api/v1/pods?labelSelector=a%3Db&watch=1");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path),   cmocka_unit_test(test_status),
        cmocka_unit_test(test_lines),  cmocka_unit_test(test_decode),
        cmocka_unit_test(test_bucket), cmocka_unit_test(test_add_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
