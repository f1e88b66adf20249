/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the DRA `device` variable (cel-dra.c, cel-dra-load.c): loading a device entry (domains,
 * versions as semvers, capacities as quantities, what the API server would reject, the errors
 * Kubernetes reports at evaluation), building from an in-memory description without copies, and
 * the typical selectors of the DRA reference evaluated against it — missing domains, missing keys,
 * guards, the cost limit and the nesting-depth limit.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base-strbuf.h"
#include "cel-dra.h"
#include "cel.h"

#define DRIVER "gpu.nvidia.com"

static const char H100[] = "name: gpu-0\n"
                           "attributes:\n"
                           "  type: {string: gpu}\n"
                           "  productName: {string: NVIDIA H100 80GB HBM3}\n"
                           "  index: {int: 0}\n"
                           "  mig: {bool: false}\n"
                           "  driverVersion: {version: 550.54.15}\n"
                           "  cudaComputeCapability: {version: 9.0.0}\n"
                           "  resource.kubernetes.io/pcieRoot: {string: pci0000:15}\n"
                           "  dra.example.com/rank: {int: -3}\n"
                           "capacity:\n"
                           "  memory: {value: 80Gi}\n"
                           "  dra.example.com/slots: {value: 8}\n"
                           "  multiprocessors: {value: \"132\", requestPolicy: {default: \"1\"}}\n"
                           "allowMultipleAllocations: true\n";

/* Loads text as a device entry into r. */
static int load(struct cel_region *r, const char *text, const char *driver, struct diag *d,
                struct cel_value *ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int err;

    diag_init(d);
    err = doc_load_string("dev.yaml", text, strlen(text), d, &doc);
    if (err < 0)
        return err;
    return cel_dra_device_load(r, doc, doc_root(doc, 0), driver, d, ret);
}

static struct cel_value get(struct cel_value m, const char *key)
{
    struct cel_value v;

    assert_int_equal(m.kind, CEL_MAP);
    if (!cel_vmap_find_str(m.map, key, strlen(key), &v))
        fail_msg("no key %s", key);
    return v;
}

static void test_load_structure(void **state)
{
    struct cel_region r;
    struct cel_value dev, v, attrs, caps;
    struct diag d;
    char buf[CEL_QUANTITY_STR_MAX];
    int64_t n;

    cel_region_init(&r, 0);
    if (load(&r, H100, DRIVER, &d, &dev) < 0)
        fail_msg("%s", d.msg);
    assert_int_equal(dev.map->n, 4);
    v = get(dev, "driver");
    assert_true(v.kind == CEL_STRING && v.n == strlen(DRIVER) && !memcmp(v.s, DRIVER, v.n));
    assert_true(get(dev, "allowMultipleAllocations").b);

    attrs = get(dev, "attributes");
    assert_int_equal(attrs.map->n, 3); /* the driver's, resource.kubernetes.io, dra.example.com */
    v = get(get(attrs, DRIVER), "productName");
    assert_true(v.kind == CEL_STRING && v.n == 21);
    assert_int_equal(get(get(attrs, DRIVER), "index").i, 0);
    assert_false(get(get(attrs, DRIVER), "mig").b);
    assert_int_equal(get(get(attrs, "dra.example.com"), "rank").i, -3);
    v = get(get(attrs, DRIVER), "driverVersion");
    assert_non_null(cel_value_semver(v));
    assert_int_equal(cel_value_semver(v)->major, 550);
    assert_int_equal(cel_value_semver(v)->patch, 15);
    v = get(get(attrs, "resource.kubernetes.io"), "pcieRoot");
    assert_true(v.kind == CEL_STRING && v.n == 10);

    /* an unknown domain reads as an empty map, but is not a key */
    assert_false(cel_vmap_find_str(attrs.map, "nvidia.com", 10, &v));
    assert_non_null(attrs.map->absent);
    assert_int_equal(attrs.map->absent->kind, CEL_MAP);
    assert_int_equal(attrs.map->absent->map->n, 0);
    /* an unknown id has no fallback: the evaluator reports no such key */
    assert_null(get(attrs, DRIVER).map->absent);

    caps = get(dev, "capacity");
    cel_quantity_format(cel_value_quantity(get(get(caps, DRIVER), "memory")), buf);
    assert_string_equal(buf, "80Gi");
    assert_true(
        cel_quantity_as_int64(cel_value_quantity(get(get(caps, "dra.example.com"), "slots")), &n));
    assert_int_equal(n, 8);
    cel_quantity_format(cel_value_quantity(get(get(caps, DRIVER), "multiprocessors")), buf);
    assert_string_equal(buf, "132");
    assert_non_null(caps.map->absent);
    cel_region_release(&r);
}

static void test_load_driver(void **state)
{
    struct cel_region r;
    struct cel_value dev, v;
    struct diag d;

    cel_region_init(&r, 0);
    /* from the file, when the caller names none */
    assert_int_equal(
        load(&r, "{name: a, driver: x.example.com, attributes: {n: {int: 1}}}", NULL, &d, &dev), 0);
    v = get(dev, "driver");
    assert_true(v.n == 13 && !memcmp(v.s, "x.example.com", 13));
    assert_int_equal(get(get(get(dev, "attributes"), "x.example.com"), "n").i, 1);
    /* none at all: bare names go to the empty domain */
    assert_int_equal(
        load(&r, "{\"name\": \"a\", \"attributes\": {\"n\": {\"int\": 1}}}", NULL, &d, &dev), 0);
    assert_int_equal(get(dev, "driver").n, 0);
    assert_int_equal(get(get(get(dev, "attributes"), ""), "n").i, 1);
    /* a device with nothing */
    assert_int_equal(load(&r, "name: a\n", "d", &d, &dev), 0);
    assert_int_equal(get(dev, "attributes").map->n, 0);
    assert_false(get(dev, "allowMultipleAllocations").b);
    cel_region_release(&r);
}

static void test_load_errors(void **state)
{
    static const struct {
        const char *text;
        int err;
        const char *msg;
    } cases[] = {
        /* what Kubernetes fails at evaluation */
        {"{name: a, attributes: {x: {}}}", -EDOM, "attribute x: unsupported attribute value"},
        {"{name: a, attributes: {x: {ints: [1]}}}", -EDOM,
         "attribute x: unsupported attribute value"},
        {"{name: a, attributes: {v: {version: v1.0.0}}}", -EDOM,
         "parse semantic version: Invalid character(s) found in major number \"v1\""},
        {"{name: a, attributes: {v: {version: 1.0}}}", -EINVAL, "expected a string"},
        {"{name: a, attributes: {v: {version: \"1.0\"}}}", -EDOM,
         "parse semantic version: No Major.Minor.Patch elements found"},
        /* what the API server rejects (and wins over the above) */
        {"{name: a, attributes: {v: {version: \"1.0\"}, w: {int: 1, bool: true}}}", -EINVAL,
         "exactly one value must be specified"},
        {"{attributes: {}}", -EINVAL, "name"},
        {"{name: A}", -EINVAL, "must be a DNS label"},
        {"{name: a, color: red}", -EINVAL, "color"},
        {"{name: a, attributes: {1x: {int: 1}}}", -EINVAL, "must be a C identifier"},
        {"{name: a, attributes: {Example.com/x: {int: 1}}}", -EINVAL, "must be a C identifier"},
        {"{name: a, attributes: {a/b/c: {int: 1}}}", -EINVAL, "must be a C identifier"},
        {"{name: a, attributes: {abcdefghijabcdefghijabcdefghijabc: {int: 1}}}", -EINVAL,
         "must be a C identifier"},
        {"{name: a, attributes: {x: {string: "
         "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcde}}}",
         -EINVAL, "no more than 64 bytes"},
        {"{name: a, attributes: {x: {int: 1, float: 2}}}", -EINVAL, "float"},
        {"{name: a, attributes: {x: {int: \"1\"}}}", -EINVAL, "int"},
        {"{name: a, attributes: {x: 1}}", -EINVAL, "expected a mapping"},
        {"{name: a, capacity: {m: {value: 10Mo}}}", -EINVAL,
         "capacity m: quantities must match the regular expression"},
        {"{name: a, capacity: {m: {}}}", -EINVAL, "value: required"},
        {"{name: a, capacity: {m: {value: 1.5}}}", -EINVAL, "expected a quantity"},
        {"{name: a, capacity: {m: {value: 1, limit: 2}}}", -EINVAL, "limit"},
        {"[1]", -EINVAL, "expected a mapping"},
    };
    struct cel_region r;
    struct cel_value dev;
    struct diag d;

    cel_region_init(&r, 0);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int err = load(&r, cases[i].text, DRIVER, &d, &dev);
        if (err != cases[i].err || !strstr(d.msg, cases[i].msg))
            fail_msg("%s: got %d '%s'", cases[i].text, err, d.msg);
    }
    cel_region_release(&r);
}

static void test_load_limits(void **state)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    struct cel_region r;
    struct cel_value dev;
    struct diag d;

    cel_region_init(&r, 0);
    assert_int_equal(strbuf_addstr(&sb, "name: a\nattributes:\n"), 0);
    for (int i = 0; i < 30; i++)
        assert_int_equal(strbuf_addf(&sb, "  a%d: {int: %d}\n", i, i), 0);
    assert_int_equal(strbuf_addstr(&sb, "capacity:\n  c0: {value: 1}\n"), 0);
    assert_int_equal(strbuf_addstr(&sb, "  c1: {value: 1}\n"), 0);
    assert_int_equal(load(&r, strbuf_str(&sb), DRIVER, &d, &dev), 0);
    assert_int_equal(strbuf_addstr(&sb, "  c2: {value: 1}\n"), 0);
    assert_int_equal(load(&r, strbuf_str(&sb), DRIVER, &d, &dev), -EINVAL);
    assert_non_null(strstr(d.msg, "at most 32 entries"));
    /* the bare name and the driver-qualified one are the same attribute */
    assert_int_equal(
        load(&r, "{name: a, attributes: {x: {int: 1}, d.io/x: {int: 2}}}", "d.io", &d, &dev),
        -EEXIST);
    cel_region_release(&r);
}

/* The allocator's way in: values borrowed from its own storage. */
static void test_in_memory(void **state)
{
    static const char ver[] = "1.2.3-rc.1";
    struct cel_quantity q;
    struct cel_quantity_obj mem;
    struct cel_semver_obj v;
    struct cel_dra_attr attrs[3] = {
        {.name = "model", .name_len = 5, .kind = CEL_DRA_ATTR_STRING, .str = {"A100", 4}},
        {.name = "other.io/n", .name_len = 10, .kind = CEL_DRA_ATTR_INT, .i = 7},
        {.name = "fw", .name_len = 2, .kind = CEL_DRA_ATTR_VERSION, .version = &v},
    };
    struct cel_dra_capacity caps[1] = {{.name = "memory", .name_len = 6, .value = &mem}};
    struct cel_dra_device dev = {
        .driver = DRIVER,
        .driver_len = strlen(DRIVER),
        .attrs = attrs,
        .n_attrs = 3,
        .caps = caps,
        .n_caps = 1,
    };
    struct cel_region r;
    struct cel_value val, x;
    struct diag d;

    cel_region_init(&r, 0);
    assert_int_equal(cel_quantity_parse("40Gi", 4, NULL, &q), 0);
    cel_quantity_obj_init(&mem, &q);
    assert_int_equal(cel_dra_parse_version(ver, strlen(ver), &v, &d), 0);
    diag_init(&d);
    assert_int_equal(cel_dra_device_value(&r, &dev, &d, &val), 0);
    x = get(get(get(val, "attributes"), DRIVER), "model");
    assert_ptr_equal(x.s, attrs[0].str.s);
    assert_ptr_equal(get(get(get(val, "attributes"), DRIVER), "fw").obj, &v.base);
    assert_ptr_equal(get(get(get(val, "capacity"), DRIVER), "memory").obj, &mem.base);
    assert_int_equal(get(get(get(val, "attributes"), "other.io"), "n").i, 7);

    assert_int_equal(cel_dra_parse_version("1.2", 3, &v, &d), -EDOM);
    assert_string_equal(d.msg, "parse semantic version: No Major.Minor.Patch elements found");
    attrs[1].kind = CEL_DRA_ATTR_NONE;
    assert_int_equal(cel_dra_device_value(&r, &dev, &d, &val), -EDOM);
    assert_string_equal(d.msg, "attribute other.io/n: unsupported attribute value");
    cel_region_release(&r);
}

/* Interleaved domains: each item lands in its own domain's map once, whatever the order (clang 14
 * -O2 used to lose every domain but the first; see by_domain() in cel-dra.c). */
static void test_domains_interleaved(void **state)
{
    static const char *const names[] = {"a",      "x.io/a", "b", "y.io/a",
                                        "x.io/b", "y.io/b", "c", "/e"};
    struct cel_dra_attr attrs[40];
    struct cel_dra_device dev = {.driver = DRIVER, .driver_len = strlen(DRIVER), .attrs = attrs};
    struct cel_region r;
    struct cel_value val, m;
    struct diag d;
    char many[40][8];

    cel_region_init(&r, 0);
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        attrs[i] = (struct cel_dra_attr){.name = names[i],
                                         .name_len = strlen(names[i]),
                                         .kind = CEL_DRA_ATTR_INT,
                                         .i = (int64_t)i};
    dev.n_attrs = ARRAY_SIZE(names);
    diag_init(&d);
    assert_int_equal(cel_dra_device_value(&r, &dev, &d, &val), 0);
    m = get(val, "attributes");
    assert_int_equal(m.map->n, 4); /* the driver's, x.io, y.io and the empty domain */
    assert_int_equal(get(m, DRIVER).map->n, 3);
    assert_int_equal(get(m, "x.io").map->n, 2);
    assert_int_equal(get(m, "y.io").map->n, 2);
    assert_int_equal(get(m, "").map->n, 1);
    assert_int_equal(get(get(m, DRIVER), "c").i, 6);
    assert_int_equal(get(get(m, "x.io"), "b").i, 4);
    assert_int_equal(get(get(m, "y.io"), "a").i, 3);
    assert_int_equal(get(get(m, ""), "e").i, 7);

    /* a repeated name is reported with its domain */
    attrs[4].name = "x.io/a";
    attrs[4].name_len = 6;
    assert_int_equal(cel_dra_device_value(&r, &dev, &d, &val), -EEXIST);
    assert_string_equal(d.msg, "attributes: two entries for one name in domain x.io");

    /* more than the scratch space on the stack: d0/0, d1/1, ..., d4/4, d0/5, ... */
    for (size_t i = 0; i < ARRAY_SIZE(many); i++) {
        snprintf(many[i], sizeof(many[i]), "d%zu/%zu", i % 5, i);
        attrs[i] = (struct cel_dra_attr){.name = many[i],
                                         .name_len = strlen(many[i]),
                                         .kind = CEL_DRA_ATTR_INT,
                                         .i = (int64_t)i};
    }
    dev.n_attrs = ARRAY_SIZE(many);
    diag_init(&d);
    assert_int_equal(cel_dra_device_value(&r, &dev, &d, &val), 0);
    m = get(val, "attributes");
    assert_int_equal(m.map->n, 5);
    assert_int_equal(get(m, "d3").map->n, 8);
    assert_int_equal(get(get(m, "d3"), "38").i, 38);
    cel_region_release(&r);
}

/* ---- selectors evaluated against the H100 entry ---- */

struct fixture {
    struct cel_region r;
    struct cel_env *env;
    struct cel_evaluator *ev;
    struct cel_activation *act;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct cel_value dev;
    struct diag d;

    if (!f)
        return -1;
    cel_region_init(&f->r, 0);
    if (load(&f->r, H100, DRIVER, &d, &dev) < 0 || cel_env_new_dra(&f->env) < 0 ||
        cel_evaluator_new(&f->ev) < 0 || cel_activation_new(f->env, &f->act) < 0 ||
        cel_activation_bind(f->act, "device", dev) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    cel_activation_free(f->act);
    cel_evaluator_free(f->ev);
    cel_env_free(f->env);
    cel_region_release(&f->r);
    free(f);
    return 0;
}

/* Evaluates expr: "compile error: ...", "error: ..." or the printed value. */
static const char *eval(struct fixture *f, const char *expr, uint64_t cost_limit,
                        struct strbuf *out)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    struct cel_eval_opts opts = {.cost_limit = cost_limit};
    struct cel_value v;
    struct diag d;

    strbuf_reset(out);
    diag_init(&d);
    if (cel_compile(f->env, expr, strlen(expr), &p, &d) < 0) {
        assert_int_equal(strbuf_addf(out, "compile error: %s", d.msg), 0);
        return strbuf_str(out);
    }
    v = cel_eval(f->ev, p, f->act, &opts);
    if (v.kind == CEL_ERROR)
        assert_int_equal(strbuf_addstr(out, "error: "), 0);
    assert_int_equal(cel_value_print(out, v), 0);
    return strbuf_str(out);
}

static void test_selectors(void **state)
{
    static const struct {
        const char *expr, *want;
    } cases[] = {
        /* the typical selectors of the DRA reference */
        {"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
         "true"},
        {"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", "true"},
        {"device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
         "true"},
        {"cel.bind(g, device.attributes['gpu.nvidia.com'], "
         "g.productName.lowerAscii().matches('^.*h100.*$'))",
         "true"},
        /* values */
        {"device.attributes['gpu.nvidia.com'].driverVersion", "semver(\"550.54.15\")"},
        {"device.capacity['gpu.nvidia.com'].memory", "quantity(\"80Gi\")"},
        {"device.capacity['gpu.nvidia.com']['memory'].isGreaterThan(quantity('80G'))", "true"},
        {"device.attributes['resource.kubernetes.io'].pcieRoot", "\"pci0000:15\""},
        {"device.attributes['dra.example.com'].rank", "-3"},
        {"device.allowMultipleAllocations", "true"},
        {"device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() >= 9", "true"},
        /* missing domains are empty maps; missing ids are errors */
        {"'x' in device.attributes['unknown.example.com']", "false"},
        {"device.attributes['unknown.example.com'].size()", "0"},
        {"'unknown.example.com' in device.attributes", "false"},
        {"'gpu.nvidia.com' in device.attributes", "true"},
        {"device.attributes['gpu.nvidia.com'].nosuch == 1", "error: no such key: nosuch"},
        {"device.capacity['gpu.nvidia.com']['nosuch']", "error: no such key: nosuch"},
        {"device.attributes['unknown.example.com'].x", "error: no such key: x"},
        /* the guards real selectors use */
        {"'nosuch' in device.attributes['gpu.nvidia.com'] && "
         "device.attributes['gpu.nvidia.com'].nosuch > 1",
         "false"},
        {"has(device.attributes['gpu.nvidia.com'].nosuch)", "false"},
        {"has(device.attributes['gpu.nvidia.com'].index)", "true"},
        {"device.attributes['gpu.nvidia.com'][?'nosuch'].orValue(5)", "5"},
        {"device.attributes.exists_one(d, d == 'dra.example.com')", "true"},
        {"device.attributes.all(d, device.attributes[d].size() > 0)", "true"},
        /* || absorbs the missing-key error when the other side is true */
        {"device.attributes['gpu.nvidia.com'].nosuch == 1 || true", "true"},
        /* no ordering operators on quantities and semvers */
        {"device.capacity['gpu.nvidia.com'].memory > quantity('1Gi')", "compile error"},
        {"device.attributes['gpu.nvidia.com'].driverVersion < semver('1.0.0')", "compile error"},
        {"device.nosuch", "compile error"},
    };
    struct fixture *f = *state;
    _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const char *got = eval(f, cases[i].expr, 0, &out);
        if (strncmp(got, cases[i].want, strlen(cases[i].want)) != 0)
            fail_msg("%s: got %s, want %s", cases[i].expr, got, cases[i].want);
    }
}

static void test_limits(void **state)
{
    struct fixture *f = *state;
    _cleanup_strbuf_ struct strbuf out = STRBUF_INIT, expr = STRBUF_INIT;
    const char *got;

    /* a doubly nested comprehension over a big list exceeds Kubernetes' runtime cost limit */
    got = eval(f,
               "lists.range(2000).all(i, lists.range(2000).all(j, "
               "device.attributes['gpu.nvidia.com'].index <= i + j))",
               0, &out);
    if (!strstr(got, "cost limit"))
        fail_msg("cost: got %s", got);
    /* the same selector with a small budget passes when the budget is enough, fails when not */
    got = eval(f, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", 100,
               &out);
    assert_string_equal(got, "true");
    got = eval(f, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", 2,
               &out);
    if (!strstr(got, "cost limit"))
        fail_msg("small budget: got %s", got);

    /* nesting deeper than the parser allows is a compile error, not a crash */
    for (int i = 0; i < 400; i++)
        assert_int_equal(strbuf_addstr(&expr, "quantity('1').add("), 0);
    assert_int_equal(strbuf_addstr(&expr, "device.capacity['gpu.nvidia.com'].memory"), 0);
    for (int i = 0; i < 400; i++)
        assert_int_equal(strbuf_addch(&expr, ')'), 0);
    got = eval(f, strbuf_str(&expr), 0, &out);
    assert_non_null(strstr(got, "compile error"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_structure),
        cmocka_unit_test(test_load_driver),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_limits),
        cmocka_unit_test(test_in_memory),
        cmocka_unit_test(test_domains_interleaved),
        cmocka_unit_test_setup_teardown(test_selectors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
