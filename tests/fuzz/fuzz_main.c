/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one libFuzzer entry point: built once per target with
 * -DKOP_FUZZ_TARGET="name" (tests/fuzz/meson.build); it runs that entry of
 * kop_fuzz_targets[]. The logic and the invariants live in targets.c
 * (shared with the corpus replay suite); see scripts/fuzz.sh.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "targets.h"

#ifndef KOP_FUZZ_TARGET
#error "build with -DKOP_FUZZ_TARGET=\"<target>\""
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct kop_fuzz_target *target;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kop_fuzz_init();
    for (const struct kop_fuzz_target *t = kop_fuzz_targets; t->name; t++) {
        if (strcmp(t->name, KOP_FUZZ_TARGET) == 0)
            target = t;
    }
    if (!target) {
        fprintf(stderr, "no fuzz target %s\n", KOP_FUZZ_TARGET);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    target->run(data, size);
    return 0;
}
