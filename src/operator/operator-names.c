/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checks on names that come from a ClusterPolicy and end up in other objects or in paths on a
 * node: a ConfigMap name, a config key that becomes a file name, a host directory. Checked where
 * the policy is read, so the renderer only ever handles names Kubernetes would accept.
 */
#include <string.h>

#include "operator-policy-internal.h"

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool op_valid_label(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > 63 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

bool op_valid_subdomain(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > 253)
        return false;
    /* Each dot-separated part is a label (without its length limit). */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != '.')
            j++;
        if (j == i || !is_lower_alnum(s[i]) || !is_lower_alnum(s[j - 1]))
            return false;
        for (size_t k = i; k < j; k++)
            if (!is_lower_alnum(s[k]) && s[k] != '-')
                return false;
        if (j == n)
            break;
        i = j + 1;
        if (i == n)
            return false;
    }
    return true;
}

bool op_valid_config_key(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

bool op_valid_host_path(const char *s)
{
    if (!s || s[0] != '/' || strlen(s) > 4096)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    /* No ".." component: "/a/../b", "/..", "/a/.." */
    for (const char *p = s; (p = strstr(p, "..")); p += 2)
        if (p[-1] == '/' && (p[2] == '/' || p[2] == '\0'))
            return false;
    return true;
}

bool op_valid_max_unavailable(const char *s)
{
    size_t n = s ? strlen(s) : 0, digits = 0;

    while (digits < n && s[digits] >= '0' && s[digits] <= '9')
        digits++;
    if (digits == 0 || digits > 9)
        return false;
    return digits == n || (digits + 1 == n && s[digits] == '%');
}
