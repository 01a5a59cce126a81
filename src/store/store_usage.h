/*
 * store_usage.h -- usage accounting (store_usage.c): who held how many
 * devices of which type, when, and how long each job waited first.
 *
 * One row per interval a job held its devices: opened when the job enters
 * running without an open interval, closed when it leaves the states that
 * hold devices (starting, running, restarting) for any other.  Both writes
 * are made by the store's own state change (store.c's set_state), in the
 * transaction that records the state, so an interval is as durable as the
 * state it follows: a server killed with SIGKILL leaves an open interval,
 * which a reader closes at the job's recorded end, or now while the job
 * has none.  The rows name no job row (no foreign key): they outlive a
 * deleted job, as an accounting record must (`trainctl gc`).
 *
 * Ownership: the report's rows are the caller's (usage_rows_free).
 */
#ifndef TC_STORE_USAGE_H
#define TC_STORE_USAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "jobs/state.h"

struct store;

/*
 * Job id entered state `to` at `now`: open or close its interval.  Only
 * from inside the transaction that writes the state (store.c).
 */
int store_usage_edge(struct store *st, const char *id, enum job_state to, double now,
		     struct tc_err *err);

enum usage_by { USAGE_BY_USER, USAGE_BY_TEAM };

struct usage_query {
	double since, until; /* the window, seconds since the epoch; intervals are clipped to it */
	double now;          /* where an open interval of a job with no recorded end stops */
	enum usage_by by;
	const char *user;    /* NULL: everyone's; else only this user's intervals */
	bool slurm_apart;    /* leave out the intervals of jobs with a Slurm id (counted from sacct) */
};

/* One group (a user, or a team; "" for none) and device type. */
struct usage_row {
	char *group;
	char *device_type;
	double device_seconds; /* device count x seconds held, inside the window */
	long jobs;             /* jobs with an interval in the window */
	long waited;           /* of them, those whose first interval is in it */
	double wait_mean, wait_max; /* queued -> first running, seconds, over `waited` */
};

int store_usage_report(struct store *st, const struct usage_query *q, struct usage_row **out,
		       size_t *nr, struct tc_err *err);
void usage_rows_free(struct usage_row *v, size_t nr);

/*
 * Fair share (sched/fairshare.h): every interval that held devices after
 * since, its end as the report reads it (open: the job's recorded end, else
 * now), oldest first; a Slurm job's are not (it held none of this machine's
 * devices, and Slurm has a fair share of its own).  Ownership: the caller's (usage_intervals_free).
 */
struct usage_interval {
	char *team; /* NULL: the job had none */
	char *user, *device_type;
	int device_count;
	double opened, stop;
};
int store_usage_intervals(struct store *st, double since, double now, struct usage_interval **out,
			  size_t *n, struct tc_err *err);
void usage_intervals_free(struct usage_interval *v, size_t n);

/*
 * The jobs with a Slurm id (backend: slurm) that may have run in q's
 * window (created before until, not ended before since), of q's user when
 * it names one: what sacct is asked about (jobs/usage.c).  Their intervals
 * here follow the states the store saw, with the devices of one node.
 */
struct usage_slurm_job {
	char *job_id, *slurm_id;
	char *group;        /* user or team, as q->by says ("" for none) */
	char *device_type;
	int per_node;       /* the job's device count: per node */
	double created;
};
int store_usage_slurm_jobs(struct store *st, const struct usage_query *q,
			   struct usage_slurm_job **out, size_t *nr, struct tc_err *err);
void usage_slurm_jobs_free(struct usage_slurm_job *v, size_t nr);

/*
 * Retention: the finished jobs (terminal states only) that ended before
 * `before`, oldest first (job_rows_free).
 */
struct job_row;
int store_jobs_ended_before(struct store *st, double before, struct job_row **out, size_t *nr,
			    struct tc_err *err);

#endif
