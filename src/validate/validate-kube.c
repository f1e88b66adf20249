/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The few API calls the checks make, one at a time: each runs an event loop of its own until the
 * answer is in. The checks are short-lived processes that ask a question every few seconds, so
 * blocking here is what they want; the client (src/kube) still does the configuration, TLS,
 * pagination and the error Status decoding.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ev.h"
#include "kube.h"
#include "validate-internal.h"

/* One request should not hold a check for longer than a couple of its retry intervals. */
#define REQUEST_TIMEOUT_MS 15000u

struct validate_kube {
    struct ev_loop *loop;
    struct kube_config *cfg;
    struct kube_client *client;
};

void validate_reply_release(struct validate_reply *r)
{
    if (r->body)
        json_decref(r->body);
    *r = (struct validate_reply){0};
}

bool validate_kube_configured(const char *kubeconfig)
{
    const char *env = getenv("KUBECONFIG");
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    return (kubeconfig && *kubeconfig) || (env && *env) || (host && *host);
}

int validate_kube_open(const char *kubeconfig, struct diag *d, struct validate_kube **ret)
{
    const struct kube_config_options copts = {.kubeconfig =
                                                  kubeconfig && *kubeconfig ? kubeconfig : NULL};
    const struct kube_client_options kopts = {.timeout_ms = REQUEST_TIMEOUT_MS};
    _cleanup_(validate_kube_closep) struct validate_kube *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    int r = ev_loop_new(&k->loop);
    if (r < 0)
        return diag_fail(d, r, "cannot start an event loop: %s", strerror(-r));
    r = kube_config_load(&copts, d, &k->cfg);
    if (r < 0)
        return r;
    r = kube_client_new(k->loop, k->cfg, &kopts, &k->client);
    if (r < 0)
        return diag_fail(d, r, "cannot make an API client for %s: %s", k->cfg->server,
                         strerror(-r));
    log_debug(1, "API server", "server", k->cfg->server, "config", k->cfg->source);
    *ret = TAKE_PTR(k);
    return 0;
}

struct validate_kube *validate_kube_close(struct validate_kube *k)
{
    if (!k)
        return NULL;
    kube_client_free(k->client);
    ev_loop_free(k->loop);
    kube_config_free(k->cfg);
    free(k);
    return NULL;
}

struct call {
    struct ev_loop *loop;
    struct validate_reply *reply;
};

static void on_done(const struct kube_response *res, void *userdata)
{
    struct call *c = userdata;
    c->reply->status = res->status;
    c->reply->body = res->body ? json_incref(res->body) : NULL;
    snprintf(c->reply->reason, sizeof(c->reply->reason), "%s", res->reason ? res->reason : "");
    snprintf(c->reply->message, sizeof(c->reply->message), "%s", res->message ? res->message : "");
    ev_loop_stop(c->loop, 0);
}

int validate_kube_get(struct validate_kube *k, const char *path, bool list,
                      struct validate_reply *ret)
{
    struct call c = {.loop = k->loop, .reply = ret};
    *ret = (struct validate_reply){0};
    int r = list ? kube_list(k->client, path, on_done, &c) : kube_get(k->client, path, on_done, &c);
    if (r < 0)
        return r;
    r = ev_loop_run(k->loop);
    return r < 0 ? r : 0;
}

/* Whether obj's controller is a nvidia.com ClusterPolicy or NVIDIADriver. */
static bool owned_by_operator(const json_t *obj)
{
    json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), *ref;
    size_t i;
    json_array_foreach(refs, i, ref)
    {
        const char *api = json_string_value(json_object_get(ref, "apiVersion"));
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        if (!json_is_true(json_object_get(ref, "controller")) || !api || !kind)
            continue;
        if (strncmp(api, "nvidia.com/", 11) == 0 &&
            (strcmp(kind, "ClusterPolicy") == 0 || strcmp(kind, "NVIDIADriver") == 0))
            return true;
    }
    return false;
}

int validate_driver_managed(struct validate_kube *k, const char *namespace_, bool *ret,
                            struct diag *d)
{
    char path[1024];
    struct validate_reply reply = {0};
    const char *ns = namespace_ && *namespace_ ? namespace_ : NULL;
    int r = kube_path(path, sizeof(path), "apps/v1", "daemonsets", ns, NULL, d);
    if (r < 0)
        return r;
    size_t len = strlen(path);
    if ((size_t)snprintf(path + len, sizeof(path) - len,
                         "?labelSelector=app.kubernetes.io%%2Fcomponent%%3Dnvidia-driver") >=
        sizeof(path) - len)
        return diag_fail(d, -ENAMETOOLONG, "namespace name too long");
    r = validate_kube_get(k, path, true, &reply);
    if (r < 0)
        return diag_fail(d, r, "cannot list the driver DaemonSets: %s", strerror(-r));
    if (reply.status != 200) {
        r = diag_fail(d, -EIO, "cannot list the driver DaemonSets in %s: %s%s%s",
                      ns ? ns : "any namespace", reply.reason,
                      reply.reason[0] && reply.message[0] ? ": " : "", reply.message);
        validate_reply_release(&reply);
        return r;
    }
    json_t *item;
    size_t i;
    *ret = false;
    json_array_foreach(json_object_get(reply.body, "items"), i, item)
    {
        if (owned_by_operator(item))
            *ret = true;
    }
    validate_reply_release(&reply);
    return 0;
}
