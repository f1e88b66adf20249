/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of klog-format logging: the exact text and JSON layouts, value quoting, verbosity, the line
 * cap, and that lines from several threads never interleave. Output goes to a memfd via log_set_fd.
 */
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base-log.h"

#define UE "caf\xc3\xa9"

static int out_fd = -1;

static int setup(void **state)
{
    out_fd = memfd_create("log", MFD_CLOEXEC);
    if (out_fd < 0)
        return -1;
    log_set_fd(out_fd);
    return 0;
}

static int teardown(void **state)
{
    log_set_fd(STDERR_FILENO);
    log_setup(0, LOG_FORMAT_TEXT);
    close(out_fd);
    return 0;
}

/* Everything logged since the last call; the caller frees it. */
static char *take_output(void)
{
    off_t size = lseek(out_fd, 0, SEEK_END);
    char *buf;

    assert_true(size >= 0);
    buf = calloc(1, (size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(pread(out_fd, buf, (size_t)size, 0), size);
    assert_int_equal(ftruncate(out_fd, 0), 0);
    assert_int_equal(lseek(out_fd, 0, SEEK_SET), 0);
    return buf;
}

static void assert_matches(const char *s, const char *pattern)
{
    regex_t re;
    int r;

    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    r = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    if (r != 0)
        print_error("\"%s\" does not match /%s/\n", s, pattern);
    assert_int_equal(r, 0);
}

static void test_text_format(void **state)
{
    _cleanup_free_ char *out = NULL;
    char tid[16];
    int line;

    log_setup(0, LOG_FORMAT_TEXT);
    /* One line each: compilers disagree on __LINE__ of a call that spans lines. */
    line = __LINE__ + 1;
    log_info("device unhealthy", "uuid", "GPU-1", "xid", LOG_INT(79), "f", "1.5", "b", "true");
    log_info("more", "s", "a b", "nil", NULL, "z", "007");
    out = take_output();
    assert_matches(out, "^I[01][0-9][0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{6} "
                        "[ 0-9]{7} test-base-log\\.c:[0-9]+\\] \"device unhealthy\" uuid=\"GPU-1\" "
                        "xid=79 f=1\\.5 b=true\nI.*\\] \"more\" s=\"a b\" nil=<nil> z=\"007\"\n$");
    /* The fixed columns: thread id right-aligned in 7, then the caller. */
    snprintf(tid, sizeof(tid), " %7d ", (int)gettid());
    assert_int_equal(memcmp(out + 21, tid, 9), 0);
    {
        char caller[64];

        snprintf(caller, sizeof(caller), " test-base-log.c:%d] ", line);
        assert_non_null(strstr(out, caller));
    }
}

static void test_text_severity_escaping(void **state)
{
    _cleanup_free_ char *out = NULL;

    log_warn("say \"hi\"\n\tnow\\", "k", "line1\nline2", "bin", "\x01\x7f\xff");
    log_error("failed", "err", "-5x");
    out = take_output();
    assert_matches(out, "^W[0-9]{4} .*\\] \"say \\\\\"hi\\\\\"\\\\n\\\\tnow\\\\\\\\\" "
                        "k=\"line1\\\\nline2\" bin=\"\\\\x01\\\\x7f\\\\xff\"\nE[0-9]{4} .*\\] "
                        "\"failed\" err=\"-5x\"\n$");
}

static void test_json_format(void **state)
{
    _cleanup_free_ char *out = NULL;
    json_t *j;
    json_error_t err;
    const char *tail;
    char caller[64];
    int line;

    log_setup(0, LOG_FORMAT_JSON);
    line = __LINE__ + 1;
    log_info("hello \"w\"", "uuid", "GPU-1", "n", "79", "ok", "false", "nil", NULL, "u", UE);
    out = take_output();
    /* One line. */
    assert_true(strchr(out, '\n') == out + strlen(out) - 1);
    j = json_loads(out, 0, &err);
    assert_non_null(j);
    assert_true(json_is_real(json_object_get(j, "ts")));
    assert_true(json_real_value(json_object_get(j, "ts")) > 1.6e9);
    snprintf(caller, sizeof(caller), "test-base-log.c:%d", line);
    assert_string_equal(json_string_value(json_object_get(j, "caller")), caller);
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "hello \"w\"");
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 79);
    assert_true(json_is_false(json_object_get(j, "ok")));
    assert_true(json_is_null(json_object_get(j, "nil")));
    assert_string_equal(json_string_value(json_object_get(j, "u")), "caf\xc3\xa9");
    json_decref(j);
    /* Key order as klog writes it. */
    assert_int_equal(strncmp(out, "{\"ts\":", 6), 0);
    tail = strstr(out, ",\"caller\":");
    assert_non_null(tail);
    assert_matches(tail,
                   "^,\"caller\":\"test-base-log\\.c:[0-9]+\",\"msg\":\"hello \\\\\"w\\\\\"\","
                   "\"v\":0,\"uuid\":\"GPU-1\",\"n\":79,\"ok\":false,\"nil\":null,"
                   "\"u\":\"caf\xc3\xa9\"}\n$");
}

static void test_verbosity(void **state)
{
    _cleanup_free_ char *none = NULL;
    _cleanup_free_ char *some = NULL;

    log_setup(0, LOG_FORMAT_JSON);
    assert_int_equal(log_verbosity(), 0);
    log_debug(2, "hidden");
    none = take_output();
    assert_string_equal(none, "");
    log_setup(3, LOG_FORMAT_JSON);
    assert_int_equal(log_verbosity(), 3);
    log_debug(2, "shown", "k", "v");
    log_debug(4, "hidden");
    some = take_output();
    assert_matches(some, "^\\{\"ts\":[0-9]+\\.[0-9]{6},\"caller\":\"test-base-log\\.c:[0-9]+\","
                         "\"msg\":\"shown\",\"v\":2,\"k\":\"v\"\\}\n$");
}

static void test_truncation(void **state)
{
    _cleanup_free_ char *big = malloc(40000);
    _cleanup_free_ char *out = NULL;
    size_t len;

    assert_non_null(big);
    memset(big, 'x', 39999);
    big[39999] = '\0';
    log_setup(0, LOG_FORMAT_TEXT);
    log_info("big", "v", big);
    out = take_output();
    len = strlen(out);
    assert_true(len <= 16384);
    assert_true(len > 16000);
    assert_string_equal(out + len - 4, "...\n");
    assert_null(memchr(out, '\n', len - 1));
}

static void test_format_parse(void **state)
{
    enum log_format f = LOG_FORMAT_TEXT;

    assert_int_equal(log_format_parse("json", &f), 0);
    assert_int_equal(f, LOG_FORMAT_JSON);
    assert_int_equal(log_format_parse("text", &f), 0);
    assert_int_equal(f, LOG_FORMAT_TEXT);
    f = LOG_FORMAT_JSON;
    assert_int_equal(log_format_parse("yaml", &f), -EINVAL);
    assert_int_equal(f, LOG_FORMAT_JSON);
    assert_int_equal(log_format_parse(NULL, &f), -EINVAL);
    assert_string_equal(LOG_INT(-9223372036854775807LL - 1), "-9223372036854775808");
}

#define THREADS 4
#define LINES 300

static void *log_many(void *arg)
{
    for (int i = 0; i < LINES; i++)
        log_info("from thread", "t", (const char *)arg, "i", LOG_INT(i), "pad",
                 "0123456789012345678901234567890123456789");
    return NULL;
}

static void test_threads(void **state)
{
    static const char *const names[THREADS] = {"a", "b", "c", "d"};
    pthread_t th[THREADS];
    _cleanup_free_ char *out = NULL;
    size_t lines = 0;
    regex_t re;

    log_setup(0, LOG_FORMAT_TEXT);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, log_many, (void *)names[i]), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    out = take_output();
    assert_int_equal(regcomp(&re,
                             "^I[0-9]{4} [0-9:.]{15} [ 0-9]{7} test-base-log\\.c:[0-9]+\\] "
                             "\"from thread\" t=\"[abcd]\" i=[0-9]+ pad=\"[0-9]{40}\"$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int r = regexec(&re, l, 0, NULL, 0);

        if (r != 0)
            print_error("mangled line: %s\n", l);
        assert_int_equal(r, 0);
        lines++;
    }
    regfree(&re);
    assert_int_equal(lines, THREADS * LINES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_format), cmocka_unit_test(test_text_severity_escaping),
        cmocka_unit_test(test_json_format), cmocka_unit_test(test_verbosity),
        cmocka_unit_test(test_truncation),  cmocka_unit_test(test_format_parse),
        cmocka_unit_test(test_threads),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
