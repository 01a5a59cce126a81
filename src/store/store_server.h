/*
 * store_server.h -- the server's columns, tokens and telemetry (store_server.c);
 * store.h includes it.
 */
#ifndef TC_STORE_SERVER_H
#define TC_STORE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "jobs/state.h"
#include "store/store_jobs.h"

struct store;

/* ---- trainctl server (store_server.c) ----
 *
 * Columns of jobs for the server: user (owner; '' for `trainctl run`),
 * priority, preemptible, device_type, device_count, device_want (ids the
 * spec named, "0,1", or NULL for any), devices (ids held while it runs),
 * stop_reason (why the server asked its supervisor to stop: preempted,
 * paused or stopped; the supervisor records that state on SIGTERM) and
 * managed (1: the server schedules it).  Tables tokens (SHA-256 of each
 * bearer token, hex) and job_usage (telemetry samples, dev as JSON).
 *
 *   queued --(scheduler: store_job_launch)--> starting -> running -> ...
 *   running --(stop_reason preempted, SIGTERM)--> preempted --(store_job_requeue)--> queued
 *   running --(stop_reason paused)--> paused --(resume: store_job_requeue)--> queued
 *   lost (supervisor died) --(restart budget left: store_job_requeue)--> queued
 */

/* A new managed job in state queued (id, name, run_dir, spec_json, created,
 * world_size, the server's block of j and its backend). */
int store_job_submit(struct store *st, const struct job_row *j, struct tc_err *err);
/* The team a job was submitted for (column team; docs/server.md "Teams"): *team heap, NULL for none. */
int store_job_team(struct store *st, const char *id, char **team, struct tc_err *err);
/* Managed jobs not in a terminal state, oldest first. */
int store_job_active_managed(struct store *st, struct job_row **out, size_t *nr,
			     struct tc_err *err);
/*
 * The scheduler started its supervisor: devices, pid, state starting, and
 * the job's leases handed to the supervisor, one transaction.
 */
int store_job_launch(struct store *st, const char *id, const char *devices, pid_t pid,
		     unsigned long long ticks, const char *reason, struct tc_err *err);
/* Back to state (queued or paused) holding nothing; count_restart adds one to restarts. */
int store_job_requeue(struct store *st, const char *id, enum job_state state, bool count_restart,
		      const char *reason, struct tc_err *err);
int store_job_set_devices(struct store *st, const char *id, const char *devices,
			  struct tc_err *err);
int store_job_set_stop_reason(struct store *st, const char *id, enum job_stop why,
			      struct tc_err *err);
/* The job's stop_reason (JOB_STOP_NONE when not set or no such job). */
int store_job_stop_reason(struct store *st, const char *id, enum job_stop *out,
			  struct tc_err *err);
int store_job_delete(struct store *st, const char *id, struct tc_err *err);

struct store_event {
	long long id;
	char *job_id;
	enum job_state state;
	char *reason, *user;
	double time;
};
/* Events with id > after, oldest first, at most limit. */
int store_events_after(struct store *st, long long after, int limit, struct store_event **out,
		       size_t *nr, struct tc_err *err);
int store_events_last(struct store *st, long long *last, struct tc_err *err);
void store_events_free(struct store_event *v, size_t nr);

/* Listing filter: NULL fields match all; states is a set of (1u << JOB_*), 0 for all. */
struct store_jfilter {
	unsigned states;
	const char *user, *name;
	long limit, offset;
};
/* The matching jobs, newest first (limit, offset); *total counts all matches. */
int store_job_query(struct store *st, const struct store_jfilter *f, struct job_row **out,
		    size_t *nr, long long *total, struct tc_err *err);
/*
 * The same listing handed to fn row by row as it is read, nothing kept: the
 * row is fn's for the call only, and its spec_json is NULL (a listing does
 * not read it).  A non-zero return from fn stops the listing and is
 * returned.  *total is set before the first call.
 */
int store_job_each(struct store *st, const struct store_jfilter *f,
		   int (*fn)(void *arg, const struct job_row *j), void *arg, long long *total,
		   struct tc_err *err);

int store_token_add(struct store *st, const char *hash, const char *user, bool admin,
		    struct tc_err *err);
/* TC_ENOTFOUND for an unknown hash. */
int store_token_find(struct store *st, const char *hash, char **user, bool *admin,
		     struct tc_err *err);
int store_token_count(struct store *st, long long *n, struct tc_err *err);
/* Every token (its hash, never the token), oldest first; fn's nonzero stops and is returned. */
int store_token_each(struct store *st,
		     int (*fn)(void *arg, const char *hash, const char *user, bool admin,
			       double created),
		     void *arg, struct tc_err *err);
/* Delete the tokens whose hash starts with prefix, or (prefix NULL) all of user's; *n deleted. */
int store_token_revoke(struct store *st, const char *prefix, const char *user, long long *n,
		       struct tc_err *err);

int store_usage_add(struct store *st, const char *id, double t, double cpu, double mem,
		    const char *dev_json, struct tc_err *err);
/* counts[s] = the jobs in state s. */
int store_state_counts(struct store *st, long long counts[JOB_NSTATES], struct tc_err *err);
/* {"series": [{"metric", "rank", "points"}]} of a job. */
int store_metric_names_json(struct store *st, const char *job, struct sbuf *out,
			    struct tc_err *err);
/* [{"time", "cpu", "mem", "devices": [...]}] of samples after since. */
int store_usage_json(struct store *st, const char *id, double since, struct sbuf *out,
		     struct tc_err *err);

#endif
