/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the kubeconfig loader: any bytes as a kubeconfig give a configuration or a
 * message, never a crash or a leak. The input is a memfd read through /proc/self/fd, so relative
 * paths in it point nowhere readable and nothing outside is touched.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("kubeconfig", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct kube_config_options opts = {.kubeconfig = path, .allow_insecure = size % 2 == 0};
    struct kube_config *cfg = NULL;
    struct diag d;
    diag_init(&d);
    if (kube_config_load(&opts, &d, &cfg) == 0) {
        if (!cfg->server || !cfg->namespace_ || !cfg->source)
            __builtin_trap();
        kube_config_free(cfg);
    } else if (cfg || !d.msg[0]) {
        __builtin_trap();
    }
    close(fd);
    return 0;
}
