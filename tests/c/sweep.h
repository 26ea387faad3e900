/*
 * Counted sweeps of the ABI: test_null_sweep.c calls every export with NULL in each pointer
 * argument, test_bad_input.c with every other bad value; each input is recorded against its entry
 * point. An input is handled when the status is the documented one, the last error message names
 * what it should, and the out-params were left alone. A mismatch is listed at once and the sweep
 * goes on; sweep_finish prints the table, writes it to $SAM2_REPORT_DIR/<tsv> for
 * scripts/reliability.sh, and gives the program's exit status.
 */
#ifndef SAM2_TEST_SWEEP_H
#define SAM2_TEST_SWEEP_H

#include "common.h"

/* Records one input of `entry`: handled when `got` is `want`, the last error message names
 * `needle` or one of its '|'-separated alternatives (NULL: nothing to check), and `untouched`. */
void sweep_record(const char *entry, sam2_status got, sam2_status want, const char *needle,
                  int untouched, const char *file, int line, const char *call);

/* Prints the table of inputs per entry point, writes it to $SAM2_REPORT_DIR/<tsv>, and returns
 * 0 when every input was handled, else 1 (after saying how many were not). */
int sweep_finish(const char *program, const char *tsv);

/* A call returning sam2_status; `untouched` is evaluated after the call. */
#define TRY_IF(entry, call, want, needle, untouched)                                          \
    do {                                                                                     \
        sam2_status got_ = (call);                                                           \
        sweep_record(entry, got_, want, needle, untouched, __FILE__, __LINE__, #call);       \
    } while (0)
#define TRY(entry, call, want, needle) TRY_IF(entry, call, want, needle, 1)

/* A function without a status (a value, or void): `call_then_ok` says it did what is
 * documented. */
#define TRY_VALUE(entry, call_then_ok, needle)                                                \
    do {                                                                                     \
        int ok_ = (call_then_ok);                                                            \
        sweep_record(entry, ok_ ? SAM2_OK : SAM2_ERR_PANIC, SAM2_OK, needle, 1, __FILE__,    \
                     __LINE__, #call_then_ok);                                               \
    } while (0)

#endif
