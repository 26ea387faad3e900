/* The tally of the counted sweeps (see sweep.h). */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

#include <stdio.h>
#include <string.h>

typedef struct tally {
    const char *entry;
    int tried;
    int handled;
} tally;

enum { MAX_ENTRIES = 80 };
static tally tallies[MAX_ENTRIES];
static int entry_count;
static int mismatches;

static tally *tally_of(const char *entry) {
    for (int i = 0; i < entry_count; i++) {
        if (strcmp(tallies[i].entry, entry) == 0) return &tallies[i];
    }
    CHECK(entry_count < MAX_ENTRIES);
    tallies[entry_count].entry = entry;
    return &tallies[entry_count++];
}

/* Whether the last error message names `needle`, or one of its '|'-separated alternatives. */
static int names(const char *needle) {
    char alternatives[256];
    snprintf(alternatives, sizeof alternatives, "%s", needle);
    char *save = NULL;
    for (char *a = strtok_r(alternatives, "|", &save); a != NULL; a = strtok_r(NULL, "|", &save)) {
        if (test_last_error_contains(a)) return 1;
    }
    return 0;
}

void sweep_record(const char *entry, sam2_status got, sam2_status want, const char *needle,
                  int untouched, const char *file, int line, const char *call) {
    tally *t = tally_of(entry);
    t->tried++;
    int named = needle == NULL || names(needle);
    if (got == want && named && untouched) {
        t->handled++;
        return;
    }
    mismatches++;
    fprintf(stderr, "%s:%d: %s\n  returned %s, expected %s%s%s%s\n  message: %s\n", file, line,
            call, test_status_name(got), test_status_name(want),
            named ? "" : "; the message does not name ", named ? "" : needle,
            untouched ? "" : "; an out-param was written", test_last_error());
}

int sweep_finish(const char *program, const char *tsv) {
    int tried = 0, handled = 0;
    printf("%-38s %7s %8s\n", "entry point", "inputs", "handled");
    for (int i = 0; i < entry_count; i++) {
        printf("%-38s %7d %8d\n", tallies[i].entry, tallies[i].tried, tallies[i].handled);
        tried += tallies[i].tried;
        handled += tallies[i].handled;
    }
    printf("%-38s %7d %8d\n", "all", tried, handled);
    FILE *f = test_report_file(tsv);
    if (f != NULL) {
        fprintf(f, "entry\tinputs\thandled\n");
        for (int i = 0; i < entry_count; i++) {
            fprintf(f, "%s\t%d\t%d\n", tallies[i].entry, tallies[i].tried, tallies[i].handled);
        }
        fclose(f);
    }
    if (mismatches != 0) {
        fprintf(stderr, "%s: %d input(s) not handled as documented (listed above)\n", program,
                mismatches);
        return 1;
    }
    printf("%s: ok\n", program);
    return 0;
}
