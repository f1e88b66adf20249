/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Response bodies: reference counted and immutable, so the exporter builds one per snapshot and
 * every scrape until the next snapshot sends the same bytes without copying them. The gzip form is
 * made the first time a client asks for it and kept with the body: Prometheus asks for gzip on
 * every scrape, and the compression is paid once per snapshot, not once per scrape.
 *
 * zlib is loaded at first use (base-dlib.h) and stays mapped: once a client has asked for gzip, it
 * will ask again on its next scrape.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base-dlib.h"
#include "http-internal.h"

static struct {
    typeof(deflateInit2_) *deflateInit2_;
    typeof(deflate) *deflate;
    typeof(deflateEnd) *deflateEnd;
    typeof(deflateBound) *deflateBound;
} zl;

static const struct dlib_sym zl_syms[] = {
    DLIB_SYM(zl.deflateInit2_, deflateInit2_),
    DLIB_SYM(zl.deflate, deflate),
    DLIB_SYM(zl.deflateEnd, deflateEnd),
    DLIB_SYM(zl.deflateBound, deflateBound),
};

static struct dlib zl_lib = DLIB_INIT("libz.so.1", "zlib1g", zl_syms, false);

struct http_body {
    atomic_uint refs;
    char *data;
    size_t len;
    char *gz;
    size_t gz_len;
};

int http_body_new_take(void *data, size_t len, struct http_body **ret)
{
    struct http_body *b = calloc(1, sizeof(*b));
    if (!b) {
        free(data);
        return -ENOMEM;
    }
    atomic_init(&b->refs, 1);
    b->data = data;
    b->len = len;
    *ret = b;
    return 0;
}

int http_body_new(const void *data, size_t len, struct http_body **ret)
{
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return -ENOMEM;
    if (len)
        memcpy(copy, data, len);
    return http_body_new_take(copy, len, ret);
}

struct http_body *http_body_ref(struct http_body *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

struct http_body *http_body_unref(struct http_body *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        free(b->data);
        free(b->gz);
        free(b);
    }
    return NULL;
}

const void *http_body_data(const struct http_body *b, size_t *ret_len)
{
    *ret_len = b->len;
    return b->data;
}

const void *http_body_gzip_data(const struct http_body *b, size_t *ret_len)
{
    *ret_len = b->gz_len;
    return b->gz;
}

int http_body_gzip(struct http_body *b, struct diag *d)
{
    if (b->gz)
        return 0;
    int r = dlib_pin(&zl_lib, d);
    if (r < 0)
        return r;
    z_stream z = {0};
    /* 31: a gzip wrapper (16) around a 32 KiB window (15); memLevel 8 is zlib's default */
    if (zl.deflateInit2_(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY,
                         ZLIB_VERSION, (int)sizeof(z)) != Z_OK)
        return diag_fail(d, -ENOMEM, "gzip: cannot start a stream");
    size_t cap = zl.deflateBound(&z, (uLong)b->len) + 32;
    char *out = malloc(cap);
    if (!out) {
        zl.deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (Bytef *)b->data;
    z.avail_in = (uInt)b->len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int zr = zl.deflate(&z, Z_FINISH);
    size_t out_len = cap - z.avail_out;
    zl.deflateEnd(&z);
    if (zr != Z_STREAM_END || b->len > UINT32_MAX) {
        free(out);
        return diag_fail(d, -EIO, "gzip: compression failed (%d)", zr);
    }
    char *shrunk = realloc(out, out_len ? out_len : 1);
    b->gz = shrunk ? shrunk : out;
    b->gz_len = out_len;
    return 0;
}
