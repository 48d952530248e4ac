/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop: flags -> start order -> signal wait -> shutdown order.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kop/config.h"
#include "kop/log.h"

extern char **environ;

int main(int argc, char **argv)
{
    struct kop_config cfg;
    kop_config_defaults(&cfg);
    int r = kop_config_parse(&cfg, argc, argv, environ, stdout, stderr);
    if (r != KOP_CONFIG_OK) {
        kop_config_cleanup(&cfg);
        return r == KOP_CONFIG_EXIT ? 0 : 2;
    }
    kop_log_setup(cfg.log_level, cfg.log_format, 2);
    kop_config_cleanup(&cfg);
    return 0;
}
