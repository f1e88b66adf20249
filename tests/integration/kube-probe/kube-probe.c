/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-probe: runs one request or watch of the Kubernetes API client and prints the outcome as
 * JSON lines, so that the integration tests can check src/kube against a real HTTPS server.
 *
 *   kube-probe [--kubeconfig F] [--serviceaccount-dir D] [--allow-insecure] [--qps Q]
 *              [--burst B] [--timeout-ms T] [--deadline-ms T] [-v N] COMMAND ARGS
 *
 *   config                        the loaded configuration (secrets as booleans)
 *   get|list|delete PATH          {"status":..,"reason":..,"message":..,"body":..}
 *   create|update PATH FILE       the body is the JSON in FILE
 *   patch PATH JSON               a merge patch
 *   modify PATH JSON [STALE]      read-modify-write merging JSON into the object; the first STALE
 *                                 writes carry a stale resourceVersion, forcing a 409
 *   gets PATH K INTERVAL_MS       K gets one after the other, INTERVAL_MS apart, one line each
 *   burst PATH K                  K gets at once; each line also has "ms" since the start
 *   watch PATH N                  {"type":..,"object":..} per event until N events (SYNCED counts)
 *   path GV RESOURCE NS NAME      kube_path ("-" for none)
 *
 * Exit status: 0 when every request got an answer (whatever its status), 1 on a transport
 * failure, 2 on usage or configuration errors, 3 when the deadline passed.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ev.h"
#include "kube.h"

struct probe {
    struct ev_loop *loop;
    struct kube_client *client;
    const char *path;
    json_t *merge;
    unsigned stale;     /* modify: writes left that get a stale resourceVersion */
    unsigned mutations; /* modify: how often mutate ran */
    unsigned pending;   /* requests without an answer yet */
    unsigned left;      /* gets / watch events still to go */
    unsigned interval_ms;
    struct ev_timer *next;
    struct kube_watch *watch;
    uint64_t start_ms;
    bool timestamps;
    int exit_code;
};

static void print_json(json_t *line)
{
    char *s = json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS);
    if (s) {
        printf("%s\n", s);
        fflush(stdout);
    }
    free(s);
}

static void print_response(struct probe *p, const struct kube_response *res)
{
    json_t *line = json_pack("{s:i, s:s, s:s, s:O?}", "status", res->status, "reason", res->reason,
                             "message", res->message, "body", res->body);
    if (!line)
        return;
    if (p->timestamps)
        json_object_set_new(line, "ms",
                            json_integer((json_int_t)(ev_loop_now_ms(p->loop) - p->start_ms)));
    if (p->mutations)
        json_object_set_new(line, "mutations", json_integer(p->mutations));
    print_json(line);
    json_decref(line);
    if (res->status == 0)
        p->exit_code = 1;
}

static void on_done(const struct kube_response *res, void *userdata)
{
    struct probe *p = userdata;
    print_response(p, res);
    if (--p->pending == 0 && p->left == 0)
        ev_loop_stop(p->loop, p->exit_code);
}

static int mutate(json_t *obj, void *userdata)
{
    struct probe *p = userdata;
    _cleanup_json_ json_t *before = json_deep_copy(obj);
    p->mutations++;
    if (!before || json_object_update_recursive(obj, p->merge) < 0)
        return -ENOMEM;
    if (p->stale > 0) {
        p->stale--;
        json_t *meta = json_object_get(obj, "metadata");
        json_object_set_new(meta, "resourceVersion", json_string("1"));
        return 0;
    }
    return json_equal(obj, before) ? 1 : 0;
}

static void on_get_then_next(const struct kube_response *res, void *userdata)
{
    struct probe *p = userdata;
    print_response(p, res);
    if (--p->left == 0) {
        ev_loop_stop(p->loop, p->exit_code);
        return;
    }
    (void)!ev_timer_set(p->next, p->interval_ms ? p->interval_ms : 1, 0);
}

static void on_timed_get(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct probe *p = userdata;
    if (kube_get(p->client, p->path, on_get_then_next, p) < 0)
        ev_loop_stop(p->loop, 2);
}

static const char *event_name(enum kube_event ev)
{
    switch (ev) {
    case KUBE_ADDED:
        return "ADDED";
    case KUBE_MODIFIED:
        return "MODIFIED";
    case KUBE_DELETED:
        return "DELETED";
    case KUBE_SYNCED:
        return "SYNCED";
    }
    return "?";
}

static void on_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct probe *p = userdata;
    json_t *line = json_pack("{s:s}", "type", event_name(ev));
    if (!line)
        return;
    if (ev == KUBE_SYNCED) {
        json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
        json_object_set(line, "resourceVersion", rv ? rv : json_null());
    } else {
        json_object_set(line, "object", obj);
    }
    print_json(line);
    json_decref(line);
    if (p->left > 0 && --p->left == 0)
        ev_loop_stop(p->loop, 0);
}

static void on_deadline(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct probe *p = userdata;
    fprintf(stderr, "kube-probe: deadline passed\n");
    ev_loop_stop(p->loop, 3);
}

static json_t *load_json_file(const char *path)
{
    json_error_t err;
    json_t *v = json_load_file(path, 0, &err);
    if (!v)
        fprintf(stderr, "kube-probe: %s:%d: %s\n", path, err.line, err.text);
    return v;
}

static int print_config(const struct kube_config *cfg)
{
    json_t *o = json_pack(
        "{s:s, s:s?, s:b, s:s?, s:b, s:s?, s:s?, s:b, s:b, s:b, s:s, s:s}", "server", cfg->server,
        "ca_file", cfg->ca_file, "ca_pem", cfg->ca_pem != NULL, "token_file", cfg->token_file,
        "token", cfg->token != NULL, "cert_file", cfg->cert_file, "key_file", cfg->key_file,
        "cert_pem", cfg->cert_pem != NULL, "key_pem", cfg->key_pem != NULL, "insecure",
        cfg->insecure, "namespace", cfg->namespace_, "source", cfg->source);
    if (!o)
        return 2;
    print_json(o);
    json_decref(o);
    return 0;
}

static unsigned parse_unsigned(const char *s)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    return *s && !*end && v < 1000000 ? (unsigned)v : 0;
}

static const char *dash_null(const char *s)
{
    return strcmp(s, "-") == 0 ? NULL : s;
}

static int usage(void)
{
    fprintf(stderr, "usage: kube-probe [options] COMMAND ARGS (see kube-probe.c)\n");
    return 2;
}

/* Starts the command's requests; 0, or an exit code. */
static int start(struct probe *p, int argc, char **argv)
{
    const char *cmd = argv[0];
    struct kube_client *c = p->client;
    int r = -EINVAL;
    _cleanup_json_ json_t *body = NULL;
    p->path = argc > 1 ? argv[1] : NULL;
    if (!p->path)
        return usage();
    p->pending = 1;
    if (strcmp(cmd, "get") == 0 && argc == 2)
        r = kube_get(c, p->path, on_done, p);
    else if (strcmp(cmd, "list") == 0 && argc == 2)
        r = kube_list(c, p->path, on_done, p);
    else if (strcmp(cmd, "delete") == 0 && argc == 2)
        r = kube_delete(c, p->path, on_done, p);
    else if ((strcmp(cmd, "create") == 0 || strcmp(cmd, "update") == 0) && argc == 3) {
        if (!(body = load_json_file(argv[2])))
            return 2;
        r = cmd[0] == 'c' ? kube_create(c, p->path, body, on_done, p)
                          : kube_update(c, p->path, body, on_done, p);
    } else if (strcmp(cmd, "patch") == 0 && argc == 3) {
        if (!(body = json_loads(argv[2], 0, NULL)))
            return usage();
        r = kube_merge_patch(c, p->path, body, on_done, p);
    } else if (strcmp(cmd, "modify") == 0 && (argc == 3 || argc == 4)) {
        if (!(p->merge = json_loads(argv[2], 0, NULL)))
            return usage();
        p->stale = argc == 4 ? parse_unsigned(argv[3]) : 0;
        r = kube_modify(c, p->path, mutate, on_done, p);
    } else if (strcmp(cmd, "gets") == 0 && argc == 4) {
        p->left = parse_unsigned(argv[2]);
        p->interval_ms = parse_unsigned(argv[3]);
        if (p->left == 0)
            return usage();
        r = ev_timer_add(p->loop, 0, 0, on_timed_get, p, &p->next);
    } else if (strcmp(cmd, "burst") == 0 && argc == 3) {
        unsigned k = parse_unsigned(argv[2]);
        if (k == 0)
            return usage();
        p->timestamps = true;
        p->pending = 0;
        p->start_ms = ev_loop_now_ms(p->loop);
        for (unsigned i = 0; i < k; i++) {
            p->pending++;
            r = kube_get(c, p->path, on_done, p);
            if (r < 0)
                break;
        }
    } else if (strcmp(cmd, "watch") == 0 && argc == 3) {
        p->left = parse_unsigned(argv[2]);
        p->pending = 0;
        r = kube_watch_new(c, p->path, on_event, p, &p->watch);
    } else
        return usage();
    if (r < 0) {
        fprintf(stderr, "kube-probe: %s: %s\n", cmd, strerror(-r));
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kubeconfig", required_argument, NULL, 'k'},
        {"serviceaccount-dir", required_argument, NULL, 's'},
        {"allow-insecure", no_argument, NULL, 'i'},
        {"qps", required_argument, NULL, 'q'},
        {"burst", required_argument, NULL, 'b'},
        {"timeout-ms", required_argument, NULL, 't'},
        {"deadline-ms", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    struct kube_config_options copts = {0};
    struct kube_client_options kopts = {0};
    unsigned deadline_ms = 30000;
    int opt;
    while ((opt = getopt_long(argc, argv, "+v:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'k':
            copts.kubeconfig = optarg;
            break;
        case 's':
            copts.serviceaccount_dir = optarg;
            break;
        case 'i':
            copts.allow_insecure = true;
            break;
        case 'q':
            kopts.qps = strtod(optarg, NULL);
            break;
        case 'b':
            kopts.burst = parse_unsigned(optarg);
            break;
        case 't':
            kopts.timeout_ms = parse_unsigned(optarg);
            break;
        case 'd':
            deadline_ms = parse_unsigned(optarg);
            break;
        case 'v':
            log_setup((int)parse_unsigned(optarg), LOG_FORMAT_TEXT);
            break;
        default:
            return usage();
        }
    }
    argc -= optind;
    argv += optind;
    if (argc < 1)
        return usage();

    if (strcmp(argv[0], "path") == 0) {
        if (argc != 5)
            return usage();
        char buf[512];
        struct diag d;
        diag_init(&d);
        int r = kube_path(buf, sizeof(buf), argv[1], argv[2], dash_null(argv[3]),
                          dash_null(argv[4]), &d);
        if (r < 0) {
            fprintf(stderr, "kube-probe: %s\n", d.msg);
            return 2;
        }
        printf("%s\n", buf);
        return 0;
    }

    _cleanup_(kube_config_freep) struct kube_config *cfg = NULL;
    struct diag d;
    diag_init(&d);
    int r = kube_config_load(&copts, &d, &cfg);
    if (r < 0) {
        fprintf(stderr, "kube-probe: %s\n", d.msg);
        return 2;
    }
    if (strcmp(argv[0], "config") == 0)
        return print_config(cfg);

    _cleanup_(ev_loop_freep) struct ev_loop *loop = NULL;
    struct probe p = {0};
    struct ev_timer *deadline = NULL;
    r = ev_loop_new(&loop);
    if (r >= 0)
        r = kube_client_new(loop, cfg, &kopts, &p.client);
    if (r >= 0)
        r = ev_timer_add(loop, deadline_ms, 0, on_deadline, &p, &deadline);
    if (r < 0) {
        fprintf(stderr, "kube-probe: %s\n", strerror(-r));
        return 2;
    }
    p.loop = loop;
    int code = start(&p, argc, argv);
    if (code == 0)
        code = ev_loop_run(loop);
    p.watch = kube_watch_free(p.watch);
    p.client = kube_client_free(p.client);
    json_decref(p.merge);
    return code < 0 ? 2 : code;
}
