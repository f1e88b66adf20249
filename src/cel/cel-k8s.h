/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes quantities and semantic versions as CEL values (the kubernetes.Quantity and
 * kubernetes.Semver object types of cel-lib-quantity.c and cel-lib-semver.c), for code that builds
 * values outside an evaluation: the DRA device variable (cel-dra.c) and the allocator's own device
 * model. An object may live anywhere that outlives the evaluations that see it — an arena, a
 * struct of the caller's, static storage — and a value pointing at it copies nothing.
 */
#pragma once

#include "base-diag.h"
#include "cel-quantity.h"
#include "cel-semver.h"
#include "cel-value.h"

extern const struct cel_type cel_type_quantity; /* "kubernetes.Quantity" */
extern const struct cel_type cel_type_semver;   /* "kubernetes.Semver" */

struct cel_quantity_obj {
    struct cel_object base; /* first: a value's obj points here */
    struct cel_quantity q;  /* its text, if any, must live as long as the object */
};

struct cel_semver_obj {
    struct cel_object base;
    struct cel_semver v; /* its pre/build text must live as long as the object */
};

/* Makes o the object for q / v (copied into o; nothing allocated). */
void cel_quantity_obj_init(struct cel_quantity_obj *o, const struct cel_quantity *q);
void cel_semver_obj_init(struct cel_semver_obj *o, const struct cel_semver *v);

static inline struct cel_value cel_quantity_value(const struct cel_quantity_obj *o)
{
    return cel_object_value(&o->base);
}

static inline struct cel_value cel_semver_value(const struct cel_semver_obj *o)
{
    return cel_object_value(&o->base);
}

/* The quantity / version a value holds, or NULL when it holds something else. */
const struct cel_quantity *cel_value_quantity(struct cel_value v);
const struct cel_semver *cel_value_semver(struct cel_value v);
