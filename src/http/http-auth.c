/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Basic authentication against the bcrypt hashes of the web configuration's basic_auth_users, as
 * exporter-toolkit checks them. bcrypt comes from libcrypt (libxcrypt in Debian: $2a$, $2b$,
 * $2y$), loaded while a configuration with users is alive.
 *
 * bcrypt is slow on purpose (tens of milliseconds at cost 10), and it runs on the loop thread: a
 * scraper that sends the same credentials every 15 seconds must not pay it every time. A success is
 * remembered as a SipHash-2-4 of user, hash and password under a key drawn at load time, so the
 * cache never holds a password and cannot be filled by guessing (failures are not cached). An
 * unknown user costs a bcrypt too, so the answer time does not tell which users exist.
 */
#include <crypt.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base-dlib.h"
#include "http-internal.h"

static struct {
    typeof(crypt_r) *crypt_r;
} cr;

static const struct dlib_sym cr_syms[] = {
    DLIB_SYM(cr.crypt_r, crypt_r),
};

static struct dlib cr_lib = DLIB_INIT("libcrypt.so.1", "libcrypt1", cr_syms, true);

/* A bcrypt hash of "gpuplane" at cost 4: checks the library does bcrypt, and is the hash an unknown
 * user is checked against. */
static const char probe_hash[] = "$2b$04$abcdefghijklmnopqrstuu";

int http_crypt_acquire(struct diag *d)
{
    int r = dlib_acquire(&cr_lib, d);
    if (r < 0)
        return r;
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (!cd) {
        dlib_release(&cr_lib);
        return -ENOMEM;
    }
    const char *h = cr.crypt_r("gpuplane", probe_hash, cd);
    bool ok = h && strncmp(h, "$2b$04$", 7) == 0;
    free(cd);
    if (!ok) {
        dlib_release(&cr_lib);
        return diag_fail(d, -ENOTSUP, "libcrypt.so.1 does not support bcrypt ($2b$)");
    }
    return 0;
}

void http_crypt_release(void)
{
    dlib_release(&cr_lib);
}

/* ---- SipHash-2-4 (Aumasson and Bernstein, 2012) ---- */

static inline uint64_t rotl(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIPROUND(v0, v1, v2, v3)                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

uint64_t http_siphash(const uint64_t key[2], const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t v0 = key[0] ^ 0x736f6d6570736575ULL, v1 = key[1] ^ 0x646f72616e646f6dULL;
    uint64_t v2 = key[0] ^ 0x6c7967656e657261ULL, v3 = key[1] ^ 0x7465646279746573ULL;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = 0;
        for (unsigned j = 0; j < 8; j++)
            m |= (uint64_t)p[i + j] << (8 * j);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t j = 0; j < (len & 7); j++)
        last |= (uint64_t)p[whole + j] << (8 * j);
    v3 ^= last;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- checking ---- */

static bool equal_const_time(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static uint64_t cache_key(const struct http_web_config *wc, const struct http_web_user *u,
                          const char *password)
{
    /* user NUL hash NUL password, hashed in one pass without a copy on the heap */
    size_t lu = strlen(u->name) + 1, lh = strlen(u->hash) + 1, lp = strlen(password);
    char stackbuf[512];
    char *buf = lu + lh + lp <= sizeof(stackbuf) ? stackbuf : malloc(lu + lh + lp);
    if (!buf)
        return 0;
    memcpy(buf, u->name, lu);
    memcpy(buf + lu, u->hash, lh);
    memcpy(buf + lu + lh, password, lp);
    uint64_t k = http_siphash(wc->sip_key, buf, lu + lh + lp);
    explicit_bzero(buf, lu + lh + lp);
    if (buf != stackbuf)
        free(buf);
    return k ? k : 1;
}

bool http_bcrypt_matches(const char *password, const char *hash)
{
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (!cd)
        return false;
    const char *h = cr.crypt_r(password, hash, cd);
    /* libxcrypt answers "*0" or "*1" for a hash it cannot use: never equal to a real hash */
    bool ok = h && h[0] != '*' && equal_const_time(h, hash);
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    return ok;
}

int http_web_config_lookup(struct http_web_config *wc, const char *user, const char *password,
                           const char **ret_hash, uint64_t *ret_key, bool *ret_known)
{
    const struct http_web_user *u = NULL;
    for (size_t i = 0; i < wc->n_users; i++)
        if (strcmp(wc->users[i].name, user) == 0)
            u = &wc->users[i];
    if (!u) {
        *ret_hash = wc->n_users ? wc->users[0].hash : probe_hash;
        *ret_key = 0;
        *ret_known = false;
        return 0;
    }
    uint64_t key = cache_key(wc, u, password);
    for (size_t i = 0; i < HTTP_AUTH_CACHE; i++)
        if (key && wc->cache[i].key == key)
            return 1;
    *ret_hash = u->hash;
    *ret_key = key;
    *ret_known = true;
    return 0;
}

void http_web_config_remember(struct http_web_config *wc, uint64_t key)
{
    if (!key)
        return;
    wc->cache[wc->cache_next].key = key;
    wc->cache_next = (wc->cache_next + 1) % HTTP_AUTH_CACHE;
}

bool http_web_config_check_user(struct http_web_config *wc, const char *user, const char *password)
{
    if (!wc || !wc->crypt_held)
        return false;
    const char *hash = NULL;
    uint64_t key = 0;
    bool known = false;
    if (http_web_config_lookup(wc, user, password, &hash, &key, &known) == 1)
        return true;
    bool ok = http_bcrypt_matches(password, hash) && known;
    if (ok)
        http_web_config_remember(wc, key);
    return ok;
}

int http_auth_init_key(uint64_t key[2])
{
    ssize_t n = getrandom(key, 2 * sizeof(uint64_t), 0);
    return n == (ssize_t)(2 * sizeof(uint64_t)) ? 0 : -EIO;
}
