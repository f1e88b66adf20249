/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin check: the node can be given GPUs. With the device plugin that is the node's
 * status.allocatable holding nvidia.com/gpu (or a renamed nvidia.com/gpu.shared, or
 * nvidia.com/mig-<profile>) of at least one; with the DRA driver (which replaces the device plugin
 * on a node, never runs beside it) it is ResourceSlices of driver gpu.nvidia.com published for
 * the node with at least one device. NVIDIA's validator looks at the node's capacity; allocatable
 * is what the scheduler hands out, so a plugin that registered but reports every GPU unhealthy does
 * not pass here. Asked up to --plugin-retries times (NVIDIA: 30), a sleep interval apart (5 s).
 */
#include <errno.h>
#include <string.h>

#include "kube.h"
#include "validate-internal.h"

/* ---- quantities ---- */

/* Digits a quantity may have: device counts are small, and 30 digits keep the arithmetic below
 * within 128 bits. */
#define QUANTITY_DIGITS_MAX 30

static unsigned __int128 pow10_u128(unsigned n)
{
    unsigned __int128 v = 1;
    while (n--)
        v *= 10;
    return v;
}

/*
 * quantity = [sign] number [suffix] ; number = digits ["." digits] | "." digits ;
 * suffix = binary-SI | decimal-SI | ("e"|"E") [sign] digits
 * Exact: the number is read as an integer m with f decimals, so the value is m / 10^f * base^p.
 */
int validate_quantity_at_least_one(const char *q, bool *ret)
{
    static const struct {
        const char *name;
        int base;  /* 10 or 1024 */
        int power; /* of base */
    } suffixes[] = {
        {"Ki", 1024, 1}, {"Mi", 1024, 2}, {"Gi", 1024, 3}, {"Ti", 1024, 4}, {"Pi", 1024, 5},
        {"Ei", 1024, 6}, {"n", 10, -9},   {"u", 10, -6},   {"m", 10, -3},   {"k", 10, 3},
        {"M", 10, 6},    {"G", 10, 9},    {"T", 10, 12},   {"P", 10, 15},   {"E", 10, 18},
    };
    const char *p = q;
    bool negative = false;
    unsigned __int128 m = 0;
    unsigned digits = 0, frac = 0;
    int base = 10, power = 0;
    if (*p == '+' || *p == '-')
        negative = *p++ == '-';
    for (bool dot = false; (*p >= '0' && *p <= '9') || (*p == '.' && !dot); p++) {
        if (*p == '.') {
            dot = true;
            continue;
        }
        if (++digits > QUANTITY_DIGITS_MAX)
            return -EINVAL;
        m = m * 10 + (unsigned)(*p - '0');
        frac += dot;
    }
    if (digits == 0)
        return -EINVAL;
    if (*p == 'e' || *p == 'E') {
        const char *e = p + 1;
        bool eneg = false;
        if (*e == '+' || *e == '-')
            eneg = *e++ == '-';
        size_t nd = strspn(e, "0123456789");
        if (nd == 0 || nd > 3 || e[nd])
            return -EINVAL;
        for (size_t i = 0; i < nd; i++)
            power = power * 10 + (e[i] - '0');
        if (eneg)
            power = -power;
    } else if (*p) {
        size_t i = 0;
        while (i < ARRAY_SIZE(suffixes) && strcmp(p, suffixes[i].name) != 0)
            i++;
        if (i == ARRAY_SIZE(suffixes))
            return -EINVAL;
        base = suffixes[i].base;
        power = suffixes[i].power;
    }
    if (negative || m == 0) {
        *ret = false;
        return 0;
    }
    if (base == 10) {
        /* m * 10^(power - frac) >= 1 */
        int e = power - (int)frac;
        *ret = e >= 0 || (-e <= QUANTITY_DIGITS_MAX && m >= pow10_u128((unsigned)-e));
        return 0;
    }
    /* m * 1024^power >= 10^frac, stopping once it is (so nothing overflows) */
    unsigned __int128 target = pow10_u128(frac);
    for (int i = 0; i < power && m < target; i++)
        m *= 1024;
    *ret = m >= target;
    return 0;
}

/* ---- what the API says ---- */

static bool gpu_resource_name(const char *name)
{
    return strncmp(name, "nvidia.com/gpu", 14) == 0 || strncmp(name, "nvidia.com/mig-", 15) == 0;
}

const char *validate_node_gpu_resource(const json_t *node, const char **ret_quantity)
{
    json_t *alloc = json_object_get(json_object_get(node, "status"), "allocatable"), *value;
    const char *name;
    json_object_foreach(alloc, name, value)
    {
        const char *q = json_string_value(value);
        bool enough = false;
        if (!gpu_resource_name(name) || !q || validate_quantity_at_least_one(q, &enough) < 0 ||
            !enough)
            continue;
        if (ret_quantity)
            *ret_quantity = q;
        return name;
    }
    return NULL;
}

size_t validate_slice_devices(const json_t *list)
{
    json_t *item;
    size_t i, n = 0;
    json_array_foreach(json_object_get(list, "items"), i, item)
    {
        n += json_array_size(json_object_get(json_object_get(item, "spec"), "devices"));
    }
    return n;
}

struct paths {
    char node[512];
    char slices[1024];
};

static int make_paths(const char *node, struct paths *p, struct diag *d)
{
    int r = kube_path(p->node, sizeof(p->node), "v1", "nodes", NULL, node, d);
    if (r < 0)
        return r;
    r = kube_path(p->slices, sizeof(p->slices), "resource.k8s.io/v1", "resourceslices", NULL, NULL,
                  d);
    if (r < 0)
        return r;
    /* client-go's encoding of "spec.nodeName=<node>,spec.driver=<driver>"; the node name is a
     * checked DNS subdomain, so nothing else needs escaping. */
    size_t len = strlen(p->slices);
    if ((size_t)snprintf(p->slices + len, sizeof(p->slices) - len,
                         "?fieldSelector=spec.nodeName%%3D%s%%2Cspec.driver%%3D%s", node,
                         VALIDATE_DRA_DRIVER) >= sizeof(p->slices) - len)
        return diag_fail(d, -ENAMETOOLONG, "node name too long");
    return 0;
}

static void describe(const struct validate_reply *reply, char *buf, size_t size)
{
    if (reply->status == 0)
        snprintf(buf, size, "no answer: %s", reply->message);
    else
        snprintf(buf, size, "%d %s%s%s", reply->status, reply->reason,
                 reply->message[0] ? ": " : "", reply->message);
}

/* The DRA driver's slices for the node: their device count, 0 when there are none or the API does
 * not serve resource.k8s.io/v1; why gets what went wrong otherwise. */
static size_t dra_devices(struct validate_kube *k, const struct paths *p, char *why, size_t size)
{
    struct validate_reply reply;
    size_t n = 0;
    why[0] = '\0';
    if (validate_kube_get(k, p->slices, true, &reply) < 0)
        return 0;
    if (reply.status == 200)
        n = validate_slice_devices(reply.body);
    else if (reply.status != 404)
        describe(&reply, why, size);
    validate_reply_release(&reply);
    return n;
}

static int plugin_once(struct validate_kube *k, const struct validate_options *o,
                       const struct paths *p, struct diag *d)
{
    struct validate_reply reply;
    char why[600];
    int r = validate_kube_get(k, p->node, false, &reply);
    if (r < 0)
        return diag_fail(d, r, "cannot ask the API server: %s", strerror(-r));
    describe(&reply, why, sizeof(why));
    if (reply.status == 404 || reply.status == 401 || reply.status == 403) {
        r = diag_fail(d, -EIO, "cannot read node %s: %s", o->node_name, why);
        validate_reply_release(&reply);
        return r;
    }
    if (reply.status != 200) {
        validate_reply_release(&reply);
        diag_fail(d, -EAGAIN, "cannot read node %s: %s", o->node_name, why);
        return VALIDATE_NOT_READY;
    }
    const char *qty = NULL;
    const char *res = validate_node_gpu_resource(reply.body, &qty);
    if (res) {
        log_info("the node advertises GPUs", "node", o->node_name, "resource", res, "allocatable",
                 qty);
        validate_reply_release(&reply);
        return VALIDATE_READY;
    }
    validate_reply_release(&reply);
    size_t n = dra_devices(k, p, why, sizeof(why));
    if (n) {
        log_info("the node's GPUs are published by the DRA driver", "node", o->node_name, "driver",
                 VALIDATE_DRA_DRIVER, "devices", LOG_INT(n));
        return VALIDATE_READY;
    }
    diag_fail(d, -EAGAIN,
              "node %s has no allocatable nvidia.com/gpu or nvidia.com/mig-* and no ResourceSlice "
              "of " VALIDATE_DRA_DRIVER " lists a device for it%s%s%s",
              o->node_name, why[0] ? " (ResourceSlices: " : "", why, why[0] ? ")" : "");
    return VALIDATE_NOT_READY;
}

int validate_plugin(const struct validate_options *o, struct diag *d)
{
    _cleanup_(validate_kube_closep) struct validate_kube *k = NULL;
    struct paths p;
    int r = make_paths(o->node_name, &p, d);
    if (r < 0)
        return r;
    r = validate_kube_open(o->kubeconfig, d, &k);
    if (r < 0)
        return r;
    for (unsigned attempt = 1;; attempt++) {
        diag_init(d);
        r = plugin_once(k, o, &p, d);
        if (r != VALIDATE_NOT_READY)
            return r;
        if (o->plugin_retries && attempt >= o->plugin_retries) {
            char why[DIAG_MSG_MAX];
            snprintf(why, sizeof(why), "%s", d ? d->msg : "");
            diag_fail(d, -ETIMEDOUT,
                      "GPU resources are not discovered by the node after %u tries: %s", attempt,
                      why);
            return VALIDATE_NOT_READY;
        }
        log_info("GPU resources are not yet discovered by the node", "retry", LOG_INT(attempt),
                 "reason", d ? d->msg : "");
        validate_sleep_ms(o->sleep_ms);
    }
}
