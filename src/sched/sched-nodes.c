/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes' node filters for the scheduling simulator (see sched-nodes.h). Each call first checks
 * the pod's and then the node's fields: their types and the API rules the filters rely on (known
 * operators, value counts, integer Gt/Lt values), so that the filters after it read them without
 * further checks and an invalid pod is rejected on every node with the same reason. It runs once
 * per pod and node, so it only looks fields up and allocates nothing. A JSON null is an absent
 * field, as the API server reads it.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base-doc.h"
#include "base-macro.h"
#include "sched-nodes.h"

#define UNSCHEDULABLE_TAINT "node.kubernetes.io/unschedulable"
#define REQUIRED "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"

/* Where the reason of a rejection goes. */
struct why {
    char *buf;
    size_t n;
    const char **reason;
};

static bool reject(struct why *w, const char *msg)
{
    *w->reason = msg;
    return false;
}

/* Rejects with "invalid WHO: " and the formatted rest. */
_printf_(3, 4) static bool invalid(struct why *w, const char *who, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (!w->buf || w->n == 0)
        return reject(w, strcmp(who, "pod") == 0 ? "invalid pod" : "invalid node");
    k = snprintf(w->buf, w->n, "invalid %s: ", who);
    if (k >= 0 && (size_t)k < w->n) {
        va_start(ap, fmt);
        vsnprintf(w->buf + k, w->n - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return reject(w, w->buf);
}

/* obj's member key, NULL when absent or null. */
static const json_t *member(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    return json_is_null(v) ? NULL : v;
}

/* obj's string member key, "" when absent (or not a string: the checks rule that out). */
static const char *str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));

    return s ? s : "";
}

static bool is_one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0)
            return true;
    return false;
}

/* A decimal int64 with an optional sign and nothing else, as the API's label selectors parse the
 * operands of Gt and Lt. */
static bool parse_int64(const char *s, int64_t *ret)
{
    const uint64_t max = (uint64_t)INT64_MAX;
    uint64_t v = 0, lim;
    bool neg = false;

    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (!*s)
        return false;
    lim = neg ? max + 1 : max;
    for (; *s; s++) {
        uint64_t d;

        if (*s < '0' || *s > '9')
            return false;
        d = (uint64_t)(*s - '0');
        if (v > (lim - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (!neg)
        *ret = (int64_t)v;
    else
        *ret = v == max + 1 ? INT64_MIN : -(int64_t)v;
    return true;
}

/* ---- checks ---------------------------------------------------------------------------------- */

/* Each check returns true when the field is absent or valid, else rejects naming it. */

static bool check_string_map(struct why *w, const char *who, const char *path, const json_t *m)
{
    const char *k;
    json_t *v;

    if (!m)
        return true;
    if (!json_is_object(m))
        return invalid(w, who, "%s: expected a mapping, got %s", path, doc_type_name(m));
    json_object_foreach((json_t *)m, k, v)
    {
        if (!json_is_string(v))
            return invalid(w, who, "%s.%s: expected a string, got %s", path, k, doc_type_name(v));
    }
    return true;
}

static const char *const TOLERATION_OPS[] = {"", "Equal", "Exists", NULL};
static const char *const EFFECTS[] = {"NoSchedule", "PreferNoSchedule", "NoExecute", NULL};

static bool check_toleration(struct why *w, const json_t *tol, size_t i)
{
    static const char *const FIELDS[] = {"key", "operator", "value", "effect"};
    const char *key, *op;

    if (!json_is_object(tol))
        return invalid(w, "pod", "spec.tolerations[%zu]: expected a mapping, got %s", i,
                       doc_type_name(tol));
    for (size_t f = 0; f < ARRAY_SIZE(FIELDS); f++) {
        const json_t *v = member(tol, FIELDS[f]);

        if (v && !json_is_string(v))
            return invalid(w, "pod", "spec.tolerations[%zu].%s: expected a string, got %s", i,
                           FIELDS[f], doc_type_name(v));
    }
    key = str(tol, "key");
    op = str(tol, "operator");
    if (!is_one_of(op, TOLERATION_OPS))
        return invalid(w, "pod", "spec.tolerations[%zu].operator: unsupported operator \"%s\"", i,
                       op);
    if (!*key && strcmp(op, "Exists") != 0)
        return invalid(w, "pod", "spec.tolerations[%zu].operator: must be Exists when key is empty",
                       i);
    if (strcmp(op, "Exists") == 0 && *str(tol, "value"))
        return invalid(w, "pod",
                       "spec.tolerations[%zu].value: must be empty when operator is Exists", i);
    if (*str(tol, "effect") && !is_one_of(str(tol, "effect"), EFFECTS))
        return invalid(w, "pod", "spec.tolerations[%zu].effect: unsupported effect \"%s\"", i,
                       str(tol, "effect"));
    return true;
}

/* A node selector requirement: REQUIRED.nodeSelectorTerms[t].LIST[r], LIST matchExpressions
 * (labels) or matchFields (metadata.name only, In or NotIn with one value). */
static bool check_requirement(struct why *w, const json_t *req, size_t t, const char *list,
                              size_t r)
{
    const json_t *key, *op, *values, *v;
    const char *o;
    size_t count, i;
    int64_t dummy;

#define AT REQUIRED ".nodeSelectorTerms[%zu].%s[%zu]"
    if (!json_is_object(req))
        return invalid(w, "pod", AT ": expected a mapping, got %s", t, list, r, doc_type_name(req));
    key = member(req, "key");
    op = member(req, "operator");
    values = member(req, "values");
    if (!json_is_string(key))
        return invalid(w, "pod", AT ".key: expected a string, got %s", t, list, r,
                       doc_type_name(key));
    if (!json_is_string(op))
        return invalid(w, "pod", AT ".operator: expected a string, got %s", t, list, r,
                       doc_type_name(op));
    if (values && !json_is_array(values))
        return invalid(w, "pod", AT ".values: expected a sequence, got %s", t, list, r,
                       doc_type_name(values));
    json_array_foreach(values, i, v)
    {
        if (!json_is_string(v))
            return invalid(w, "pod", AT ".values[%zu]: expected a string, got %s", t, list, r, i,
                           doc_type_name(v));
    }
    o = json_string_value(op);
    count = json_array_size(values);
    if (strcmp(list, "matchFields") == 0) {
        if (strcmp(json_string_value(key), "metadata.name") != 0)
            return invalid(w, "pod", AT ".key: unsupported field \"%s\" (only metadata.name)", t,
                           list, r, json_string_value(key));
        if (strcmp(o, "In") != 0 && strcmp(o, "NotIn") != 0)
            return invalid(w, "pod", AT ".operator: unsupported operator \"%s\" for a field", t,
                           list, r, o);
        if (count != 1)
            return invalid(w, "pod", AT ".values: %s on a field needs exactly one value", t, list,
                           r, o);
        return true;
    }
    if (strcmp(o, "In") == 0 || strcmp(o, "NotIn") == 0) {
        if (count == 0)
            return invalid(w, "pod", AT ".values: %s needs at least one value", t, list, r, o);
    } else if (strcmp(o, "Exists") == 0 || strcmp(o, "DoesNotExist") == 0) {
        if (count != 0)
            return invalid(w, "pod", AT ".values: %s takes no values", t, list, r, o);
    } else if (strcmp(o, "Gt") == 0 || strcmp(o, "Lt") == 0) {
        if (count != 1 || !parse_int64(json_string_value(json_array_get(values, 0)), &dummy))
            return invalid(w, "pod", AT ".values: %s needs exactly one integer value", t, list, r,
                           o);
    } else {
        return invalid(w, "pod", AT ".operator: unsupported operator \"%s\"", t, list, r, o);
    }
    return true;
#undef AT
}

static bool check_affinity(struct why *w, const json_t *spec)
{
    static const char *const LISTS[] = {"matchExpressions", "matchFields"};
    const json_t *aff = member(spec, "affinity"), *node, *req, *terms, *term;
    size_t t;

    if (!aff)
        return true;
    if (!json_is_object(aff))
        return invalid(w, "pod", "spec.affinity: expected a mapping, got %s", doc_type_name(aff));
    if (!(node = member(aff, "nodeAffinity")))
        return true;
    if (!json_is_object(node))
        return invalid(w, "pod", "spec.affinity.nodeAffinity: expected a mapping, got %s",
                       doc_type_name(node));
    if (!(req = member(node, "requiredDuringSchedulingIgnoredDuringExecution")))
        return true;
    if (!json_is_object(req))
        return invalid(w, "pod", REQUIRED ": expected a mapping, got %s", doc_type_name(req));
    terms = member(req, "nodeSelectorTerms");
    if (terms && !json_is_array(terms))
        return invalid(w, "pod", REQUIRED ".nodeSelectorTerms: expected a sequence, got %s",
                       doc_type_name(terms));
    json_array_foreach(terms, t, term)
    {
        if (!json_is_object(term))
            return invalid(w, "pod", REQUIRED ".nodeSelectorTerms[%zu]: expected a mapping, got %s",
                           t, doc_type_name(term));
        for (size_t l = 0; l < ARRAY_SIZE(LISTS); l++) {
            const json_t *reqs = member(term, LISTS[l]), *r;
            size_t i;

            if (reqs && !json_is_array(reqs))
                return invalid(w, "pod",
                               REQUIRED ".nodeSelectorTerms[%zu].%s: expected a sequence, got %s",
                               t, LISTS[l], doc_type_name(reqs));
            json_array_foreach(reqs, i, r)
            {
                if (!check_requirement(w, r, t, LISTS[l], i))
                    return false;
            }
        }
    }
    return true;
}

static bool check_pod(struct why *w, const json_t *pod)
{
    const json_t *spec, *tols, *tol;
    size_t i;

    if (!json_is_object(pod))
        return invalid(w, "pod", "expected a mapping, got %s", doc_type_name(pod));
    if (!(spec = member(pod, "spec")))
        return true;
    if (!json_is_object(spec))
        return invalid(w, "pod", "spec: expected a mapping, got %s", doc_type_name(spec));
    if (!check_string_map(w, "pod", "spec.nodeSelector", member(spec, "nodeSelector")))
        return false;
    tols = member(spec, "tolerations");
    if (tols && !json_is_array(tols))
        return invalid(w, "pod", "spec.tolerations: expected a sequence, got %s",
                       doc_type_name(tols));
    json_array_foreach(tols, i, tol)
    {
        if (!check_toleration(w, tol, i))
            return false;
    }
    return check_affinity(w, spec);
}

static bool check_node(struct why *w, const json_t *node)
{
    const json_t *meta, *spec, *v, *taints, *taint;
    size_t i;

    if (!json_is_object(node))
        return invalid(w, "node", "expected a mapping, got %s", doc_type_name(node));
    meta = member(node, "metadata");
    if (meta && !json_is_object(meta))
        return invalid(w, "node", "metadata: expected a mapping, got %s", doc_type_name(meta));
    if ((v = member(meta, "name")) && !json_is_string(v))
        return invalid(w, "node", "metadata.name: expected a string, got %s", doc_type_name(v));
    if (!check_string_map(w, "node", "metadata.labels", member(meta, "labels")))
        return false;
    if (!(spec = member(node, "spec")))
        return true;
    if (!json_is_object(spec))
        return invalid(w, "node", "spec: expected a mapping, got %s", doc_type_name(spec));
    if ((v = member(spec, "unschedulable")) && !json_is_boolean(v))
        return invalid(w, "node", "spec.unschedulable: expected a boolean, got %s",
                       doc_type_name(v));
    taints = member(spec, "taints");
    if (taints && !json_is_array(taints))
        return invalid(w, "node", "spec.taints: expected a sequence, got %s",
                       doc_type_name(taints));
    json_array_foreach(taints, i, taint)
    {
        static const char *const FIELDS[] = {"key", "value", "effect"};

        if (!json_is_object(taint))
            return invalid(w, "node", "spec.taints[%zu]: expected a mapping, got %s", i,
                           doc_type_name(taint));
        for (size_t f = 0; f < ARRAY_SIZE(FIELDS); f++) {
            v = member(taint, FIELDS[f]);
            /* key and effect are required, value is optional */
            if ((v || f != 1) && !json_is_string(v))
                return invalid(w, "node", "spec.taints[%zu].%s: expected a string, got %s", i,
                               FIELDS[f], doc_type_name(v));
        }
        if (!*str(taint, "key"))
            return invalid(w, "node", "spec.taints[%zu].key: must not be empty", i);
        if (!is_one_of(str(taint, "effect"), EFFECTS))
            return invalid(w, "node", "spec.taints[%zu].effect: unsupported effect \"%s\"", i,
                           str(taint, "effect"));
    }
    return true;
}

/* ---- filters --------------------------------------------------------------------------------- */

/* Whether a toleration of tols tolerates the taint: its effect empty or the same, its key empty or
 * the same, and Exists or (Equal or no operator) with the same value. */
static bool tolerated(const json_t *tols, const char *key, const char *value, const char *effect)
{
    const json_t *tol;
    size_t i;

    json_array_foreach(tols, i, tol)
    {
        const char *e = str(tol, "effect"), *k = str(tol, "key");

        if ((*e && strcmp(e, effect) != 0) || (*k && strcmp(k, key) != 0))
            continue;
        if (strcmp(str(tol, "operator"), "Exists") == 0 || strcmp(str(tol, "value"), value) == 0)
            return true;
    }
    return false;
}

static bool in_values(const json_t *values, const char *s)
{
    const json_t *v;
    size_t i;

    json_array_foreach(values, i, v)
    {
        if (strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

/* A checked requirement against val, the label's value or the node's name (NULL: no such label). */
static bool requirement_matches(const json_t *req, const char *val)
{
    const char *op = str(req, "operator");
    const json_t *values = member(req, "values");
    int64_t a, b;

    if (strcmp(op, "In") == 0)
        return val && in_values(values, val);
    if (strcmp(op, "NotIn") == 0)
        return !val || !in_values(values, val);
    if (strcmp(op, "Exists") == 0)
        return val != NULL;
    if (strcmp(op, "DoesNotExist") == 0)
        return !val;
    /* Gt, Lt: a label that is not an integer matches neither */
    if (!val || !parse_int64(val, &a) ||
        !parse_int64(json_string_value(json_array_get(values, 0)), &b))
        return false;
    return op[0] == 'G' ? a > b : a < b;
}

/* A term matches when all its requirements do; one without any matches nothing. */
static bool term_matches(const json_t *term, const json_t *labels, const char *name)
{
    const json_t *exprs = member(term, "matchExpressions"), *fields = member(term, "matchFields");
    const json_t *req;
    size_t i;

    if (json_array_size(exprs) == 0 && json_array_size(fields) == 0)
        return false;
    json_array_foreach(exprs, i, req)
    {
        if (!requirement_matches(req, json_string_value(json_object_get(labels, str(req, "key")))))
            return false;
    }
    json_array_foreach(fields, i, req)
    {
        if (!requirement_matches(req, name))
            return false;
    }
    return true;
}

/* spec.nodeSelector (every label equal) and the required node affinity (any term). */
static bool affinity_matches(const json_t *spec, const json_t *labels, const char *name)
{
    const json_t *sel = member(spec, "nodeSelector"), *req, *terms, *term;
    const char *k;
    json_t *v;
    size_t i;

    json_object_foreach((json_t *)sel, k, v)
    {
        const char *have = json_string_value(json_object_get(labels, k));

        if (!have || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    req = member(member(member(spec, "affinity"), "nodeAffinity"),
                 "requiredDuringSchedulingIgnoredDuringExecution");
    if (!req)
        return true;
    terms = member(req, "nodeSelectorTerms");
    json_array_foreach(terms, i, term)
    {
        if (term_matches(term, labels, name))
            return true;
    }
    return false;
}

bool sched_node_fits(const json_t *pod, const json_t *node, char *buf, size_t n,
                     const char **reason)
{
    struct why w = {.buf = buf, .n = n, .reason = reason};
    const json_t *spec, *tols, *nspec, *meta, *taints, *taint;
    size_t i;

    *reason = NULL;
    if (!check_pod(&w, pod) || !check_node(&w, node))
        return false;
    spec = member(pod, "spec");
    tols = member(spec, "tolerations");
    nspec = member(node, "spec");
    meta = member(node, "metadata");

    /* NodeUnschedulable: a cordoned node takes the pods that tolerate its taint */
    if (json_is_true(member(nspec, "unschedulable")) &&
        !tolerated(tols, UNSCHEDULABLE_TAINT, "", "NoSchedule"))
        return reject(&w, SCHED_REASON_UNSCHEDULABLE);

    /* TaintToleration: the first NoSchedule or NoExecute taint no toleration tolerates */
    taints = member(nspec, "taints");
    json_array_foreach(taints, i, taint)
    {
        const char *effect = str(taint, "effect");

        if (strcmp(effect, "NoSchedule") != 0 && strcmp(effect, "NoExecute") != 0)
            continue;
        if (tolerated(tols, str(taint, "key"), str(taint, "value"), effect))
            continue;
        if (!buf || n == 0)
            return reject(&w, SCHED_REASON_TAINT);
        snprintf(buf, n, SCHED_REASON_TAINT " {%s: %s}", str(taint, "key"), str(taint, "value"));
        return reject(&w, buf);
    }

    /* NodeAffinity */
    if (!affinity_matches(spec, member(meta, "labels"), str(meta, "name")))
        return reject(&w, SCHED_REASON_AFFINITY);
    return true;
}

bool sched_node_selector_matches(const json_t *selector, const json_t *node)
{
    const json_t *meta = member(node, "metadata"), *term;
    size_t i;

    json_array_foreach(member(selector, "nodeSelectorTerms"), i, term)
    {
        if (term_matches(term, member(meta, "labels"), str(meta, "name")))
            return true;
    }
    return false;
}
