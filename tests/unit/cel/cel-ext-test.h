/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Table-driven checks for the extension library tests: compile an expression in the DRA
 * environment, evaluate it without variables and compare the printed result (the CLI's CEL literal
 * form) or the kind of failure. Each row names what it tests by its expression.
 */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/base-strbuf.h"
#include "cel.h"

/* Expected outcome markers for the `want` column. */
#define EVAL_ERROR "<eval error>"
#define COMPILE_ERROR "<compile error>"

struct eval_case {
    const char *expr;
    const char *want; /* printed CEL literal, EVAL_ERROR or COMPILE_ERROR */
};

static inline void check_eval_case(struct cel_env *env, struct cel_evaluator *ev,
                                   const struct eval_case *c)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
    struct cel_value v;
    struct diag d;
    int r;

    diag_init(&d);
    r = cel_compile(env, c->expr, strlen(c->expr), &p, &d);
    if (strcmp(c->want, COMPILE_ERROR) == 0) {
        if (r >= 0)
            fail_msg("%s: compiled, expected a compile error", c->expr);
        return;
    }
    if (r < 0)
        fail_msg("%s: compile error: %s", c->expr, d.msg);
    v = cel_eval(ev, p, NULL, NULL);
    if (strcmp(c->want, EVAL_ERROR) == 0) {
        if (!cel_is_error(v)) {
            assert_int_equal(cel_value_print(&out, v), 0);
            fail_msg("%s: got %s, expected an evaluation error", c->expr, strbuf_str(&out));
        }
        return;
    }
    assert_int_equal(cel_value_print(&out, v), 0);
    if (cel_is_error(v) || strcmp(strbuf_str(&out), c->want) != 0)
        fail_msg("%s: got %s%s, expected %s", c->expr, cel_is_error(v) ? "error " : "",
                 strbuf_str(&out), c->want);
}

/* Runs every row in the DRA environment. */
static inline void check_eval_cases(const struct eval_case *cases, size_t n)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;

    assert_int_equal(cel_env_new_dra(&env), 0);
    assert_int_equal(cel_evaluator_new(&ev), 0);
    for (size_t i = 0; i < n; i++)
        check_eval_case(env, ev, &cases[i]);
}
