/*
 * spare.h -- a hot spare of a multi-node job: a node of the allocation
 * that holds no member's rank and waits, idle, until the driver calls it
 * in a lost node's place (docs/slurm.md, "Spares").
 *
 * While it waits, the backend runs launch_spare_watch on it (Slurm:
 * `trainctl supervise-spare JOB` in a step of its own): the job's device
 * health checks (devices/health.h, the same ones a node supervisor makes
 * before its workers start) at once and then every interval, each told to
 * the driver as one line, LAUNCH_SPARE_TAG and then JSON:
 *
 *   {"node_name": "n3", "time": 1764390000.5, "ok": false,
 *    "checked": true, "reason": "gpu 0: row remapping pending (reset the GPU)"}
 *
 * ("checked": false for a device type trainctl reads no health of: ok.)
 * It opens no device, starts no worker and writes nothing else.  The
 * driver keeps each spare's newest line (launch_spare_parse) and passes
 * over a spare whose newest check failed.
 *
 * Ownership: strings in struct launch_spare_health are the caller's after
 * launch_spare_parse (launch_spare_health_release frees them).
 */
#ifndef TC_LAUNCH_SPARE_H
#define TC_LAUNCH_SPARE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

#define LAUNCH_SPARE_TAG "trainctl-spare-health: "
/* Seconds between a waiting spare's checks (after the one at its start). */
#define LAUNCH_SPARE_INTERVAL 30

/* What launch_spare_watch checks, and where its lines go. */
struct launch_spare_watch {
	const char *node_name;  /* as the scheduler names this node */
	const char *type;       /* the job's device type (devices.h kind) */
	const int *ids;         /* the devices a member on this node would use */
	int n;
	int interval;           /* seconds between checks, > 0 */
	/* one line, '\n'-terminated, for the driver; false: nobody reads them any more */
	bool (*tell)(void *ctx, const char *line);
	void *tell_ctx;
	volatile sig_atomic_t *stop; /* set (by a signal handler) to end the watch */
};

/* Check at once, then every interval, until *stop is set or tell fails; 0, or a bad argument. */
int launch_spare_watch(const struct launch_spare_watch *w, struct tc_err *err);

/* One spare's newest check, as the driver keeps it. */
struct launch_spare_health {
	char *node_name;
	double time;
	bool ok;
	char *reason; /* NULL when ok */
};
/* A line of the spare step's output (with its tag, without its '\n'): true when it was one. */
bool launch_spare_parse(const char *line, size_t len, struct launch_spare_health *out);
void launch_spare_health_release(struct launch_spare_health *h);

#endif
