/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where requests go: the server URL of the configuration taken apart (scheme, host, port, a path
 * prefix such as a proxying front end's), and the proxy the environment names for it. Proxies
 * follow Go's net/http rules, which client-go uses: HTTPS_PROXY for https servers and HTTP_PROXY
 * for http ones (upper or lower case), NO_PROXY exceptions (a host, a domain and its subdomains,
 * ".domain", an address, a CIDR range, "*"), and never a proxy for localhost or a loopback address.
 * A proxy is used through a CONNECT tunnel, with Basic credentials when its URL carries them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kube-internal.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int kube_base64_encode(const char *in, size_t n, struct strbuf *out)
{
    const unsigned char *p = (const unsigned char *)in;
    int r = 0;
    for (size_t i = 0; i < n && r >= 0; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {b64[v >> 18 & 63], b64[v >> 12 & 63], i + 1 < n ? b64[v >> 6 & 63] : '=',
                     i + 2 < n ? b64[v & 63] : '='};
        r = strbuf_add(out, q, 4);
    }
    return r;
}

/* "host:port", "[v6]:port" or "host" (default port) into t's fields. */
static int split_hostport(const char *s, size_t n, const char *default_port, char *host,
                          size_t host_n, char *port, size_t port_n)
{
    const char *end = s + n, *h = s, *he, *colon = NULL;
    if (n && *s == '[') {
        he = memchr(s, ']', n);
        if (!he)
            return -EINVAL;
        h = s + 1;
        if (he + 1 < end) {
            if (he[1] != ':')
                return -EINVAL;
            colon = he + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        he = colon ? colon : end;
    }
    size_t hn = (size_t)(he - h);
    const char *p = colon ? colon + 1 : default_port;
    size_t pn = colon ? (size_t)(end - p) : strlen(default_port);
    if (hn == 0 || hn >= host_n || pn == 0 || pn >= port_n || strspn(p, "0123456789") < pn)
        return -EINVAL;
    memcpy(host, h, hn);
    host[hn] = '\0';
    memcpy(port, p, pn);
    port[pn] = '\0';
    long v = strtol(port, NULL, 10);
    return v > 0 && v < 65536 ? 0 : -EINVAL;
}

static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcasecmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Whether addr falls in the CIDR range "net/bits". */
static bool in_cidr(const char *host, const char *entry, size_t n)
{
    char net[64];
    const char *slash = memchr(entry, '/', n);
    if (!slash || (size_t)(slash - entry) >= sizeof(net))
        return false;
    memcpy(net, entry, (size_t)(slash - entry));
    net[slash - entry] = '\0';
    const char *digits = slash + 1;
    size_t dn = (size_t)(entry + n - digits);
    int bits = dn && dn <= 3 && strspn(digits, "0123456789") >= dn ? 0 : -1;
    for (size_t i = 0; bits >= 0 && i < dn; i++)
        bits = bits * 10 + (digits[i] - '0');
    unsigned char a[16], b[16];
    int fam = strchr(net, ':') ? AF_INET6 : AF_INET;
    int len = fam == AF_INET6 ? 16 : 4;
    if (bits < 0 || bits > len * 8 || inet_pton(fam, net, b) != 1 || inet_pton(fam, host, a) != 1)
        return false;
    for (int i = 0; i < bits; i++)
        if ((a[i / 8] ^ b[i / 8]) & (0x80 >> (i % 8)))
            return false;
    return true;
}

/* One NO_PROXY entry against the host (ports in entries are ignored). */
static bool no_proxy_entry(const char *host, const char *e, size_t n)
{
    if (n == 1 && *e == '*')
        return true;
    if (memchr(e, '/', n))
        return in_cidr(host, e, n);
    if (*e != '[' && memchr(e, ':', n) && memchr(e, ':', n) == memrchr(e, ':', n))
        n = (size_t)((const char *)memchr(e, ':', n) - e); /* host:port */
    if (n && *e == '.') {                                  /* ".example.com": subdomains only */
        size_t hn = strlen(host);
        return hn > n && strncasecmp(host + hn - n, e, n) == 0;
    }
    size_t hn = strlen(host);
    if (hn == n && strncasecmp(host, e, n) == 0)
        return true;
    return hn > n && host[hn - n - 1] == '.' && strncasecmp(host + hn - n, e, n) == 0;
}

static const char *env2(const char *upper, const char *lower)
{
    const char *v = getenv(upper);
    return v && *v ? v : getenv(lower);
}

bool kube_no_proxy(const char *host, const char *list)
{
    if (is_loopback(host))
        return true;
    for (const char *s = list ? list : ""; *s;) {
        s += strspn(s, " ,");
        size_t n = strcspn(s, ",");
        while (n && s[n - 1] == ' ')
            n--;
        if (n && no_proxy_entry(host, s, n))
            return true;
        s += strcspn(s, ",");
    }
    return false;
}

/* "http://user:pass@host:port" (scheme optional, http only) into the target's proxy fields. */
static int parse_proxy(struct kube_target *t, const char *url, struct diag *d)
{
    const char *s = url;
    if (strncasecmp(s, "http://", 7) == 0)
        s += 7;
    else if (strstr(s, "://"))
        return diag_fail(d, -EINVAL, "proxy %s: only http:// proxies are supported", url);
    size_t n = strcspn(s, "/");
    const char *at = memrchr(s, '@', n);
    if (at) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
        int r = strbuf_addstr(&sb, "Proxy-Authorization: Basic ");
        if (r >= 0)
            r = kube_base64_encode(s, (size_t)(at - s), &sb);
        if (r < 0)
            return r;
        t->proxy_auth = strbuf_detach(&sb, NULL);
        if (!t->proxy_auth)
            return -ENOMEM;
        n -= (size_t)(at + 1 - s);
        s = at + 1;
    }
    if (split_hostport(s, n, "80", t->proxy_host, sizeof(t->proxy_host), t->proxy_port,
                       sizeof(t->proxy_port)) < 0)
        return diag_fail(d, -EINVAL, "proxy %s: not a host:port", url);
    t->proxied = true;
    return 0;
}

void kube_target_release(struct kube_target *t)
{
    free(t->base_path);
    if (t->proxy_auth) {
        explicit_bzero(t->proxy_auth, strlen(t->proxy_auth));
        free(t->proxy_auth);
    }
    *t = (struct kube_target){0};
}

int kube_target_parse(const char *server, struct kube_target *t, struct diag *d)
{
    *t = (struct kube_target){0};
    const char *s = server;
    if (strncasecmp(s, "https://", 8) == 0) {
        t->https = true;
        s += 8;
    } else if (strncasecmp(s, "http://", 7) == 0)
        s += 7;
    else
        return diag_fail(d, -EINVAL, "server %s: not an http(s) URL", server);
    size_t n = strcspn(s, "/?#");
    if (split_hostport(s, n, t->https ? "443" : "80", t->host, sizeof(t->host), t->port,
                       sizeof(t->port)) < 0)
        return diag_fail(d, -EINVAL, "server %s: bad host or port", server);
    bool v6 = strchr(t->host, ':') != NULL;
    snprintf(t->authority, sizeof(t->authority), "%s%s%s:%s", v6 ? "[" : "", t->host, v6 ? "]" : "",
             t->port);
    const char *path = s + n;
    size_t pn = strcspn(path, "?#");
    while (pn && path[pn - 1] == '/')
        pn--;
    t->base_path = strndup(path, pn);
    if (!t->base_path)
        return -ENOMEM;
    const char *proxy =
        t->https ? env2("HTTPS_PROXY", "https_proxy") : env2("HTTP_PROXY", "http_proxy");
    if (proxy && *proxy && !kube_no_proxy(t->host, env2("NO_PROXY", "no_proxy"))) {
        int r = parse_proxy(t, proxy, d);
        if (r < 0) {
            kube_target_release(t);
            return r;
        }
    }
    return 0;
}
