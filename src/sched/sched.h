/*
 * sched.h -- the scheduler of `trainctl server`: queue order, device
 * allocation, preemption choice and quotas, as pure functions over arrays
 * (no I/O, no clock), so that every rule is unit-tested and one decision is
 * cheap with 10,000 jobs queued.
 *
 * THE RULES (docs/server.md)
 *  (1) Queue order: priority (higher first), then submission time, then id.
 *  (2) All or nothing: a job starts only when every device it needs is free:
 *      `count` devices of its type (the lowest free ids), or exactly the ids
 *      its spec named.  A device belongs to at most one job.
 *  (3) A job that cannot start for want of devices blocks the jobs of the same
 *      device type behind it (so big jobs are never starved), but for
 *      backfill (8); jobs of other types go on.  A job over its user's
 *      quota is skipped and blocks nobody.
 *  (4) Preemption: when a non-preemptible job cannot start, preemptible
 *      running jobs of the same type with a lower priority are chosen,
 *      lowest priority first, then newest first, until the devices they hold
 *      plus the free ones (plus those of jobs already stopping) let it start;
 *      if even all of them would not do, nobody is preempted.  While jobs
 *      are stopping, their devices count as coming and nothing more is
 *      preempted for that job.
 *  (5) Quotas: a user's running and stopping jobs plus the candidate may
 *      hold at most quota devices (all types together); no quota = no limit.
 *  (6) Leased devices (owner SCHED_LEASED: held by a job the scheduler does
 *      not run, a `trainctl run` on the same machine) are neither free nor
 *      preemptible: a job that needs them waits, by rule (3).
 *  (7) Unhealthy devices (owner SCHED_UNHEALTHY: failed their health check,
 *      devices/health.h) are neither free nor preemptible either: jobs get
 *      the healthy ones, and a job that needs more than those waits.
 *  (8) Backfill (EASY: one reservation per type).  The first job that rule
 *      (3) blocks in a type gets a reservation: the earliest time its
 *      devices are free, counting each running job of the type as ending at
 *      started + max_runtime (a stopping one: now), and the devices it would
 *      get then.  A running job without a limit never ends in this view: if
 *      the reservation needs its devices, none can be computed and nothing
 *      backfills in that type.  A later job of the type, within its quota,
 *      then starts now when it fits in the free devices and either ends
 *      (now + its max_runtime) by the reservation or uses none of the
 *      devices the reservation needs.  Jobs without a limit never backfill.
 *      The limits are enforced (a job past max_runtime is stopped), so a
 *      backfilled job cannot delay the reserved one.
 *
 * sched_decide() returns one decision; the caller applies it (marks the
 * job running with its ids, or the victims stopping) and asks again until
 * SCHED_NONE.
 */
#ifndef TC_SCHED_H
#define TC_SCHED_H

#include <stdbool.h>
#include <stddef.h>

enum sched_state {
	SJ_QUEUED,   /* waiting in the queue */
	SJ_RUNNING,  /* holds its devices */
	SJ_STOPPING, /* asked to stop: holds its devices until it is gone */
	SJ_IDLE,     /* paused, finished: holds nothing, not queued */
};

struct sched_job {
	const char *id, *user, *type;
	int priority;
	bool preemptible;
	double created;
	int count;         /* devices needed */
	const int *want;   /* count exact ids, or NULL for any */
	enum sched_state state;
	double started;     /* RUNNING: wall time it started running (rule 8) */
	double max_runtime; /* limits.max_runtime, seconds; 0 = none (rule 8) */
};

#define SCHED_FREE (-1)   /* owner of a free device */
#define SCHED_LEASED (-2) /* owner of a device held outside the scheduler (rule 6) */
#define SCHED_UNHEALTHY (-3) /* owner of a device that failed its health check (rule 7) */

struct sched_dev {
	const char *type;
	int id;
	int owner; /* index into the jobs array, or SCHED_FREE, or SCHED_LEASED */
};

struct sched_quota {
	const char *user; /* "*" = everyone without their own row */
	int max_devices;
};

struct sched_in {
	const struct sched_job *jobs;
	size_t njobs;
	const size_t *queue;  /* indices of queued jobs in queue order (sched_sort) */
	size_t nqueue;
	const struct sched_dev *devs;
	size_t ndevs;
	const struct sched_quota *quotas;
	size_t nquotas;
	double now; /* wall time of the decision (rule 8) */
};

enum sched_action { SCHED_NONE, SCHED_START, SCHED_PREEMPT };

struct sched_decision {
	enum sched_action action;
	size_t job;       /* the job started, or the one the preemption is for */
	int *ids;         /* START: the device ids chosen (job's count of them); heap */
	size_t *victims;  /* PREEMPT: job indices to stop; heap */
	size_t nvictims;
	bool backfill;    /* START: out of order, by rule (8) */
	size_t ahead;     /* ... past this job (its type's reserved one) */
	double reserved;  /* ... whose reservation is at this time */
};

/* Rule (1) as a comparison of two jobs (qsort style). */
int sched_cmp(const struct sched_job *a, const struct sched_job *b);
/* Sort idx[0..n) (indices into jobs) into queue order. */
void sched_sort(const struct sched_job *jobs, size_t *idx, size_t n);

/* One decision; free it with sched_decision_release. */
void sched_decide(const struct sched_in *in, struct sched_decision *out);
void sched_decision_release(struct sched_decision *d);

/*
 * Rule (8)'s reservation of the waiting job k as it stands: true with *at
 * the wall time its devices are expected free (now when they are), false
 * when none can be computed (a running job it waits on has no limit).
 * For `trainctl queue`: "held behind a reservation".
 */
bool sched_reservation(const struct sched_in *in, size_t k, double *at);

/* The quota of user: its own row, else "*", else -1 (none). */
int sched_quota_of(const struct sched_in *in, const char *user);

#endif
