/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane cel eval [--device FILE [--driver NAME]] [--var NAME=CEL_EXPR ...] EXPR`: compiles EXPR
 * in Kubernetes' DRA CEL environment, evaluates it once and prints the result as a CEL literal.
 * Each --var value is itself a CEL expression, evaluated in an empty environment and bound to NAME
 * (declared dyn); --device binds `device` from one ResourceSlice device entry. Exit 0 with the
 * value on stdout, 1 on an evaluation error, 2 on a compile error or bad usage (message on stderr).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel-dra.h"
#include "cel.h"
#include "celcmd.h"
#include "cli.h"

#define CELCMD_MAX_VARS 64

static const char USAGE[] =
    "Usage: gpuplane cel eval [--device FILE [--driver NAME]] [--var NAME=CEL_EXPR ...] EXPR\n"
    "\n"
    "Evaluate a CEL expression as Kubernetes evaluates DRA device selectors (the same libraries,\n"
    "type checks and cost limit) and print the result as a CEL literal.\n"
    "\n"
    "Options:\n"
    "      --var NAME=CEL_EXPR  bind variable NAME to the value of CEL_EXPR (evaluated in an\n"
    "                           empty environment; repeatable)\n"
    "      --device FILE        bind `device` from one ResourceSlice device entry (YAML or JSON)\n"
    "      --driver NAME        the driver the device belongs to (default: the file's `driver`\n"
    "                           field, else empty)\n"
    "  -h, --help               show this help\n"
    "\n"
    "Exit status: 0 the value was printed, 1 evaluation error, 2 compile error or bad usage.\n"
    "\n"
    "Examples:\n"
    "  gpuplane cel eval '[1, 2, 3].map(x, x * 2)'\n"
    "  gpuplane cel eval --var x='{\"a\": 1}' 'has(x.a) && x.a > 0'\n"
    "  gpuplane cel eval \"quantity('1Gi').compareTo(quantity('1024Mi'))\"\n"
    "  gpuplane cel eval --device gpu.yaml --driver gpu.nvidia.com \\\n"
    "      \"device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')\"\n"
    "An expression that starts with '-' needs a leading space (' -1 + 2') or a preceding '--'.\n";

struct var_arg {
    const char *name;
    size_t name_len;
    const char *expr;
};

struct opts {
    struct var_arg vars[CELCMD_MAX_VARS];
    size_t nvars;
    const char *device;
    const char *driver;
    const char *expr;
    bool help;
};

_printf_(1, 2) static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "gpuplane cel eval: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(see 'gpuplane cel eval --help')\n", stderr);
    return CLI_EXIT_USAGE;
}

/* The value of option `name` given as "--name=value" or "--name value". */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t len = strlen(name);
    const char *a = argv[*i];

    if (strncmp(a, name, len) == 0 && a[len] == '=')
        return a + len + 1;
    if (strcmp(a, name) == 0 && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static bool is_opt(const char *a, const char *name)
{
    size_t len = strlen(name);

    return strncmp(a, name, len) == 0 && (a[len] == '\0' || a[len] == '=');
}

static int add_var(struct opts *o, const char *spec)
{
    const char *eq = strchr(spec, '=');

    if (!eq || eq == spec)
        return usage_error("--var needs NAME=CEL_EXPR, got \"%s\"", spec);
    if (o->nvars == CELCMD_MAX_VARS)
        return usage_error("too many --var options (at most %d)", CELCMD_MAX_VARS);
    o->vars[o->nvars++] = (struct var_arg){spec, (size_t)(eq - spec), eq + 1};
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    bool dashdash = false;
    const char *v;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];

        if (dashdash || a[0] != '-' || a[1] == '\0') {
            if (o->expr)
                return usage_error("unexpected argument \"%s\" (one expression only)", a);
            o->expr = a;
        } else if (strcmp(a, "--") == 0) {
            dashdash = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
        } else if (is_opt(a, "--var")) {
            if (!(v = opt_value(argc, argv, &i, "--var")))
                return usage_error("%s needs a value", "--var");
            if (add_var(o, v) != 0)
                return CLI_EXIT_USAGE;
        } else if (is_opt(a, "--device")) {
            if (!(o->device = opt_value(argc, argv, &i, "--device")))
                return usage_error("%s needs a value", "--device");
        } else if (is_opt(a, "--driver")) {
            if (!(o->driver = opt_value(argc, argv, &i, "--driver")))
                return usage_error("%s needs a value", "--driver");
        } else {
            return usage_error("unknown option \"%s\"", a);
        }
    }
    return 0;
}

/* Everything one run holds, released together (values borrow from the evaluators). */
struct run {
    struct cel_env *var_env;
    struct cel_program *var_prog[CELCMD_MAX_VARS];
    struct cel_evaluator *var_ev[CELCMD_MAX_VARS];
    struct cel_value var_val[CELCMD_MAX_VARS];
    struct cel_region device_region; /* the --device value */
    struct cel_value device;
    struct cel_env *env;
    struct cel_program *prog;
    struct cel_activation *act;
    struct cel_evaluator *ev;
};

static void run_release(struct run *r)
{
    cel_evaluator_free(r->ev);
    cel_activation_free(r->act);
    cel_program_unref(r->prog);
    cel_env_free(r->env);
    cel_region_release(&r->device_region);
    for (size_t i = 0; i < CELCMD_MAX_VARS; i++) {
        cel_evaluator_free(r->var_ev[i]);
        cel_program_unref(r->var_prog[i]);
    }
    cel_env_free(r->var_env);
}

static int report_oom(void)
{
    fputs("gpuplane cel eval: out of memory\n", stderr);
    return CLI_EXIT_FAILURE;
}

/* Evaluates one --var expression; its value lives in r->var_ev[i]. */
static int eval_var(struct run *r, const struct var_arg *va, size_t i)
{
    struct cel_program *p = NULL;
    struct diag d;
    struct cel_value v;
    int err;

    diag_init(&d);
    err = cel_compile(r->var_env, va->expr, strlen(va->expr), &p, &d);
    if (err < 0) {
        fprintf(stderr, "gpuplane cel eval: --var %.*s: %s\n", (int)va->name_len, va->name, d.msg);
        return CLI_EXIT_USAGE;
    }
    /* the value may point into the program's constants: it lives as long as the run */
    r->var_prog[i] = p;
    if (cel_evaluator_new(&r->var_ev[i]) < 0)
        return report_oom();
    v = cel_eval(r->var_ev[i], p, NULL, NULL);
    if (v.kind == CEL_ERROR) {
        fprintf(stderr, "gpuplane cel eval: --var %.*s: %s\n", (int)va->name_len, va->name,
                v.err->msg);
        return CLI_EXIT_FAILURE;
    }
    r->var_val[i] = v;
    return 0;
}

static int declare_vars(struct run *r, const struct opts *o)
{
    char name[256];

    for (size_t i = 0; i < o->nvars; i++) {
        const struct var_arg *va = &o->vars[i];
        int err;

        if (va->name_len >= sizeof(name))
            return usage_error("--var name too long: %s", va->name);
        memcpy(name, va->name, va->name_len);
        name[va->name_len] = '\0';
        err = cel_env_declare(r->env, name, "dyn");
        if (err == -EEXIST)
            return usage_error("variable \"%s\" given twice", name);
        if (err < 0)
            return report_oom();
    }
    return 0;
}

static int bind_vars(struct run *r, const struct opts *o)
{
    char name[256];

    for (size_t i = 0; i < o->nvars; i++) {
        memcpy(name, o->vars[i].name, o->vars[i].name_len);
        name[o->vars[i].name_len] = '\0';
        if (cel_activation_bind(r->act, name, r->var_val[i]) < 0)
            return report_oom();
    }
    return 0;
}

/* --device FILE: the DRA environment with `device` bound to the file's device entry. A device
 * Kubernetes could never evaluate against (an unset attribute value, a bad version) fails like an
 * evaluation; a file the API server would reject is a usage error. */
static int load_device(struct run *r, const struct opts *o)
{
    struct diag d;
    int err;

    diag_init(&d);
    cel_region_init(&r->device_region, 0);
    err = cel_dra_device_load_file(&r->device_region, o->device, o->driver, &d, &r->device);
    if (err == -ENOMEM)
        return report_oom();
    if (err == -EDOM) {
        fprintf(stderr, "gpuplane cel eval: evaluation error: %s\n", d.msg);
        return CLI_EXIT_FAILURE;
    }
    if (err < 0) {
        fprintf(stderr, "gpuplane cel eval: --device %s: %s\n", o->device,
                d.msg[0] ? d.msg : strerror(-err));
        return CLI_EXIT_USAGE;
    }
    if (cel_env_new_dra(&r->env) < 0)
        return report_oom();
    return 0;
}

static int print_result(struct cel_value v)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

    if (v.kind == CEL_ERROR) {
        fprintf(stderr, "gpuplane cel eval: evaluation error: %s\n", v.err->msg);
        return CLI_EXIT_FAILURE;
    }
    if (cel_value_print(&sb, v) < 0)
        return report_oom();
    printf("%s\n", strbuf_str(&sb));
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

static int run_eval(struct run *r, const struct opts *o)
{
    struct diag d;
    int err;

    if (cel_env_new(CEL_LIBS_DRA, &r->var_env) < 0)
        return report_oom();
    for (size_t i = 0; i < o->nvars; i++)
        if ((err = eval_var(r, &o->vars[i], i)) != 0)
            return err;
    if (o->device) {
        if ((err = load_device(r, o)) != 0)
            return err;
    } else if (cel_env_new(CEL_LIBS_DRA, &r->env) < 0) {
        return report_oom();
    }
    if ((err = declare_vars(r, o)) != 0)
        return err;
    diag_init(&d);
    err = cel_compile(r->env, o->expr, strlen(o->expr), &r->prog, &d);
    if (err == -ENOMEM)
        return report_oom();
    if (err < 0) {
        fprintf(stderr, "gpuplane cel eval: compile error: %s\n", d.msg);
        return CLI_EXIT_USAGE;
    }
    if (cel_activation_new(r->env, &r->act) < 0 || cel_evaluator_new(&r->ev) < 0)
        return report_oom();
    if ((err = bind_vars(r, o)) != 0)
        return err;
    if (o->device && cel_activation_bind(r->act, "device", r->device) < 0)
        return report_oom();
    return print_result(cel_eval(r->ev, r->prog, r->act, NULL));
}

static int eval_main(int argc, char **argv)
{
    struct opts o = {0};
    struct run r = {0};
    int ret = parse_args(argc, argv, &o);

    if (ret != 0)
        return ret;
    if (o.help) {
        fputs(USAGE, stdout);
        return CLI_EXIT_OK;
    }
    if (!o.expr)
        return usage_error("%s", "missing EXPR");
    if (o.driver && !o.device)
        return usage_error("%s", "--driver needs --device");
    ret = run_eval(&r, &o);
    run_release(&r);
    return ret;
}

int celcmd_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "eval") != 0)
        return usage_error("unknown subcommand \"%s\" (only eval)", argv[1]);
    return eval_main(argc - 2, argv + 2);
}
