/*
 * store_lease.h -- device leases of `trainctl run` and the server (store_lease.c);
 * store.h includes it.
 */
#ifndef TC_STORE_LEASE_H
#define TC_STORE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/* ---- device leases (store_lease.c) ----
 *
 * Table leases: one row per device held, (device_type, device_id) unique,
 * naming the job and the holder process by pid and start ticks.  This is
 * how `trainctl run` and `trainctl server` on one state folder share the
 * machine's accelerators: each takes its devices here before workers
 * start, and neither hands out a device another holds.
 *
 * A lease is held while its holder is alive (pid with the same start
 * ticks, not a zombie) and its job, when it has a row yet, has not ended.
 * Anything else is stale: a holder killed by SIGKILL releases its devices
 * by dying, and the next taker replaces the row.  Holders:
 *   `trainctl run`: its supervisor, from before its job row exists to the
 *     end (store_lease_drop);
 *   the server: itself while it starts a job's supervisor, then that
 *     supervisor (store_job_launch hands the job's leases over), until the
 *     server sees the job stop holding devices (store_lease_drop).
 * cpu "devices" are worker slots, not hardware: nobody leases them.
 */
struct store_lease {
	char *type;           /* device type */
	int id;               /* device id */
	char *job_id;
	pid_t pid;            /* the holder */
	unsigned long long ticks;
	char *job_name, *user; /* of its job; NULL while it has no row */
	bool managed;          /* its job is the server's */
};
/*
 * Take n devices of type for job, held by (pid, ticks), in one transaction:
 * the first n of cand[0..ncand) that no live lease of another job holds
 * (n == ncand: exactly those), written to got[0..n).  All or none: when
 * fewer than n are free, TC_EBUSY naming the job that holds the first
 * candidate in the way, and *busy (when not NULL) is its lease (release
 * with store_lease_release).
 */
int store_lease_take(struct store *st, const char *job, const char *type, const int *cand,
		     int ncand, int n, pid_t pid, unsigned long long ticks, int *got,
		     struct store_lease *busy, struct tc_err *err);
/* Release every lease of job. */
int store_lease_drop(struct store *st, const char *job, struct tc_err *err);
/* The leases held now, by type and id. */
int store_leases_held(struct store *st, struct store_lease **out, size_t *nr,
		      struct tc_err *err);
void store_lease_release(struct store_lease *l);
void store_leases_free(struct store_lease *v, size_t nr);
/* For doctor: the stale leases (see above), and the drop of one exactly as it was read. */
int store_leases_stale(struct store *st, struct store_lease **out, size_t *nr,
		       struct tc_err *err);
int store_lease_drop_stale(struct store *st, const struct store_lease *l, struct tc_err *err);

#endif
