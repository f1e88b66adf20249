/* SPDX-License-Identifier: Apache-2.0 */
/*
 * API paths. Names and namespaces often come from objects the API server or a user handed us (a
 * claim's namespace, a slice's name); they are checked against Kubernetes' own naming rules before
 * they become part of a URL, so a stray "/", "?" or ".." can never redirect a request.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kube.h"

#define DNS_LABEL_MAX 63
#define DNS_SUBDOMAIN_MAX 253

static bool is_lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

/* label: [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..len) */
static bool label_ok(const char *s, size_t len)
{
    if (len == 0 || len > DNS_LABEL_MAX)
        return false;
    if (!is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

static bool subdomain_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > DNS_SUBDOMAIN_MAX)
        return false;
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!label_ok(p, n))
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}

/* Group/version and resource come from code, not from input; still, nothing that would change
 * the URL's structure. */
static bool plain_segment_ok(const char *s, bool allow_slash)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!is_lower_alnum(*p) && *p != '-' && *p != '.' && !(allow_slash && *p == '/'))
            return false;
    return strstr(s, "..") == NULL && s[0] != '/';
}

int kube_path(char *buf, size_t n, const char *group_version, const char *resource, const char *ns,
              const char *name, struct diag *d)
{
    if (!group_version || !plain_segment_ok(group_version, true))
        return diag_fail(d, -EINVAL, "invalid API group/version \"%s\"",
                         group_version ? group_version : "");
    if (!resource || !plain_segment_ok(resource, false))
        return diag_fail(d, -EINVAL, "invalid resource \"%s\"", resource ? resource : "");
    if (ns && !label_ok(ns, strlen(ns)))
        return diag_fail(d, -EINVAL,
                         "invalid namespace \"%.*s\": must be a DNS label (at most 63 lower-case "
                         "letters, digits and '-', starting and ending with a letter or digit)",
                         DNS_SUBDOMAIN_MAX, ns);
    if (name && !subdomain_ok(name))
        return diag_fail(d, -EINVAL,
                         "invalid name \"%.*s\": must be a DNS subdomain (at most 253 lower-case "
                         "letters, digits, '-' and '.', each part starting and ending with a "
                         "letter or digit)",
                         DNS_SUBDOMAIN_MAX, name);
    bool core = strcmp(group_version, "v1") == 0;
    int r = snprintf(buf, n, "%s/%s%s%s/%s%s%s", core ? "/api" : "/apis", group_version,
                     ns ? "/namespaces/" : "", ns ? ns : "", resource, name ? "/" : "",
                     name ? name : "");
    if (r < 0)
        return diag_fail(d, -EINVAL, "cannot format the path");
    if ((size_t)r >= n)
        return diag_fail(d, -ENAMETOOLONG, "path of %s \"%s\" too long", resource,
                         name ? name : "");
    return 0;
}
