/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pieces of the rpc module that need no socket: message framing across arbitrary chunk
 * boundaries and under the size cap, the output buffer a data provider pulls from, grpc-message
 * percent-encoding, grpc-timeout and grpc-status values, header lists and content types.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rpc-internal.h"
#include "test.pb-c.h"

static void encode_req(struct strbuf *sb, const char *name, int64_t n)
{
    Gptest__Req req = GPTEST__REQ__INIT;

    req.name = (char *)name;
    req.n = n;
    assert_int_equal(rpc_msg_encode(sb, &req.base, 0), 0);
}

/* Two messages fed in every chunk size from 1 octet up come out whole and in order. */
static void test_reader_chunks(void **state)
{
    struct strbuf sb = STRBUF_INIT;

    encode_req(&sb, "first", 1);
    encode_req(&sb, "", 0); /* the 5-octet empty message */
    encode_req(&sb, "third", 3);
    for (size_t chunk = 1; chunk <= sb.len; chunk++) {
        struct rpc_msg_reader r;
        int seen = 0;

        rpc_msg_reader_init(&r, 0);
        for (size_t off = 0; off < sb.len;) {
            size_t len = sb.len - off < chunk ? sb.len - off : chunk, used = 0;
            int k = rpc_msg_reader_feed(&r, (const uint8_t *)sb.buf + off, len, &used);

            assert_true(k == 0 || k == 1);
            assert_true(used <= len);
            off += used;
            if (k == 1) {
                const uint8_t *data = NULL;
                size_t mlen = 0;
                uint8_t flags = 0xff;
                ProtobufCMessage *m = NULL;
                Gptest__Req *req;

                rpc_msg_reader_message(&r, &flags, &data, &mlen);
                assert_int_equal(flags, 0);
                assert_int_equal(rpc_msg_decode(&gptest__req__descriptor, data, mlen, &m), 0);
                req = (Gptest__Req *)m;
                assert_int_equal(req->n, seen == 0 ? 1 : seen == 1 ? 0 : 3);
                protobuf_c_message_free_unpacked(m, NULL);
                seen++;
            } else {
                assert_int_equal(used, len);
            }
        }
        assert_int_equal(seen, 3);
        assert_false(rpc_msg_reader_partial(&r));
        rpc_msg_reader_release(&r);
    }
    strbuf_release(&sb);
}

/* A prefix announcing more than the cap fails before any body octet is stored. */
static void test_reader_cap(void **state)
{
    const uint8_t big[] = {0, 0, 0, 0x04, 0x01, 'x', 'x'}; /* 1025 octets announced */
    const uint8_t fits[] = {0, 0, 0, 0x04, 0x00};          /* exactly 1024 */
    struct rpc_msg_reader r;
    size_t used = 0;

    rpc_msg_reader_init(&r, 1024);
    assert_int_equal(rpc_msg_reader_feed(&r, big, sizeof(big), &used), -EMSGSIZE);
    assert_int_equal(r.body.len, 0);
    rpc_msg_reader_release(&r);

    rpc_msg_reader_init(&r, 1024);
    assert_int_equal(rpc_msg_reader_feed(&r, fits, sizeof(fits), &used), 0);
    assert_int_equal(used, sizeof(fits));
    assert_true(rpc_msg_reader_partial(&r));
    rpc_msg_reader_release(&r);
}

static void test_reader_partial_prefix(void **state)
{
    const uint8_t two[] = {0, 0};
    struct rpc_msg_reader r;
    size_t used = 0;

    rpc_msg_reader_init(&r, 0);
    assert_false(rpc_msg_reader_partial(&r));
    assert_int_equal(rpc_msg_reader_feed(&r, two, sizeof(two), &used), 0);
    assert_true(rpc_msg_reader_partial(&r));
    rpc_msg_reader_release(&r);
}

static void test_encode_limits(void **state)
{
    Gptest__Req req = GPTEST__REQ__INIT;
    struct strbuf sb;
    uint8_t blob[100] = {0};

    req.blob.data = blob;
    req.blob.len = sizeof(blob);
    strbuf_init(&sb, 0);
    assert_int_equal(rpc_msg_encode(&sb, &req.base, 50), -EMSGSIZE);
    assert_int_equal(sb.len, 0);
    strbuf_release(&sb);
    /* Over the buffer's cap: the buffer is left as it was. */
    strbuf_init(&sb, 60);
    assert_int_equal(strbuf_addstr(&sb, "keep"), 0);
    assert_int_equal(rpc_msg_encode(&sb, &req.base, 0), -ENOBUFS);
    assert_string_equal(strbuf_str(&sb), "keep");
    strbuf_release(&sb);
}

/* Messages on both sides of the size packed in one pass (1024 octets) are framed alike and decode
 * to what was encoded; the cap still applies to the one-pass path. */
static void test_encode_sizes(void **state)
{
    static uint8_t blob[3000];
    const size_t sizes[] = {0, 1, 1000, 1017, 1018, 1019, 1020, 1021, 1100, sizeof(blob)};

    for (size_t i = 0; i < sizeof(blob); i++)
        blob[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
        Gptest__Req req = GPTEST__REQ__INIT, *back;
        struct strbuf sb;
        size_t packed;

        req.name = "x";
        req.blob.data = blob;
        req.blob.len = sizes[i];
        packed = protobuf_c_message_get_packed_size(&req.base);
        strbuf_init(&sb, 0);
        assert_int_equal(strbuf_addstr(&sb, "ab"), 0);
        assert_int_equal(rpc_msg_encode(&sb, &req.base, 0), 0);
        assert_int_equal(sb.len, 2 + RPC_PREFIX_LEN + packed);
        assert_int_equal((uint8_t)sb.buf[2], 0);
        assert_int_equal(((size_t)(uint8_t)sb.buf[3] << 24) | ((size_t)(uint8_t)sb.buf[4] << 16) |
                             ((size_t)(uint8_t)sb.buf[5] << 8) | (uint8_t)sb.buf[6],
                         packed);
        back = gptest__req__unpack(NULL, packed, (const uint8_t *)sb.buf + 2 + RPC_PREFIX_LEN);
        assert_non_null(back);
        assert_string_equal(back->name, "x");
        assert_int_equal(back->blob.len, sizes[i]);
        assert_memory_equal(back->blob.data ? back->blob.data : blob, blob, sizes[i]);
        gptest__req__free_unpacked(back, NULL);
        strbuf_release(&sb);

        strbuf_init(&sb, RPC_PREFIX_LEN + packed - 1);
        assert_int_equal(rpc_msg_encode(&sb, &req.base, 0), -ENOBUFS);
        assert_int_equal(sb.len, 0);
        strbuf_release(&sb);
    }
}

/* Requests decoded into an arena: small and larger than a block, several in one arena, and
 * malformed input; everything goes with the release (valgrind and ASan check that). */
static void test_decode_arena(void **state)
{
    static uint8_t blob[5000];
    const size_t sizes[] = {0, 10, 400, 480, 1000, sizeof(blob)};
    struct rpc_arena arena = {0};

    for (size_t i = 0; i < sizeof(blob); i++)
        blob[i] = (uint8_t)(i * 13);
    for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
        Gptest__Req req = GPTEST__REQ__INIT;
        ProtobufCMessage *m = NULL;
        const Gptest__Req *back;
        uint8_t packed[sizeof(blob) + 64];
        size_t len;

        req.name = "arena";
        req.n = (int64_t)i - 3;
        req.blob.data = blob;
        req.blob.len = sizes[i];
        len = protobuf_c_message_pack(&req.base, packed);
        assert_int_equal(rpc_msg_decode_arena(&gptest__req__descriptor, packed, len, &arena, &m),
                         0);
        back = (const Gptest__Req *)m;
        assert_string_equal(back->name, "arena");
        assert_int_equal(back->n, (int64_t)i - 3);
        assert_int_equal(back->blob.len, sizes[i]);
        if (sizes[i])
            assert_memory_equal(back->blob.data, blob, sizes[i]);
        /* Every other one released at once, the rest piled up in the same arena. */
        if (i % 2)
            rpc_arena_release(&arena);
    }
    {
        static const uint8_t bad[] = {0x0a, 0x10, 'x'}; /* a string longer than the input */
        ProtobufCMessage *m = NULL;

        assert_int_equal(
            rpc_msg_decode_arena(&gptest__req__descriptor, bad, sizeof(bad), &arena, &m), -EBADMSG);
        assert_null(m);
    }
    rpc_arena_release(&arena);
    assert_null(arena.blocks);
}

static void test_outbuf(void **state)
{
    Gptest__Resp resp = GPTEST__RESP__INIT;
    struct rpc_outbuf ob;
    uint8_t buf[4];
    uint32_t flags = 0;

    resp.text = "hello";
    rpc_outbuf_init(&ob, 0);
    assert_int_equal(rpc_outbuf_read(&ob, buf, sizeof(buf), &flags, true), NGHTTP2_ERR_DEFERRED);
    assert_true(ob.deferred);
    assert_int_equal(rpc_outbuf_append_msg(&ob, &resp.base, 0), 1); /* must resume */
    assert_int_equal(rpc_outbuf_read(&ob, buf, sizeof(buf), &flags, true), 4);
    assert_true(rpc_outbuf_pending(&ob));
    while (rpc_outbuf_pending(&ob))
        assert_true(rpc_outbuf_read(&ob, buf, sizeof(buf), &flags, true) > 0);
    assert_int_equal(flags, 0);
    assert_int_equal(rpc_outbuf_finish(&ob), 0);
    assert_int_equal(rpc_outbuf_read(&ob, buf, sizeof(buf), &flags, true), 0);
    assert_int_equal(flags, NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM);
    rpc_outbuf_release(&ob);
}

static void test_percent(void **state)
{
    static const struct {
        const char *plain, *encoded;
    } cases[] = {
        {"", ""},
        {"plain text ~", "plain text ~"},
        {"100%", "100%25"},
        {"a\nb\tc", "a%0Ab%09c"},
        {"gr\xc3\xbc\xc3\x9f", "gr%C3%BC%C3%9F"},
        {"\x7f", "%7F"},
    };
    char out[64];

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct strbuf sb = STRBUF_INIT;

        assert_int_equal(rpc_percent_encode(&sb, cases[i].plain), 0);
        assert_string_equal(strbuf_str(&sb), cases[i].encoded);
        rpc_percent_decode(sb.buf ? sb.buf : "", sb.len, out, sizeof(out));
        assert_string_equal(out, cases[i].plain);
        strbuf_release(&sb);
    }
    /* Malformed escapes stay as they are; lower-case hex decodes. */
    rpc_percent_decode("%zz%4%e2%82%ac%", 16, out, sizeof(out));
    assert_string_equal(out, "%zz%4\xe2\x82\xac%");
    /* Truncation keeps the NUL. */
    assert_int_equal(rpc_percent_decode("abcdef", 6, out, 4), 3);
    assert_string_equal(out, "abc");
}

static void test_timeout(void **state)
{
    static const struct {
        const char *s;
        int r;
        uint64_t ms;
    } cases[] = {
        {"1S", 0, 1000},
        {"45S", 0, 45000},
        {"100m", 0, 100},
        {"2M", 0, 120000},
        {"1H", 0, 3600000},
        {"1n", 0, 1},
        {"1500u", 0, 2},
        {"1000000n", 0, 1},
        {"0m", 0, 0},
        {"99999999H", 0, 99999999ull * 3600000ull},
        {"123456789m", -EINVAL, 0},
        {"", -EINVAL, 0},
        {"S", -EINVAL, 0},
        {"10", -EINVAL, 0},
        {"10s", -EINVAL, 0},
        {"-1S", -EINVAL, 0},
        {"1 S", -EINVAL, 0},
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        uint64_t ms = 12345;

        assert_int_equal(rpc_timeout_parse(cases[i].s, strlen(cases[i].s), &ms), cases[i].r);
        assert_true(ms == (cases[i].r == 0 ? cases[i].ms : 12345));
    }
}

static void test_timeout_format(void **state)
{
    static const struct {
        uint64_t ms;
        const char *s;
    } cases[] = {
        {1, "1m"},
        {45000, "45000m"},
        {99999999, "99999999m"},
        {100000000, "100000S"},
        {100000001, "100001S"},
        {UINT64_MAX, "99999999H"},
    };
    char buf[RPC_TIMEOUT_STR_MAX];

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        uint64_t back = 0;

        rpc_timeout_format(cases[i].ms, buf);
        assert_string_equal(buf, cases[i].s);
        assert_int_equal(rpc_timeout_parse(buf, strlen(buf), &back), 0);
    }
}

static void test_status(void **state)
{
    int code = -1;

    assert_string_equal(rpc_code_name(RPC_OK), "OK");
    assert_string_equal(rpc_code_name(RPC_UNAUTHENTICATED), "UNAUTHENTICATED");
    assert_string_equal(rpc_code_name(17), "UNKNOWN");
    assert_string_equal(rpc_code_name(-1), "UNKNOWN");
    assert_int_equal(rpc_status_parse("12", 2, &code), 0);
    assert_int_equal(code, 12);
    assert_int_equal(rpc_status_parse("", 0, &code), -EINVAL);
    assert_int_equal(rpc_status_parse("1x", 2, &code), -EINVAL);
    assert_int_equal(rpc_status_parse("99999999999", 11, &code), -EINVAL);
    assert_int_equal(code, 12);
}

static void test_header_list(void **state)
{
    struct rpc_header_list h;
    char big[100];

    memset(big, 'v', sizeof(big));
    rpc_header_list_init(&h, 200);
    assert_int_equal(rpc_header_list_add(&h, (const uint8_t *)"a", 1, (const uint8_t *)"1", 1), 0);
    assert_int_equal(rpc_header_list_add(&h, (const uint8_t *)"b", 1, (const uint8_t *)big, 100),
                     0);
    /* 34 + 133 = 167; another 133 would pass 200. */
    assert_int_equal(rpc_header_list_add(&h, (const uint8_t *)"c", 1, (const uint8_t *)big, 100),
                     -ENOBUFS);
    assert_string_equal(rpc_header_list_get(&h, "a"), "1");
    assert_null(rpc_header_list_get(&h, "c"));
    rpc_header_list_reset(&h);
    assert_null(rpc_header_list_get(&h, "a"));
    /* After a reset the whole cap is available again. */
    assert_int_equal(rpc_header_list_add(&h, (const uint8_t *)"c", 1, (const uint8_t *)big, 100),
                     0);
    assert_int_equal(strlen(rpc_header_list_get(&h, "c")), 100);
    rpc_header_list_release(&h);

    /* More fields and text than the first allocations hold: every one still found, in full. */
    rpc_header_list_init(&h, 0);
    for (int i = 0; i < 40; i++) {
        char name[8];
        snprintf(name, sizeof(name), "h%d", i);
        assert_int_equal(rpc_header_list_add(&h, (const uint8_t *)name, strlen(name),
                                             (const uint8_t *)big, (size_t)(i % 3) * 40),
                         0);
    }
    for (int i = 0; i < 40; i++) {
        char name[8];
        snprintf(name, sizeof(name), "h%d", i);
        assert_int_equal(strlen(rpc_header_list_get(&h, name)), (size_t)(i % 3) * 40);
    }
    assert_string_equal(rpc_header_list_get(&h, "h1"), "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
    assert_string_equal(rpc_header_list_get(&h, "h39"), "");
    rpc_header_list_release(&h);
}

static void test_content_type(void **state)
{
    assert_true(rpc_content_type_ok("application/grpc"));
    assert_true(rpc_content_type_ok("application/grpc+proto"));
    assert_true(rpc_content_type_ok("Application/GRPC;charset=utf-8"));
    assert_false(rpc_content_type_ok("application/grpcx"));
    assert_false(rpc_content_type_ok("application/json"));
    assert_false(rpc_content_type_ok(""));
    assert_false(rpc_content_type_ok(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_chunks),
        cmocka_unit_test(test_reader_cap),
        cmocka_unit_test(test_reader_partial_prefix),
        cmocka_unit_test(test_encode_limits),
        cmocka_unit_test(test_outbuf),
        cmocka_unit_test(test_percent),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_timeout_format),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_header_list),
        cmocka_unit_test(test_encode_sizes),
        cmocka_unit_test(test_decode_arena),
        cmocka_unit_test(test_content_type),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
