/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer entry point: any bytes through the strict JSON scanner, against jansson.
 * The logic and the invariants live in targets.c (shared with the corpus
 * replay suite); see scripts/fuzz.sh.
 */
#include <stddef.h>
#include <stdint.h>

#include "targets.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kop_fuzz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kop_fuzz_jscan(data, size);
    return 0;
}
