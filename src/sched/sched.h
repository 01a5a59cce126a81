/*
 * sched.h -- the scheduler of `trainctl server`: queue order, device
 * allocation, preemption choice and quotas, as pure functions over arrays
 * (no I/O, no clock), so that every rule is unit-tested and one decision is
 * cheap with 10,000 jobs queued.
 *
 * THE RULES (docs/server.md)
 *  (1) Queue order: priority (higher first), then the fair-share factor
 *      (higher first: sched/fairshare.h, from the recent usage of the job's
 *      team and user against their shares; the caller's, 0 for all when
 *      fair share is off), then submission time, then id.
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
 *  (9) Team limits: a team (struct sched_team_limit, per device type) may
 *      hold at most guarantee + borrow devices of a type in its running and
 *      stopping jobs plus the candidate; a job over that is skipped and
 *      blocks nobody, as in (5).  A type a team has no row for, and a job
 *      with no team, has guarantee 0 and no limit: it only borrows.  Per-user
 *      quotas (5) apply as well, inside the team's.
 * (10) Borrowing: of a team's running and stopping jobs of a type, oldest
 *      first (created, then id), the jobs whose devices take the team's sum
 *      past its guarantee are borrowing.  A queued job that would borrow is
 *      skipped (blocks nobody) while a job of another team that fits inside
 *      its own guarantee (and its user's quota) waits for that type: idle
 *      devices are lent, and come back to their team before they are lent
 *      again.
 * (11) Reclaim: when a job that fits inside its team's guarantee cannot
 *      start for want of devices, borrowing running jobs of other teams of
 *      that type are chosen, newest first, until the devices they hold plus
 *      the free ones (plus those of jobs already stopping) let it start;
 *      if even all of them would not do, nobody is reclaimed (rule 4 may
 *      still apply).  Priority and preemptible do not matter here: the
 *      devices were lent.  Victims stop as in (4): checkpoint, requeue.
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
	const char *team;  /* NULL: none (rule 9) */
	double fairshare;  /* rule (1): the fair-share factor in [0, 1] (fairshare.h); 0: off */
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

struct sched_team_limit {
	const char *team, *type;
	int guarantee, borrow;
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
	const struct sched_team_limit *teams; /* rules 9-11; none: no team rules */
	size_t nteams;
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
	bool reclaim;     /* PREEMPT: by rule (11), the victims' borrowed devices go back */
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

/* Rule 9's row of team for type, or NULL (guarantee 0, no limit). */
const struct sched_team_limit *sched_team_row(const struct sched_in *in, const char *team,
					      const char *type);
/* Rule 10: is running (or stopping) job k borrowing? */
bool sched_borrowing(const struct sched_in *in, size_t k);

/* Why queued job k waits, by the first rule that holds it (for `team show` and the API). */
enum sched_wait {
	SCHED_WAIT_QUOTA,      /* rule 5: its user's quota */
	SCHED_WAIT_TEAM_LIMIT, /* rule 9: its team's guarantee + borrow */
	SCHED_WAIT_RECLAIM,    /* rule 10: it would borrow while another team waits for its guarantee */
	SCHED_WAIT_DEVICES,    /* rules 2, 3: not enough free devices, or a job ahead holds the type */
};
enum sched_wait sched_why(const struct sched_in *in, size_t k);
/* "quota", "team limit", "guarantee of another team", "devices" */
const char *sched_wait_name(enum sched_wait w);

#endif
