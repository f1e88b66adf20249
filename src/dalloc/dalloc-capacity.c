/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Consumable capacity (reference §4.7, DRAConsumableCapacity): what an allocation of a device
 * consumes from each of its capacities — the request rounded by the capacity's requestPolicy
 * (validRange: up to min, then onto the min + k*step grid, above max not eligible; validValues:
 * the smallest listed value >= the request), or the policy's default when not requested, or the
 * whole capacity without a policy — and whether that still fits next to the device's other shares.
 * Dedicated devices are filtered by the same checks but record nothing. Amounts are whole units
 * (int64); capacities or requests with fractions are refused with -ENOTSUP rather than guessed.
 */
#include <errno.h>
#include <string.h>

#include "dalloc-model.h"

static int whole(const json_t *v, int64_t *ret)
{
    struct cel_quantity q;

    if (dalloc_quantity(v, &q) < 0)
        return -EINVAL;
    return cel_quantity_as_int64(&q, ret) ? 0 : -ENOTSUP;
}

static int parse_range(const json_t *r, struct dalloc_policy *p)
{
    int e;

    p->range = true;
    if ((e = whole(json_object_get(r, "min"), &p->min)) < 0)
        return e;
    p->has_max = json_object_get(r, "max") != NULL;
    if (p->has_max && (e = whole(json_object_get(r, "max"), &p->max)) < 0)
        return e;
    p->has_step = json_object_get(r, "step") != NULL;
    if (p->has_step && (e = whole(json_object_get(r, "step"), &p->step)) < 0)
        return e;
    if (p->has_step && p->step <= 0)
        return -EINVAL;
    return 0;
}

int dalloc_policy_parse(const json_t *policy, int64_t value, struct dalloc_policy *p)
{
    const json_t *vals = json_object_get(policy, "validValues"), *v;
    size_t i;
    int e;

    *p = (struct dalloc_policy){.set = true, .def = value};
    if (json_object_get(policy, "default") &&
        (e = whole(json_object_get(policy, "default"), &p->def)) < 0)
        return e;
    if (vals && json_object_get(policy, "validRange"))
        return -EINVAL;
    if (json_object_get(policy, "validRange"))
        return parse_range(json_object_get(policy, "validRange"), p);
    if (json_array_size(vals) > 10)
        return -EINVAL;
    json_array_foreach(vals, i, v)
    {
        if ((e = whole(v, &p->vals[i])) < 0)
            return e;
        if (i > 0 && p->vals[i] <= p->vals[i - 1])
            return -EINVAL;
        p->n_vals = i + 1;
    }
    return 0;
}

/* The amount a request of req consumes under p: 1 with *ret, 0 not eligible. */
static int round_request(const struct dalloc_policy *p, int64_t req, int64_t *ret)
{
    if (!p->set || req == p->def) {
        *ret = req;
        return 1;
    }
    if (p->range) {
        int64_t amt = req < p->min ? p->min : req;
        if (p->has_step && amt > p->min) {
            int64_t k = (amt - p->min + p->step - 1) / p->step;
            amt = p->min + k * p->step;
        }
        if (p->has_max && amt > p->max)
            return 0;
        *ret = amt;
        return 1;
    }
    for (size_t i = 0; i < p->n_vals; i++)
        if (p->vals[i] >= req) {
            *ret = p->vals[i];
            return 1;
        }
    return p->n_vals ? 0 : (*ret = req, 1);
}

static int cap_index(const struct dalloc_device *dev, const char *name)
{
    for (size_t i = 0; i < dev->n_caps; i++)
        if (strcmp(dev->caps[i].name, name) == 0)
            return (int)i;
    return -1;
}

int dalloc_capacity_fits(const struct dalloc_device *dev, const struct dalloc_exact *e,
                         int64_t *amounts, struct diag *d)
{
    for (size_t k = 0; k < e->n_capreq; k++) {
        int i = cap_index(dev, e->capreq_names[k]);
        if (i < 0)
            return 0; /* the device does not define it */
        if (!dev->capint_ok[i])
            return diag_fail(d, -ENOTSUP,
                             "device %s/%s/%s: capacity %s: only whole-unit capacities are "
                             "supported by gpuplane yet",
                             dev->slice->driver, dev->slice->pool, dev->name, dev->caps[i].name);
    }
    for (size_t i = 0; i < dev->n_caps; i++) {
        const struct dalloc_policy *p = dev->policy ? &dev->policy[i] : NULL;
        int64_t amt = p && p->set ? p->def : dev->capint[i];
        size_t k = 0;

        while (k < e->n_capreq && strcmp(e->capreq_names[k], dev->caps[i].name) != 0)
            k++;
        if (k < e->n_capreq) {
            if (!(p && dev->multi ? round_request(p, e->capreq_vals[k], &amt)
                                  : (amt = e->capreq_vals[k], 1)))
                return 0;
        }
        if (!dev->capint_ok[i])
            continue; /* not requested and not multi-allocatable: nothing to count */
        if (amt > dev->capint[i] - (dev->multi ? dev->consumed[i] : 0))
            return 0;
        amounts[i] = amt;
    }
    return 1;
}

void dalloc_capacity_apply(struct dalloc_device *dev, const int64_t *amounts, int sign)
{
    for (size_t i = 0; i < dev->n_caps; i++)
        dev->consumed[i] += sign * amounts[i];
}
