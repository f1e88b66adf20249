/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Consumable capacity (reference §4.7, DRAConsumableCapacity): what an allocation of a device
 * consumes from each of its capacities — the request rounded by the capacity's requestPolicy
 * (validRange: up to min, then onto the min + k*step grid, above max not eligible; validValues:
 * the smallest listed value >= the request), or the policy's default when not requested, or the
 * whole capacity without a policy — and whether that still fits next to the device's other shares.
 * Dedicated devices are filtered by the same checks but record nothing.
 *
 * Amounts are exact: every Quantity is converted to nano-units (dalloc_amount, a 128-bit integer;
 * Kubernetes never keeps a quantity finer than 1n), so "0.5", "100m", "1.5Gi" and "10Gi" add,
 * compare and round onto a step grid with integer arithmetic only. Quantities beyond 10^28 units
 * do not convert: requests saturate (they fit nowhere), policies are refused as out of range.
 */
#include <errno.h>
#include <string.h>

#include "dalloc-model.h"

typedef unsigned __int128 u128;

int dalloc_amount_of(const struct cel_quantity *q, dalloc_amount *ret)
{
    const u128 max = (u128)DALLOC_AMOUNT_MAX;
    u128 m = q->mag;
    int64_t e = (int64_t)q->exp + 9;
    bool up = false;

    /* below 1n (Kubernetes has rounded it up already; do the same for any other source) */
    for (; e < 0 && m != 0; e++) {
        up = up || m % 10 != 0;
        m /= 10;
    }
    m += up;
    for (; e > 0 && m != 0 && m <= max; e--)
        m *= 10;
    if (m > max) {
        *ret = q->neg ? -DALLOC_AMOUNT_MAX - 1 : DALLOC_AMOUNT_MAX + 1;
        return -ERANGE;
    }
    *ret = q->neg ? -(dalloc_amount)m : (dalloc_amount)m;
    return 0;
}

struct cel_quantity dalloc_amount_quantity(dalloc_amount v)
{
    struct cel_quantity q = {.format = CEL_QUANTITY_DECIMAL_SI};

    if (v % DALLOC_AMOUNT_NANO == 0 && v / DALLOC_AMOUNT_NANO <= INT64_MAX &&
        v / DALLOC_AMOUNT_NANO >= INT64_MIN)
        return cel_quantity_from_int((int64_t)(v / DALLOC_AMOUNT_NANO));
    /* Kubernetes' NewScaledQuantity(v, Nano): mantissa v, scale -9 (its int64 form while v fits) */
    q.neg = v < 0;
    q.mag = v < 0 ? (u128)-v : (u128)v;
    q.exp = q.dec_exp = -9;
    q.dec = q.mag > (u128)INT64_MAX;
    return q;
}

dalloc_amount dalloc_amount_add(dalloc_amount a, dalloc_amount b)
{
    dalloc_amount s = a + b; /* both within +-(DALLOC_AMOUNT_MAX + 1): no overflow */

    if (s > DALLOC_AMOUNT_MAX)
        return DALLOC_AMOUNT_MAX + 1;
    if (s < -DALLOC_AMOUNT_MAX)
        return -DALLOC_AMOUNT_MAX - 1;
    return s;
}

static int amount(const json_t *v, dalloc_amount *ret)
{
    struct cel_quantity q;

    if (dalloc_quantity(v, &q) < 0)
        return -EINVAL;
    return dalloc_amount_of(&q, ret);
}

static int parse_range(const json_t *r, struct dalloc_policy *p)
{
    int e;

    p->range = true;
    if ((e = amount(json_object_get(r, "min"), &p->min)) < 0)
        return e;
    p->has_max = json_object_get(r, "max") != NULL;
    if (p->has_max && (e = amount(json_object_get(r, "max"), &p->max)) < 0)
        return e;
    p->has_step = json_object_get(r, "step") != NULL;
    if (p->has_step && (e = amount(json_object_get(r, "step"), &p->step)) < 0)
        return e;
    if (p->has_step && p->step <= 0)
        return -EINVAL;
    return 0;
}

int dalloc_policy_parse(const json_t *policy, dalloc_amount value, struct dalloc_policy *p)
{
    const json_t *vals = json_object_get(policy, "validValues"), *v;
    size_t i;
    int e;

    *p = (struct dalloc_policy){.set = true, .def = value};
    if (json_object_get(policy, "default") &&
        (e = amount(json_object_get(policy, "default"), &p->def)) < 0)
        return e;
    if (vals && json_object_get(policy, "validRange"))
        return -EINVAL;
    if (json_object_get(policy, "validRange"))
        return parse_range(json_object_get(policy, "validRange"), p);
    if (json_array_size(vals) > 10)
        return -EINVAL;
    json_array_foreach(vals, i, v)
    {
        if ((e = amount(v, &p->vals[i])) < 0)
            return e;
        if (i > 0 && p->vals[i] <= p->vals[i - 1])
            return -EINVAL;
        p->n_vals = i + 1;
    }
    return 0;
}

/* The amount a request of req consumes under p: 1 with *ret, 0 not eligible. All operands lie
 * within +-(DALLOC_AMOUNT_MAX + 1), so the grid arithmetic below cannot overflow. */
static int round_request(const struct dalloc_policy *p, dalloc_amount req, dalloc_amount *ret)
{
    if (!p->set || req == p->def) {
        *ret = req;
        return 1;
    }
    if (p->range) {
        dalloc_amount amt = req < p->min ? p->min : req;
        if (p->has_step && amt > p->min) {
            /* the smallest min + k*step >= amt */
            dalloc_amount k = (amt - p->min + p->step - 1) / p->step;
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
                         dalloc_amount *amounts, struct diag *d)
{
    for (size_t k = 0; k < e->n_capreq; k++) {
        int i = cap_index(dev, e->capreq_names[k]);
        if (i < 0)
            return 0; /* the device does not define it */
        if (!dev->capamt_ok[i])
            return diag_fail(d, -ENOTSUP,
                             "device %s/%s/%s: capacity %s: values beyond 10^28 are not "
                             "supported by gpuplane",
                             dev->slice->driver, dev->slice->pool, dev->name, dev->caps[i].name);
    }
    for (size_t i = 0; i < dev->n_caps; i++) {
        const struct dalloc_policy *p = dev->policy ? &dev->policy[i] : NULL;
        dalloc_amount amt = p && p->set ? p->def : dev->capamt[i];
        size_t k = 0;

        while (k < e->n_capreq && strcmp(e->capreq_names[k], dev->caps[i].name) != 0)
            k++;
        if (k < e->n_capreq) {
            if (!(p && dev->multi ? round_request(p, e->capreq_vals[k], &amt)
                                  : (amt = e->capreq_vals[k], 1)))
                return 0;
        }
        if (!dev->capamt_ok[i])
            continue; /* not requested and not multi-allocatable: nothing to count */
        if (amt > dev->capamt[i] - (dev->multi ? dev->consumed[i] : 0))
            return 0;
        amounts[i] = amt;
    }
    return 1;
}

void dalloc_capacity_apply(struct dalloc_device *dev, const dalloc_amount *amounts, int sign)
{
    for (size_t i = 0; i < dev->n_caps; i++)
        dev->consumed[i] += sign * amounts[i];
}
