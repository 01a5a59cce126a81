/*
 * health.h -- is a device fit to be handed to a job?  Checked before a job
 * starts and before each restart (the supervisor), and every scheduling
 * period (the server); docs/diagnostics.md lists the checks per type.
 *
 * One row per device type (health.c's table), each naming what it checks:
 *   gpu  NVML: retired pages pending (nvmlDeviceGetRetiredPagesPendingStatus,
 *        before Ampere), row remapping pending or failed
 *        (nvmlDeviceGetRemappedRows, Ampere and later), uncorrectable ECC
 *        errors since the driver loaded (volatile counter), and critical XID
 *        events (nvmlEventSet, registered when the watch opens: a watch kept
 *        open from one check to the next sees those in between) that are the
 *        device's, not the application's; one keeps the GPU unhealthy for
 *        10 minutes;
 *   npu  `npu-smi info`: a Health cell other than OK;
 *   cpu and the rest: nothing (no vendor interface trainctl reads).
 * A function NVML or npu-smi lacks (an older driver, a GPU without ECC) is
 * a check skipped, never a failure; a device the tool cannot see at all is
 * unhealthy ("not found").  Devices declared with TRAINCTL_FAKE_DEVICES are
 * never checked.
 *
 * Ownership: struct health_watch holds NVML (dlopen'ed) and its event set
 * between checks; health_close releases them.  Results are the caller's.
 */
#ifndef TC_DEVICES_HEALTH_H
#define TC_DEVICES_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/sbuf.h"

struct health_watch;

/* What is checked for devices of type (static text for messages and docs). */
const char *health_checks_of(const char *type);
/* Are devices of this type checked here at all (a table row, no fake devices)? */
bool health_checked(const char *type);

/* A watch for type's devices (NULL when none are checked: no row, fake devices). */
struct health_watch *health_open(const char *type);
void health_close(struct health_watch *w);

/*
 * Check devices ids[0..n): reasons[i] is a heap "why it is unhealthy"
 * (e.g. "row remapping pending", "XID 79 in the last 10 minutes"), or NULL
 * when device ids[i] passed.  Returns the number that failed.  w NULL:
 * every device passes.
 */
int health_check(struct health_watch *w, const int *ids, int n, char **reasons);
/* Free reasons[0..n) (not the array). */
void health_reasons_release(char **reasons, int n);

/* Pure parts, for the unit tests. */
/* Does XID xid say the device (not the application) is at fault? */
bool health_xid_is_device(unsigned long long xid);
/* npu-smi's Health cell: NULL when it is OK, else the reason (heap). */
char *health_npu_reason(const char *health);

#endif
