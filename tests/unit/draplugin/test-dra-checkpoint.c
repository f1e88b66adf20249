/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the DRA driver's checkpoint: the round trip, the documented checksum (checked against a
 * CRC-32 written here independently), every truncation and many byte flips of a sample file, the
 * version, a boot ID change, claim UIDs that try to escape a directory, field-by-field validation,
 * the file's mode and atomic replacement when a write fails. Each test works in its own temporary
 * directory, removed afterwards.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dra-checkpoint.h"
#include "test-tmpdir.h"

#define UID_A "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a69"
#define UID_B "c3d14e5f-6a7b-4c8d-9e0f-a1b2c3d4e5f6"
#define BOOT "9f3c2a1e-5b7d-4e8f-a0b1-c2d3e4f5a6b7"
#define BOOT2 "1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d"

struct fixture {
    char dir[64];
    char *path; /* <dir>/checkpoint.json */
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (!f)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_dra_ckpt_XXXXXX");
    if (!mkdtemp(f->dir) || asprintf(&f->path, "%s/checkpoint.json", f->dir) < 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int r;

    chmod(f->dir, 0700);
    r = test_tmpdir_remove(f->dir);
    free(f->path);
    free(f);
    return r == 0 ? 0 : -1;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

/* A bit-at-a-time CRC-32 (IEEE), independent of the module's table-driven one. */
static uint32_t ref_crc32(const char *s, size_t len)
{
    uint32_t crc = 0xffffffffu;

    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned char)s[i];
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
    }
    return ~crc;
}

static json_t *sample_devices(void)
{
    json_t *v =
        json_loads("[{\"requests\":[\"gpu\"],\"poolName\":\"node-a\",\"deviceName\":\"gpu-0\","
                   "\"cdiDeviceIDs\":[\"k8s.gpu.nvidia.com/claim=" UID_A "-gpu-0\"]},"
                   "{\"requests\":[\"gpu\",\"gpu/mig\"],\"poolName\":\"node-a\","
                   "\"deviceName\":\"gpu-1-mig-1g-5gb-19-0\",\"cdiDeviceIDs\":"
                   "[\"k8s.gpu.nvidia.com/claim=" UID_A "-gpu-1-mig-1g-5gb-19-0\"],"
                   "\"shareID\":\"a1b2\"}]",
                   0, NULL);

    assert_non_null(v);
    return v;
}

/* Two claims: one prepared with two devices (one shared), one whose prepare started. */
static struct dra_checkpoint *sample(void)
{
    struct dra_checkpoint *cp = NULL;
    _cleanup_json_ json_t *devices = sample_devices();

    assert_int_equal(dra_checkpoint_new(BOOT, &cp), 0);
    assert_int_equal(
        dra_checkpoint_put(cp, UID_A, DRA_STATE_COMPLETED, "default", "pod-gpu", devices), 0);
    assert_int_equal(dra_checkpoint_put(cp, UID_B, DRA_STATE_STARTED, "team-b", "train", NULL), 0);
    return cp;
}

static char *sample_text(size_t *len)
{
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = sample();
    char *data = NULL;

    assert_int_equal(dra_checkpoint_serialize(cp, &data, len), 0);
    return data;
}

/* The file for doc with a checksum that matches, whatever else doc gets wrong. */
static char *with_checksum(json_t *doc)
{
    uint32_t sum;

    assert_int_equal(dra_checkpoint_checksum(doc, &sum), 0);
    assert_int_equal(json_object_set_new(doc, "checksum", json_integer(sum)), 0);
    return json_dumps(doc, JSON_COMPACT);
}

static json_t *sample_doc(void)
{
    size_t len;
    _cleanup_free_ char *text = sample_text(&len);
    json_t *doc = json_loadb(text, len, 0, NULL);

    assert_non_null(doc);
    return doc;
}

static bool is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void test_uid_valid(void **state)
{
    static const char *const bad[] = {
        "",
        "../x",
        "0B5EE7B2-7C52-4A8A-9E0F-1F2D3C4B5A69",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a6",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a699",
        "0b5ee7b2a7c52-4a8a-9e0f-1f2d3c4b5a69",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a6g",
        "../../../../../../../../etc/passwd..",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b/a69",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b.a69",
        " b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a69",
        "0b5ee7b27c524a8a9e0f1f2d3c4b5a69",
        "{0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a69}",
    };

    assert_true(dra_claim_uid_valid(UID_A));
    assert_true(dra_claim_uid_valid(UID_B));
    assert_true(dra_claim_uid_valid("00000000-0000-0000-0000-000000000000"));
    assert_false(dra_claim_uid_valid(NULL));
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        if (dra_claim_uid_valid(bad[i]))
            fail_msg("accepted %s", bad[i]);
    }
}

static void test_round_trip(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = sample();
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *back = NULL;
    _cleanup_free_ char *a = NULL;
    _cleanup_free_ char *b = NULL;
    _cleanup_json_ json_t *devices = sample_devices();
    size_t alen, blen;
    struct diag d;
    json_t *e;

    assert_int_equal(dra_checkpoint_save(cp, f->path, &d), 0);
    assert_int_equal(dra_checkpoint_load(f->path, BOOT, &d, &back), 0);
    assert_true(json_equal(back->claims, cp->claims));
    assert_string_equal(back->boot_id, BOOT);
    e = dra_checkpoint_get(back, UID_A);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "state")), DRA_STATE_COMPLETED);
    assert_string_equal(json_string_value(json_object_get(e, "namespace")), "default");
    assert_string_equal(json_string_value(json_object_get(e, "name")), "pod-gpu");
    assert_true(json_equal(json_object_get(e, "devices"), devices));
    e = dra_checkpoint_get(back, UID_B);
    assert_non_null(e);
    assert_int_equal(json_array_size(json_object_get(e, "devices")), 0);
    assert_null(dra_checkpoint_get(back, "00000000-0000-0000-0000-000000000000"));
    assert_null(dra_checkpoint_get(back, NULL));

    /* The same state gives the same bytes, whatever order the claims went in. */
    assert_int_equal(dra_checkpoint_serialize(cp, &a, &alen), 0);
    assert_int_equal(dra_checkpoint_serialize(back, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    assert_int_equal(a[alen - 1], '\n');
    assert_int_equal(strlen(a), alen);
    /* Members in the documented order. */
    assert_true(strncmp(a, "{\"version\":1,\"nodeBootID\":\"" BOOT "\",\"checksum\":", 56) == 0);

    /* Drop, then save and load again. */
    dra_checkpoint_drop(back, UID_A);
    dra_checkpoint_drop(back, UID_A);
    dra_checkpoint_drop(back, NULL);
    assert_null(dra_checkpoint_get(back, UID_A));
    assert_int_equal(dra_checkpoint_save(back, f->path, &d), 0);
    dra_checkpoint_free(TAKE_PTR(cp));
    assert_int_equal(dra_checkpoint_load(f->path, BOOT, &d, &cp), 0);
    assert_int_equal(json_object_size(cp->claims), 1);
    assert_non_null(dra_checkpoint_get(cp, UID_B));
}

static void test_missing_and_empty(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = NULL;
    struct dra_checkpoint *untouched = (struct dra_checkpoint *)&untouched;
    struct diag d;

    assert_int_equal(dra_checkpoint_load(f->path, BOOT, &d, &cp), 0);
    assert_int_equal(json_object_size(cp->claims), 0);
    assert_string_equal(cp->boot_id, BOOT);

    /* A zero-length file is not "no checkpoint": the atomic write never leaves one. */
    assert_int_equal(file_write_atomic(f->path, "", 0, 0600), 0);
    diag_init(&d);
    assert_int_equal(dra_checkpoint_load(f->path, BOOT, &d, &untouched), -EBADMSG);
    assert_ptr_equal(untouched, &untouched);
    assert_non_null(strstr(d.msg, f->path));

    /* A path that cannot be read is an error of its own, not an empty checkpoint. */
    assert_int_equal(dra_checkpoint_load(f->dir, BOOT, &d, &untouched), -EISDIR);
    assert_non_null(strstr(d.msg, f->dir));

    /* An invalid boot ID from the caller. */
    assert_int_equal(dra_checkpoint_new("", &untouched), -EINVAL);
    assert_int_equal(dra_checkpoint_new(NULL, &untouched), -EINVAL);
    assert_int_equal(dra_checkpoint_new("a\"b", &untouched), -EINVAL);
    assert_int_equal(dra_checkpoint_load(f->path, "x/y", &d, &untouched), -EINVAL);
}

static void test_too_large(void **state)
{
    struct fixture *f = *state;
    struct dra_checkpoint *cp = NULL;
    size_t n = ((size_t)16 << 20) + 1;
    _cleanup_free_ char *big = malloc(n);
    struct diag d;

    assert_non_null(big);
    memset(big, ' ', n);
    assert_int_equal(file_write_atomic(f->path, big, n, 0600), 0);
    assert_int_equal(dra_checkpoint_load(f->path, BOOT, &d, &cp), -EBADMSG);
    assert_non_null(strstr(d.msg, "larger than"));
    assert_int_equal(dra_checkpoint_parse(big, n, "x", BOOT, &d, &cp), -EBADMSG);
    assert_null(cp);
}

/* The checksum is what docs/dra-driver.md says it is. */
static void test_checksum_format(void **state)
{
    _cleanup_json_ json_t *doc = sample_doc();
    _cleanup_json_ json_t *rest = NULL;
    _cleanup_free_ char *canon = NULL;
    uint32_t sum;

    assert_int_equal(ref_crc32("123456789", 9), 0xcbf43926u);
    rest = json_copy(doc);
    assert_int_equal(json_object_del(rest, "checksum"), 0);
    assert_int_equal(json_object_size(rest), 3);
    canon = json_dumps(rest, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(canon);
    assert_true(strncmp(canon, "{\"nodeBootID\":", 14) == 0);
    assert_non_null(strstr(canon, ",\"version\":1}"));
    assert_int_equal(json_integer_value(json_object_get(doc, "checksum")),
                     ref_crc32(canon, strlen(canon)));
    assert_int_equal(dra_checkpoint_checksum(doc, &sum), 0);
    assert_int_equal(sum, ref_crc32(canon, strlen(canon)));
    assert_int_equal(dra_checkpoint_checksum(json_object_get(doc, "version"), &sum), -EINVAL);
}

/* Every prefix of the file is refused, except the one that only lacks the final newline. */
static void test_truncated(void **state)
{
    size_t len;
    _cleanup_free_ char *text = sample_text(&len);
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *want = sample();

    for (size_t n = 0; n < len; n++) {
        struct dra_checkpoint *cp = NULL;
        struct diag d;
        int r;

        diag_init(&d);
        r = dra_checkpoint_parse(text, n, "ckpt.json", BOOT, &d, &cp);
        if (r >= 0) {
            bool only_space = true;

            for (size_t i = n; i < len; i++)
                only_space = only_space && is_space(text[i]);
            if (!only_space)
                fail_msg("prefix of %zu bytes of %zu accepted", n, len);
            assert_true(json_equal(cp->claims, want->claims));
            dra_checkpoint_free(cp);
            continue;
        }
        assert_int_equal(r, -EBADMSG);
        assert_null(cp);
        assert_true(strncmp(d.msg, "ckpt.json: ", 11) == 0);
    }
}

/* Every byte changed by each single-bit flip and to each character that means something in JSON:
 * refused, or, where whitespace became other whitespace, loaded as before. */
static void test_flipped(void **state)
{
    static const char repl[] = "{}[]\",:\\ \n\t\r0123456789-+.eEabcfntru\x7f\xff";
    size_t len;
    _cleanup_free_ char *text = sample_text(&len);
    _cleanup_free_ char *buf = malloc(len);
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *want = sample();
    size_t accepted = 0, tried = 0;

    assert_non_null(buf);
    for (size_t pos = 0; pos < len; pos++) {
        for (size_t k = 0; k < 8 + sizeof(repl); k++) {
            /* The bit flips, then repl including its terminating NUL. */
            char c =
                (char)(k < 8 ? (unsigned char)text[pos] ^ (1u << k) : (unsigned char)repl[k - 8]);
            struct dra_checkpoint *cp = NULL;
            struct diag d;
            int r;

            if (c == text[pos])
                continue;
            memcpy(buf, text, len);
            buf[pos] = c;
            tried++;
            diag_init(&d);
            r = dra_checkpoint_parse(buf, len, "ckpt.json", BOOT, &d, &cp);
            if (r >= 0) {
                if (!is_space(text[pos]) || !is_space(c))
                    fail_msg("byte %zu changed from 0x%02x to 0x%02x accepted", pos,
                             (unsigned char)text[pos], (unsigned char)c);
                assert_true(json_equal(cp->claims, want->claims));
                assert_string_equal(cp->boot_id, BOOT);
                dra_checkpoint_free(cp);
                accepted++;
                continue;
            }
            assert_int_equal(r, -EBADMSG);
            assert_null(cp);
            assert_true(strncmp(d.msg, "ckpt.json: ", 11) == 0);
        }
    }
    /* The final newline may become a space, a tab or a CR. */
    assert_int_equal(accepted, 3);
    assert_true(tried > len * 8);
}

static void test_version(void **state)
{
    static const char *const versions[] = {"2", "0", "-1", "\"1\"", "1.0", "null", "true"};

    for (size_t i = 0; i < ARRAY_SIZE(versions) + 1; i++) {
        _cleanup_json_ json_t *doc = sample_doc();
        _cleanup_free_ char *text = NULL;
        struct dra_checkpoint *cp = NULL;
        struct diag d;

        if (i < ARRAY_SIZE(versions))
            assert_int_equal(
                json_object_set_new(doc, "version", json_loads(versions[i], JSON_DECODE_ANY, NULL)),
                0);
        else
            assert_int_equal(json_object_del(doc, "version"), 0);
        text = with_checksum(doc);
        assert_int_equal(dra_checkpoint_parse(text, strlen(text), "ckpt.json", BOOT, &d, &cp),
                         -EBADMSG);
        assert_null(cp);
        if (i == 0)
            assert_string_equal(d.msg, "ckpt.json: unsupported version 2");
        else if (i >= 3)
            assert_non_null(strstr(d.msg, "version: missing or not an integer"));
    }
}

static void test_checksum_field(void **state)
{
    static const char *const sums[] = {"-1", "4294967296", "\"0\"", "1.5", "null"};
    _cleanup_json_ json_t *doc = sample_doc();
    json_int_t good = json_integer_value(json_object_get(doc, "checksum"));

    for (size_t i = 0; i < ARRAY_SIZE(sums) + 2; i++) {
        _cleanup_free_ char *text = NULL;
        struct dra_checkpoint *cp = NULL;
        struct diag d;

        if (i < ARRAY_SIZE(sums))
            json_object_set_new(doc, "checksum", json_loads(sums[i], JSON_DECODE_ANY, NULL));
        else if (i == ARRAY_SIZE(sums))
            json_object_set_new(doc, "checksum", json_integer(good ^ 1));
        else
            json_object_del(doc, "checksum");
        text = json_dumps(doc, JSON_COMPACT);
        assert_int_equal(dra_checkpoint_parse(text, strlen(text), "ckpt.json", BOOT, &d, &cp),
                         -EBADMSG);
        if (i == ARRAY_SIZE(sums))
            assert_string_equal(d.msg, "ckpt.json: checksum mismatch");
        else
            assert_non_null(strstr(d.msg, "checksum: missing or not a 32-bit unsigned integer"));
    }
}

static int capture_log(void)
{
    int fd = memfd_create("log", MFD_CLOEXEC);

    assert_true(fd >= 0);
    log_set_fd(fd);
    return fd;
}

static char *captured(int fd)
{
    char *buf = calloc(1, 4096);

    log_set_fd(STDERR_FILENO);
    assert_non_null(buf);
    assert_true(pread(fd, buf, 4095, 0) >= 0);
    close(fd);
    return buf;
}

/* Claims prepared before a reboot are dropped, and a line says so. */
static void test_boot_id_change(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = sample();
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *after = NULL;
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *again = NULL;
    _cleanup_free_ char *log = NULL;
    struct diag d;
    int fd;

    assert_int_equal(dra_checkpoint_save(cp, f->path, &d), 0);
    fd = capture_log();
    assert_int_equal(dra_checkpoint_load(f->path, BOOT2, &d, &after), 0);
    log = captured(fd);
    assert_int_equal(json_object_size(after->claims), 0);
    assert_string_equal(after->boot_id, BOOT2);
    assert_non_null(strstr(log, "dropping its claims"));
    assert_non_null(strstr(log, "claims=2"));
    assert_non_null(strstr(log, BOOT));
    assert_non_null(strstr(log, BOOT2));
    assert_non_null(strstr(log, f->path));

    /* Saved, the checkpoint now belongs to this boot and loads quietly. */
    assert_int_equal(dra_checkpoint_put(after, UID_A, DRA_STATE_STARTED, "ns", "n", NULL), 0);
    assert_int_equal(dra_checkpoint_save(after, f->path, &d), 0);
    fd = capture_log();
    assert_int_equal(dra_checkpoint_load(f->path, BOOT2, &d, &again), 0);
    free(log);
    log = captured(fd);
    assert_string_equal(log, "");
    assert_non_null(dra_checkpoint_get(again, UID_A));

    /* A damaged file from another boot is still refused: the boot ID is checked after trust. */
    {
        _cleanup_json_ json_t *doc = sample_doc();
        _cleanup_free_ char *text = NULL;
        struct dra_checkpoint *bad = NULL;

        json_object_set_new(json_object_get(json_object_get(doc, "preparedClaims"), UID_B), "state",
                            json_string("Prepared"));
        text = with_checksum(doc);
        assert_int_equal(dra_checkpoint_parse(text, strlen(text), "c", BOOT2, &d, &bad), -EBADMSG);
    }
}

/* Claim UIDs that are not lower-case UUIDs are refused before anything uses them. */
static void test_invalid_uids_in_file(void **state)
{
    static const char *const uids[] = {
        "../x",
        "../../../../../../../../etc/passwd..",
        "0B5EE7B2-7C52-4A8A-9E0F-1F2D3C4B5A69",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a6",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b5a699",
        "",
        "0b5ee7b2-7c52-4a8a-9e0f-1f2d3c4b/a69",
        "\x1b[31m-red-terminal",
    };

    for (size_t i = 0; i < ARRAY_SIZE(uids); i++) {
        _cleanup_json_ json_t *doc = sample_doc();
        _cleanup_free_ char *text = NULL;
        struct dra_checkpoint *cp = NULL;
        json_t *claims = json_object_get(doc, "preparedClaims");
        struct diag d;

        assert_int_equal(json_object_set(claims, uids[i], json_object_get(claims, UID_A)), 0);
        text = with_checksum(doc);
        diag_init(&d);
        assert_int_equal(dra_checkpoint_parse(text, strlen(text), "ckpt.json", BOOT, &d, &cp),
                         -EBADMSG);
        assert_null(cp);
        assert_true(strncmp(d.msg, "ckpt.json: invalid claim UID \"", 30) == 0);
        /* Nothing unprintable reaches the message. */
        for (const char *p = d.msg; *p; p++)
            assert_true(*p >= 0x20 && *p < 0x7f);
    }
}

/* One change to a valid file (checksum recomputed), and what the diagnostic must name. */
struct field_case {
    const char *device; /* NULL: change the entry itself */
    const char *key;
    const char *value; /* JSON; NULL removes the key */
    const char *want;
};

static void test_invalid_fields(void **state)
{
    static const struct field_case cases[] = {
        {NULL, "state", "\"Prepared\"", "state: want \"PrepareStarted\" or \"PrepareCompleted\""},
        {NULL, "state", "7", "state: not a string"},
        {NULL, "state", NULL, "state: missing"},
        {NULL, "namespace", NULL, "namespace: missing"},
        {NULL, "namespace", "[\"default\"]", "namespace: not a string"},
        {NULL, "name", "\"\"", "name: empty"},
        {NULL, "name", "null", "name: not a string"},
        {NULL, "devices", NULL, "devices: missing"},
        {NULL, "devices", "{}", "devices: not an array"},
        {NULL, "devices", "[\"gpu-0\"]", "devices[0]: not an object"},
        {NULL, "extra", "1", "unknown field \"extra\""},
        {"0", "requests", NULL, "devices[0].requests: missing"},
        {"0", "requests", "\"gpu\"", "devices[0].requests: not an array"},
        {"1", "requests", "[\"gpu\", 1]", "devices[1].requests[1]: not a string"},
        {"1", "requests", "[\"\"]", "devices[1].requests[0]: empty"},
        {"0", "poolName", NULL, "devices[0].poolName: missing"},
        {"0", "poolName", "false", "devices[0].poolName: not a string"},
        {"0", "deviceName", "\"\"", "devices[0].deviceName: empty"},
        {"1", "deviceName", "{}", "devices[1].deviceName: not a string"},
        {"0", "cdiDeviceIDs", NULL, "devices[0].cdiDeviceIDs: missing"},
        {"0", "cdiDeviceIDs", "\"k8s.gpu.nvidia.com/claim=x\"",
         "devices[0].cdiDeviceIDs: not an array"},
        {"0", "cdiDeviceIDs", "[null]", "devices[0].cdiDeviceIDs[0]: not a string"},
        {"1", "shareID", "42", "devices[1].shareID: not a string"},
        {"1", "shareID", "\"\"", "devices[1].shareID: empty"},
        {"0", "metadata", "{}", "devices[0]: unknown field \"metadata\""},
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct field_case *c = &cases[i];
        _cleanup_json_ json_t *doc = sample_doc();
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ char *want = NULL;
        struct dra_checkpoint *cp = NULL;
        json_t *obj = json_object_get(json_object_get(doc, "preparedClaims"), UID_A);
        struct diag d;

        if (c->device)
            obj = json_array_get(json_object_get(obj, "devices"), (size_t)(c->device[0] - '0'));
        assert_non_null(obj);
        if (c->value)
            assert_int_equal(
                json_object_set_new(obj, c->key, json_loads(c->value, JSON_DECODE_ANY, NULL)), 0);
        else
            assert_int_equal(json_object_del(obj, c->key), 0);
        text = with_checksum(doc);
        diag_init(&d);
        assert_int_equal(dra_checkpoint_parse(text, strlen(text), "ckpt.json", BOOT, &d, &cp),
                         -EBADMSG);
        assert_null(cp);
        assert_true(asprintf(&want, "ckpt.json: claim %s: %s", UID_A, c->want) > 0);
        assert_string_equal(d.msg, want);
    }
}

static void test_invalid_top_level(void **state)
{
    static const struct {
        const char *key, *value, *want;
    } cases[] = {
        {"nodeBootID", NULL, "ckpt.json: nodeBootID: missing or not a boot ID"},
        {"nodeBootID", "\"\"", "ckpt.json: nodeBootID: missing or not a boot ID"},
        {"nodeBootID", "\"../boot\"", "ckpt.json: nodeBootID: missing or not a boot ID"},
        {"nodeBootID", "3", "ckpt.json: nodeBootID: missing or not a boot ID"},
        {"preparedClaims", NULL, "ckpt.json: preparedClaims: missing or not an object"},
        {"preparedClaims", "[]", "ckpt.json: preparedClaims: missing or not an object"},
        {"other", "{}", "ckpt.json: unknown field \"other\""},
    };
    struct dra_checkpoint *cp = NULL;
    struct diag d;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *doc = sample_doc();
        _cleanup_free_ char *text = NULL;

        if (cases[i].value)
            json_object_set_new(doc, cases[i].key,
                                json_loads(cases[i].value, JSON_DECODE_ANY, NULL));
        else
            json_object_del(doc, cases[i].key);
        text = with_checksum(doc);
        assert_int_equal(dra_checkpoint_parse(text, strlen(text), "ckpt.json", BOOT, &d, &cp),
                         -EBADMSG);
        assert_string_equal(d.msg, cases[i].want);
    }

    /* Not an object; a duplicated claim; JSON syntax errors name the position. */
    assert_int_equal(dra_checkpoint_parse("[1]", 3, "ckpt.json", BOOT, &d, &cp), -EBADMSG);
    assert_string_equal(d.msg, "ckpt.json: not a JSON object");
    {
        size_t len;
        _cleanup_free_ char *text = sample_text(&len);
        _cleanup_free_ char *dup = NULL;
        const char *claims = strstr(text, "\"preparedClaims\":{");
        const char *second = strstr(text, "\"" UID_B "\"");

        assert_non_null(claims);
        assert_non_null(second);
        /* {"A":...,"B":...} -> {"B":...,"B":...}: the later one would have won silently. */
        assert_true(asprintf(&dup, "%.*s%.*s,%s", (int)(claims - text) + 18, text,
                             (int)(strlen(second) - 3), second, second) > 0);
        assert_int_equal(dra_checkpoint_parse(dup, strlen(dup), "ckpt.json", BOOT, &d, &cp),
                         -EBADMSG);
        assert_non_null(strstr(d.msg, "duplicate"));
    }
    assert_int_equal(dra_checkpoint_parse("{\"version\":1,}", 14, "ckpt.json", BOOT, &d, &cp),
                     -EBADMSG);
    assert_true(strncmp(d.msg, "ckpt.json: line 1 col ", 22) == 0);
    assert_int_equal(d.line, 1);
    assert_true(d.col > 0);
    assert_null(cp);
}

static void test_put(void **state)
{
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = NULL;
    _cleanup_json_ json_t *devices = sample_devices();
    _cleanup_json_ json_t *bad = json_loads("[{\"requests\":[\"gpu\"]}]", 0, NULL);
    _cleanup_json_ json_t *obj = json_object();
    _cleanup_free_ char *text = NULL;
    size_t len;

    assert_int_equal(dra_checkpoint_new(BOOT, &cp), 0);
    assert_int_equal(dra_checkpoint_put(cp, "../x", DRA_STATE_STARTED, "ns", "n", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, NULL, DRA_STATE_STARTED, "ns", "n", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, "Prepared", "ns", "n", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, NULL, "ns", "n", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_STARTED, NULL, "n", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_STARTED, "ns", "", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_STARTED, "\xff", "n", NULL), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_STARTED, "ns", "n", bad), -EINVAL);
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_STARTED, "ns", "n", obj), -EINVAL);
    assert_int_equal(json_object_size(cp->claims), 0);

    /* The devices are copied: changing the caller's array later changes nothing. */
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_STARTED, "ns", "n", devices), 0);
    json_array_clear(devices);
    assert_int_equal(json_array_size(json_object_get(dra_checkpoint_get(cp, UID_A), "devices")), 2);
    /* Put replaces. */
    assert_int_equal(dra_checkpoint_put(cp, UID_A, DRA_STATE_COMPLETED, "ns", "n", devices), 0);
    assert_string_equal(json_string_value(json_object_get(dra_checkpoint_get(cp, UID_A), "state")),
                        DRA_STATE_COMPLETED);
    assert_int_equal(json_object_size(cp->claims), 1);

    /* An entry damaged through get is never written. */
    assert_int_equal(dra_checkpoint_serialize(cp, &text, &len), 0);
    free(TAKE_PTR(text));
    json_object_set_new(dra_checkpoint_get(cp, UID_A), "state", json_string("Done"));
    assert_int_equal(dra_checkpoint_serialize(cp, &text, &len), -EINVAL);
    assert_null(text);
}

static void test_mode(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = sample();
    mode_t old = umask(0);
    struct stat st;
    struct diag d;

    assert_int_equal(dra_checkpoint_save(cp, f->path, &d), 0);
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* An existing file of another mode is replaced by a 0600 one. */
    assert_int_equal(chmod(f->path, 0666), 0);
    assert_int_equal(dra_checkpoint_save(cp, f->path, &d), 0);
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(count_entries(f->dir), 1);
    umask(old);
}

static void assert_file_is(const char *path, const char *data, size_t len)
{
    _cleanup_free_ char *got = NULL;
    size_t n = 0;

    assert_int_equal(file_read_all(path, 1 << 20, &got, &n), 0);
    assert_int_equal(n, len);
    assert_memory_equal(got, data, len);
}

/* A write that fails leaves the old file whole and no temporary file behind. */
static void test_atomic_replace(void **state)
{
    struct fixture *f = *state;
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = sample();
    _cleanup_free_ char *old = NULL;
    _cleanup_free_ char *missing = NULL;
    struct sigaction ign = {.sa_handler = SIG_IGN}, prev;
    struct rlimit lim, small;
    size_t len;
    struct diag d;
    int r;

    assert_int_equal(dra_checkpoint_serialize(cp, &old, &len), 0);
    assert_int_equal(dra_checkpoint_write(f->path, old, len, &d), 0);
    assert_file_is(f->path, old, len);
    assert_int_equal(dra_checkpoint_put(cp, "00000000-0000-0000-0000-000000000000",
                                        DRA_STATE_STARTED, "ns", "n", NULL),
                     0);

    /* The file size limit makes the write of the new, longer contents fail part way (even for
     * root, whom a read-only directory does not stop). */
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &lim), 0);
    small = lim;
    small.rlim_cur = len;
    assert_int_equal(sigaction(SIGXFSZ, &ign, &prev), 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    r = dra_checkpoint_save(cp, f->path, &d);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    assert_int_equal(sigaction(SIGXFSZ, &prev, NULL), 0);
    assert_int_equal(r, -EFBIG);
    assert_non_null(strstr(d.msg, f->path));
    assert_file_is(f->path, old, len);
    assert_int_equal(count_entries(f->dir), 1);

    /* A read-only directory, where that stops the writer. */
    if (geteuid() != 0) {
        assert_int_equal(chmod(f->dir, 0500), 0);
        r = dra_checkpoint_save(cp, f->path, &d);
        assert_int_equal(chmod(f->dir, 0700), 0);
        assert_int_equal(r, -EACCES);
        assert_file_is(f->path, old, len);
        assert_int_equal(count_entries(f->dir), 1);
    }

    /* A missing directory. */
    assert_true(asprintf(&missing, "%s/nodir/checkpoint.json", f->dir) > 0);
    assert_int_equal(dra_checkpoint_save(cp, missing, &d), -ENOENT);
    assert_non_null(strstr(d.msg, missing));

    /* And the write that works replaces the whole file. */
    assert_int_equal(dra_checkpoint_save(cp, f->path, &d), 0);
    {
        _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *back = NULL;

        assert_int_equal(dra_checkpoint_load(f->path, BOOT, &d, &back), 0);
        assert_int_equal(json_object_size(back->claims), 3);
    }
}

static void write_boot_id(const struct fixture *f, const char *content)
{
    _cleanup_free_ char *dir = NULL;
    _cleanup_free_ char *p = NULL;

    assert_true(asprintf(&dir, "%s/proc/sys/kernel/random", f->dir) > 0);
    assert_true(asprintf(&p, "%s/boot_id", dir) > 0);
    assert_int_equal(file_mkdir_p(dir, 0700), 0);
    assert_int_equal(file_write_atomic(p, content, strlen(content), 0644), 0);
}

static void test_boot_id(void **state)
{
    struct fixture *f = *state;
    _cleanup_free_ char *id = NULL;
    _cleanup_free_ char *root_slash = NULL;
    char *untouched = (char *)"x";

    assert_int_equal(dra_boot_id(f->dir, &untouched), -ENOENT);
    write_boot_id(f, BOOT "\n");
    assert_int_equal(dra_boot_id(f->dir, &id), 0);
    assert_string_equal(id, BOOT);
    free(TAKE_PTR(id));
    assert_true(asprintf(&root_slash, "%s/", f->dir) > 0);
    assert_int_equal(dra_boot_id(root_slash, &id), 0);
    assert_string_equal(id, BOOT);
    free(TAKE_PTR(id));

    write_boot_id(f, "\n");
    assert_int_equal(dra_boot_id(f->dir, &untouched), -EBADMSG);
    write_boot_id(f, "../../x\n");
    assert_int_equal(dra_boot_id(f->dir, &untouched), -EBADMSG);
    assert_string_equal(untouched, "x");

    /* This machine's own, a UUID. */
    if (access("/proc/sys/kernel/random/boot_id", R_OK) == 0) {
        assert_int_equal(dra_boot_id(NULL, &id), 0);
        assert_true(dra_claim_uid_valid(id));
        free(TAKE_PTR(id));
        assert_int_equal(dra_boot_id("", &id), 0);
        assert_true(dra_claim_uid_valid(id));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uid_valid),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
        cmocka_unit_test(test_checksum_format),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_flipped),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_checksum_field),
        cmocka_unit_test_setup_teardown(test_boot_id_change, setup, teardown),
        cmocka_unit_test(test_invalid_uids_in_file),
        cmocka_unit_test(test_invalid_fields),
        cmocka_unit_test(test_invalid_top_level),
        cmocka_unit_test(test_put),
        cmocka_unit_test_setup_teardown(test_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic_replace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boot_id, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
