/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfyaml, mapped only while a YAML document is being parsed. Every document becomes jansson
 * values at once, so nothing of libfyaml is needed afterwards: a daemon that read its config file
 * at start does not keep the parser's 450 KiB of pages for the rest of its life. The one exception
 * is a parser that had to be parked (see base-doc.c): it pins the library for good.
 */
#include "base-dlib.h"
#include "base-doc-internal.h"

struct doc_fy doc_fy;

static const struct dlib_sym fy_syms[] = {
    DLIB_SYM(doc_fy.diag_cfg_default, fy_diag_cfg_default),
    DLIB_SYM(doc_fy.diag_create, fy_diag_create),
    DLIB_SYM(doc_fy.diag_destroy, fy_diag_destroy),
    DLIB_SYM(doc_fy.diag_errors_iterate, fy_diag_errors_iterate),
    DLIB_SYM(doc_fy.diag_set_collect_errors, fy_diag_set_collect_errors),
    DLIB_SYM(doc_fy.event_get_anchor_token, fy_event_get_anchor_token),
    DLIB_SYM(doc_fy.event_get_tag_token, fy_event_get_tag_token),
    DLIB_SYM(doc_fy.event_get_token, fy_event_get_token),
    DLIB_SYM(doc_fy.event_start_mark, fy_event_start_mark),
    DLIB_SYM(doc_fy.parser_create, fy_parser_create),
    DLIB_SYM(doc_fy.parser_destroy, fy_parser_destroy),
    DLIB_SYM(doc_fy.parser_event_free, fy_parser_event_free),
    DLIB_SYM(doc_fy.parser_get_stream_error, fy_parser_get_stream_error),
    DLIB_SYM(doc_fy.parser_parse, fy_parser_parse),
    DLIB_SYM(doc_fy.parser_set_string, fy_parser_set_string),
    DLIB_SYM(doc_fy.token_get_text, fy_token_get_text),
    DLIB_SYM(doc_fy.token_scalar_style, fy_token_scalar_style),
};

static struct dlib fy_lib = DLIB_INIT("libfyaml.so.0", "libfyaml0", fy_syms, true);

int doc_fy_acquire(struct diag *d)
{
    return dlib_acquire(&fy_lib, d);
}

void doc_fy_release(void)
{
    dlib_release(&fy_lib);
}

void doc_fy_pin(void)
{
    struct diag d;
    diag_init(&d);
    /* Already mapped (the caller holds a reference), so this cannot fail. */
    (void)!dlib_pin(&fy_lib, &d);
}

bool doc_fy_loaded(void)
{
    return dlib_loaded(&fy_lib);
}
