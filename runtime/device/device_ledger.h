/* device_ledger.h — the bytes each live allocation of a device holds, so that the device can say
 * the most its allocations held at once (device_memory_peak). Kept by the checking table's alloc
 * and free (device_check_memory.c) for either backend alike; internal to runtime/device. Must not
 * allocate or free device memory itself: it only counts what alloc and free did. */
#ifndef DDP_DEVICE_LEDGER_H
#define DDP_DEVICE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct device_ledger device_ledger;

device_ledger *device_ledger_create(void); /* NULL when out of host memory */
void device_ledger_destroy(device_ledger *l);
/* Records p (bytes long); false when out of host memory (nothing recorded). */
bool device_ledger_add(device_ledger *l, const void *p, size_t bytes);
/* Forgets p; a pointer never recorded is ignored. */
void device_ledger_remove(device_ledger *l, const void *p);
/* The most bytes the recorded allocations held at once. */
uint64_t device_ledger_peak(const device_ledger *l);

#endif
