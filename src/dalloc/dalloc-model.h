/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allocator's in-memory model, shared by the files of src/dalloc: slices with their devices
 * (attributes and capacities in the form src/cel's device value borrows, strings borrowed from the
 * loaded JSON objects, which the allocator keeps referenced), pools gathered for the node, classes,
 * and claims with their requests, constraints and configs. Decoding fills it (dalloc-decode.c),
 * dalloc-pools.c picks the pools, dalloc-select.c runs selectors, dalloc-search.c searches and
 * dalloc-result.c writes status.allocation.
 */
#pragma once

#include <jansson.h>

#include "base-vec.h"
#include "cel-dra.h"
#include "cel-k8s.h"
#include "cel.h"
#include "dalloc.h"

enum dalloc_node_kind {
    DALLOC_NODE_NAME,
    DALLOC_NODE_ALL,
    DALLOC_NODE_SELECTOR,
    DALLOC_NODE_PER_DEVICE, /* perDeviceNodeSelection: each device says (slices only) */
    DALLOC_NODE_IGNORED,    /* perDeviceNodeSelection while DRAPartitionableDevices is off */
};

struct dalloc_slice;
struct dalloc_pool;

/* One counter a device consumes (DRAPartitionableDevices). */
struct dalloc_consume {
    const char *set, *name;
    struct cel_quantity q;
    size_t counter; /* index into its pool's counters, resolved when the pool is built */
};

/* One counter of a pool's shared counter sets: what is still available. */
struct dalloc_counter {
    const char *set, *name;
    struct cel_quantity avail;
};

/*
 * An amount of consumable capacity (DRAConsumableCapacity) in nano-units, 10^-9 of the quantity's
 * unit. Kubernetes rounds every Quantity up to a multiple of 1n, so any quantity within
 * +-DALLOC_AMOUNT_MAX converts exactly; sums, rounding and comparisons are then plain integer
 * arithmetic with no floating point and no loss.
 */
typedef __int128 dalloc_amount;
#define DALLOC_AMOUNT_NANO ((dalloc_amount)1000000000)
/* 10^37 nano-units (10^28 units): far beyond any real capacity, with room for sums of a few. */
#define DALLOC_AMOUNT_MAX                                                                          \
    ((dalloc_amount)10000000000000000000ULL * (dalloc_amount)1000000000000000000ULL)

/* A capacity's requestPolicy (DRAConsumableCapacity). */
struct dalloc_policy {
    bool set;
    dalloc_amount def;
    dalloc_amount vals[10]; /* validValues, ascending */
    size_t n_vals;
    bool range; /* validRange */
    dalloc_amount min, max, step;
    bool has_max, has_step;
};

struct dalloc_device {
    const char *name;
    struct dalloc_slice *slice;
    struct cel_dra_attr *attrs;
    struct cel_semver_obj *versions; /* one per attribute, used by version attributes */
    const char **vtext;              /* one per attribute: a version's text */
    size_t n_attrs;
    struct cel_dra_capacity *caps;
    struct cel_quantity_obj *capvals;
    size_t n_caps;
    bool unallocatable;             /* consumes counters while DRAPartitionableDevices is off */
    json_t *taints;                 /* DeviceTaints (DRADeviceTaints on), or NULL */
    struct dalloc_consume *consume; /* DRAPartitionableDevices on */
    size_t n_consume;
    struct dalloc_pool *pool; /* set when its pool is gathered (newest generation only) */
    /* DRAConsumableCapacity on: allowMultipleAllocations, per-capacity policy, value (capamt_ok
     * false: beyond DALLOC_AMOUNT_MAX) and what the shares (allocated and being allocated)
     * consume */
    bool multi;
    bool multi_field; /* allowMultipleAllocations as written, whatever the gates */
    struct dalloc_policy *policy;
    dalloc_amount *capamt;
    bool *capamt_ok;
    dalloc_amount *consumed;
    /* DRADeviceBindingConditions on: copied into results; bindsToNode pins the node */
    json_t *binding_conditions, *binding_failure_conditions;
    bool binds_to_node;
    /* with perDeviceNodeSelection: the device's own node selection */
    enum dalloc_node_kind node_kind;
    const char *node_name;
    json_t *node_selector;
    /* search state */
    bool value_built;
    struct cel_value value;
    unsigned in_use; /* allocated elsewhere, or chosen by a normal request of this attempt */
};

struct dalloc_slice {
    json_t *obj;
    const char *name, *driver, *pool;
    int64_t generation, count;
    enum dalloc_node_kind node_kind;
    const char *node_name;
    json_t *node_selector;   /* the NodeSelector (one term) */
    json_t *shared_counters; /* DRAPartitionableDevices on: spec.sharedCounters, or NULL */
    bool has_counters;       /* spec.sharedCounters is set (whatever the gates) */
    struct dalloc_device *devices;
    size_t n_devices;
};

struct dalloc_pool {
    const char *driver, *name;
    int64_t generation, count; /* the newest generation among the node's slices, its size */
    struct vec slices; /* struct dalloc_slice *: the node's slices of that generation, by name */
    struct vec
        others; /* the pool's other slices of that generation (their devices hold counters) */
    bool incomplete, invalid;
    bool binding; /* has a device with binding conditions: searched after the others */
    struct dalloc_counter *counters; /* of every slice of the newest generation, any node */
    size_t n_counters;
};

struct dalloc_class {
    json_t *obj;
    const char *name;
    const char **selectors;
    size_t n_selectors;
    json_t *config; /* spec.config, or NULL */
};

enum dalloc_mode {
    DALLOC_EXACT_COUNT,
    DALLOC_ALL,
};

/* An ExactDeviceRequest or a DeviceSubRequest. */
struct dalloc_exact {
    const char *name; /* the sub-request's name, or the request's */
    const char *class_name;
    struct dalloc_class *cls;
    const char **selectors;
    size_t n_selectors;
    enum dalloc_mode mode;
    int64_t count;
    bool admin;
    json_t *tolerations;        /* DRADeviceTaints on: copied into the results */
    const char **capreq_names;  /* capacity.requests (DRAConsumableCapacity on) */
    dalloc_amount *capreq_vals; /* beyond DALLOC_AMOUNT_MAX: DALLOC_AMOUNT_MAX + 1 */
    size_t n_capreq;
    uint8_t *sel_cache; /* per candidate: 0 unknown, 1 no, 2 yes */
    size_t *all;        /* mode All: the candidates it takes, found before the search */
    size_t n_all;
};

struct dalloc_request {
    const char *name;
    bool first_available;
    struct dalloc_exact *subs; /* one when !first_available */
    size_t n_subs;
};

struct dalloc_constraint {
    const char **requests;
    size_t n_requests;
    const char *match;    /* fully qualified attribute name, or NULL */
    const char *distinct; /* or this */
};

/* One device chosen for a claim. */
struct dalloc_pick {
    size_t request, sub;
    struct dalloc_device *dev;
    size_t pos;              /* its index in the candidate list */
    dalloc_amount *consumed; /* multi-allocatable device: this share's amounts (owned), else NULL */
};

struct dalloc_claim {
    json_t *obj;
    const char *ns, *name;
    struct dalloc_request *requests;
    size_t n_requests;
    struct dalloc_constraint *constraints;
    size_t n_constraints;
    json_t *config;     /* spec.devices.config, or NULL */
    json_t *allocation; /* status.allocation, or NULL: pending */
    struct dalloc_pick picks[DALLOC_MAX_DEVICES_PER_CLAIM];
    size_t n_picks;
    size_t *chosen_sub; /* per request: the sub-request used */
    /* per request i: the fewest devices requests i.. can take (rest_min[n_requests] is 0); a
     * sub-request whose count does not fit next to them is never tried */
    int64_t *rest_min;
};

struct dalloc {
    char *node;
    struct dalloc_gates gates;
    uint64_t budget, steps;
    json_t *node_labels; /* the Node's metadata.labels, or NULL */
    json_t *namespaces;  /* namespace name -> its labels, for the Namespaces given (owned) */
    struct vec slices;   /* struct dalloc_slice * */
    struct vec classes;  /* struct dalloc_class * */
    struct vec claims;   /* struct dalloc_claim * */
    struct vec objs;     /* json_t *, referenced */
    /* built by dalloc_run */
    struct vec pools;      /* struct dalloc_pool * sorted by (driver, name) */
    struct vec candidates; /* struct dalloc_device *: usable pools' devices in search order */
    bool saw_invalid;
    struct dalloc_cel *cel;   /* borrowed from dalloc_set_cel, or made by the first run */
    struct cel_region region; /* the devices' CEL values */
    bool prepared;            /* pools gathered, selectors ready, allocated claims marked */
    size_t n_pending;
    /* where the search failed deepest, for the no-solution message */
    size_t fail_claim, fail_request;
    bool failed_any;
};

/* dalloc-decode.c */
_wur_ int dalloc_decode_slice(struct dalloc *a, json_t *obj, struct diag *d);
_wur_ int dalloc_decode_class(struct dalloc *a, json_t *obj, struct diag *d);
_wur_ int dalloc_decode_claim(struct dalloc *a, json_t *obj, struct diag *d);
void dalloc_slice_free(struct dalloc_slice *s);
void dalloc_class_free(struct dalloc_class *c);
void dalloc_claim_free(struct dalloc_claim *c);

/* A Quantity field (a string, or a JSON integer as Kubernetes also accepts): 0 or -EINVAL. The
 * result may borrow v's text. */
_wur_ int dalloc_quantity(const json_t *v, struct cel_quantity *ret);

/* dalloc-pools.c: builds a->pools and a->candidates for a->node. */
_wur_ int dalloc_pools_gather(struct dalloc *a, struct diag *d);
void dalloc_pools_release(struct dalloc *a);
/* Whether the node (name and labels) matches a NodeSelector's single term. */
bool dalloc_node_matches(const struct dalloc *a, const json_t *selector);
/* Whether a device of a perDeviceNodeSelection slice may be used on the node (true otherwise). */
bool dalloc_device_on_node(const struct dalloc *a, const struct dalloc_device *dev);

/* Reserves dev's counters in its pool: false (nothing reserved) when one does not fit. */
bool dalloc_counters_take(struct dalloc_device *dev);
void dalloc_counters_give(struct dalloc_device *dev);
/* Subtracts dev's consumption whether or not it fits (an allocated device; a counter never goes
 * below zero). */
void dalloc_counters_force(struct dalloc_device *dev);

/* dalloc-capacity.c (DRAConsumableCapacity). q in nano-units: 0, or -ERANGE when |q| exceeds
 * DALLOC_AMOUNT_MAX; *ret then saturates at +-(DALLOC_AMOUNT_MAX + 1), which callers may rely on
 * (a request that large fits nowhere). */
int dalloc_amount_of(const struct cel_quantity *q, dalloc_amount *ret);
/* The quantity of amount v: a whole number as cel_quantity_from_int gives it ("4", "10737418240"),
 * a fraction in decimal SI ("500m", "1500m"), canonical when formatted. */
struct cel_quantity dalloc_amount_quantity(dalloc_amount v);
/* a + b, saturating at +-(DALLOC_AMOUNT_MAX + 1). */
dalloc_amount dalloc_amount_add(dalloc_amount a, dalloc_amount b);
/* Whether dev can serve e given what its shares consume: 1 yes (amounts[0..n_caps) = what this
 * allocation would consume), 0 no, -ENOTSUP with d for a requested capacity beyond
 * DALLOC_AMOUNT_MAX. */
_wur_ int dalloc_capacity_fits(const struct dalloc_device *dev, const struct dalloc_exact *e,
                               dalloc_amount *amounts, struct diag *d);
/* Adds sign * amounts to dev's consumed capacity. */
void dalloc_capacity_apply(struct dalloc_device *dev, const dalloc_amount *amounts, int sign);
/* Parses a capacity's requestPolicy into *p: 0, -EINVAL (malformed), -ERANGE (a value beyond
 * DALLOC_AMOUNT_MAX). */
_wur_ int dalloc_policy_parse(const json_t *policy, dalloc_amount value, struct dalloc_policy *p);

/* dalloc-select.c */
_wur_ int dalloc_select_init(struct dalloc *a, struct diag *d);
void dalloc_select_release(struct dalloc *a);
/* Whether candidate `pos` matches the class and request selectors of e (cached): 1 yes, 0 no,
 * -EDOM with d for a compile or runtime error. */
_wur_ int dalloc_selectable(struct dalloc *a, const struct dalloc_claim *c, struct dalloc_exact *e,
                            size_t pos, struct diag *d);
/* The attribute `fqname` ("domain/id") of dev, or NULL. */
const struct cel_dra_attr *dalloc_device_attr(const struct dalloc_device *dev, const char *fqname);

/* Whether every NoSchedule/NoExecute taint of dev is tolerated by e (DRADeviceTaints). */
bool dalloc_tolerated(const struct dalloc_device *dev, const struct dalloc_exact *e);

/* dalloc-search.c. The candidates an `All` request (request ri of c, or its sub-request e) takes,
 * into e->all, found before any search as upstream does: every selectable device of the usable
 * pools with room for the request's capacity; -EINVAL with d when a pool the node sees is
 * incomplete or invalid, -EDOM for a CEL error. */
_wur_ int dalloc_all_devices(struct dalloc *a, const struct dalloc_claim *c, size_t ri,
                             struct dalloc_exact *e, struct diag *d);
/* 0 found, 1 no solution, <0 error. */
_wur_ int dalloc_search(struct dalloc *a, struct diag *d);
/* Drops the picks of a->claims[first..] (a search's outcome), giving back what they hold. */
void dalloc_search_undo(struct dalloc *a, size_t first);

/* dalloc-result.c: the pending claims with status.allocation from their picks. */
_wur_ int dalloc_result(struct dalloc *a, struct diag *d, json_t **ret);
