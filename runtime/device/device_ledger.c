/* device_ledger.c — device_ledger.h: the live allocations as (pointer, bytes) rows, searched from
 * the newest, since a device's allocations are few (tensors, activations, buffers: made at start,
 * freed at the end) and the latest is the likeliest to be freed first. Counts only. */
#include "runtime/device/device_ledger.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct ledger_row {
    const void *p;
    size_t bytes;
} ledger_row;

struct device_ledger {
    ledger_row *rows;
    size_t n, cap;
    uint64_t in_use, peak;
};

device_ledger *device_ledger_create(void) { return calloc(1, sizeof(device_ledger)); }

void device_ledger_destroy(device_ledger *l)
{
    if (l)
        free(l->rows);
    free(l);
}

bool device_ledger_add(device_ledger *l, const void *p, size_t bytes)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ledger_row *rows = realloc(l->rows, cap * sizeof *rows);
        if (!rows)
            return false;
        l->rows = rows;
        l->cap = cap;
    }
    l->rows[l->n++] = (ledger_row){p, bytes};
    l->in_use += bytes;
    if (l->in_use > l->peak)
        l->peak = l->in_use;
    return true;
}

void device_ledger_remove(device_ledger *l, const void *p)
{
    for (size_t i = l->n; i-- > 0;) {
        if (l->rows[i].p != p)
            continue;
        l->in_use -= l->rows[i].bytes;
        l->rows[i] = l->rows[--l->n];
        return;
    }
}

uint64_t device_ledger_peak(const device_ledger *l) { return l ? l->peak : 0; }
