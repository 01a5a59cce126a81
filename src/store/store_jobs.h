/*
 * store_jobs.h -- jobs, their workers and events (store.c);
 * store.h includes it.
 */
#ifndef TC_STORE_JOBS_H
#define TC_STORE_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "jobs/state.h"

struct store;

/*
 * The job record: every column of a jobs row.  Readers get all of them;
 * store_job_create writes the first block plus user and the device columns
 * (the other columns keep their defaults), store_job_submit the server's
 * block too.
 */
struct job_row {
	char *id;
	char *name;
	enum job_state state;
	char *run_dir;
	char *spec_json;
	double created, started, ended; /* 0 when not yet */
	int exit_code;                  /* trainctl's exit status for the job; -1 while running */
	char *root_cause;               /* NULL or text */
	int restarts;
	int world_size;
	pid_t sup_pid;
	unsigned long long sup_ticks;
	/*
	 * trainctl server (see the server section below).  store_job_create
	 * writes user (the account of `trainctl run`; '' when NULL),
	 * device_type, device_count and devices too.
	 */
	char *user;
	int priority;
	bool preemptible;
	char *device_type;
	int device_count;
	char *device_want;         /* ids the spec named ("0,1"), or NULL for any */
	char *devices;             /* ids held while it runs, or NULL */
	enum job_stop stop_reason; /* why the server asked it to stop */
	bool managed;              /* the server schedules it */
	/* the backend (see the slurm section below) */
	char *backend;             /* "local" or "slurm" */
	char *slurm_job, *slurm_nodes, *slurm_state; /* NULL when not set */
	/* the job's team: written by store_job_submit, borrowed (not freed, not read
	 * back here: store_job_team reads it) */
	const char *team;
};

struct worker_row {
	int attempt, rank, local_rank;
	pid_t pid;
	int exit_code; /* -1 while running or when killed by a signal */
	int signal;    /* 0 unless killed by one */
	double started, ended;
};

struct event_row {
	double time;
	enum job_state state;
	char *reason;
};

/* A new unique job id that sorts by time: YYYYMMDD-HHMMSS-mmm-xxxx. */
char *store_new_job_id(void);

int store_job_create(struct store *st, const struct job_row *job, struct tc_err *err);
int store_job_set_state(struct store *st, const char *id, enum job_state state,
			const char *reason, struct tc_err *err);
/*
 * Record the end: state, exit status and root cause in one go.  A job
 * whose end is already recorded keeps it: this one changes nothing (0).
 */
int store_job_finish(struct store *st, const char *id, enum job_state state, int exit_code,
		     const char *root_cause, const char *reason, struct tc_err *err);
/*
 * An event row that is not a change of state (jobs_note): the job's
 * current state with reason.  Nothing is written for an unknown job.
 */
int store_job_event(struct store *st, const char *id, const char *reason, struct tc_err *err);
int store_job_set_restarts(struct store *st, const char *id, int restarts, struct tc_err *err);
int store_job_set_supervisor(struct store *st, const char *id, pid_t pid,
			     unsigned long long ticks, struct tc_err *err);

int store_worker_start(struct store *st, const char *job, int attempt, int rank, int local_rank,
		       pid_t pid, struct tc_err *err);
int store_worker_end(struct store *st, const char *job, int attempt, int rank, int exit_code,
		     int signal, struct tc_err *err);

/*
 * The workers of an attempt are up: in one transaction, the job's row when
 * create is set (a supervisor that writes nothing before its workers run),
 * the workers' rows (rank, local_rank, pid, started) and, when why is set,
 * the state running with its event.
 */
struct store_start {
	const struct job_row *create; /* NULL: the row exists */
	const char *job_id;
	int attempt;
	const struct worker_row *workers;
	size_t nworkers;
	const char *why; /* NULL: the state stays */
};
int store_job_started(struct store *st, const struct store_start *s, struct tc_err *err);

/*
 * Find one job by id, unique id prefix, or name (the newest of that name).
 * Returns TC_ENOTFOUND (or TC_EUSAGE for an ambiguous prefix).
 */
int store_job_get(struct store *st, const char *ref, struct job_row *out, struct tc_err *err);
/*
 * store_job_get among user's jobs for prefixes and names (a whole id is
 * found whoever owns it); user NULL: everyone's.  Ambiguity errors then
 * name only user's ids.
 */
int store_job_get_of(struct store *st, const char *ref, const char *user, struct job_row *out,
		     struct tc_err *err);
/* Newest first; all=false keeps jobs that are not finished plus the 20 newest. */
int store_job_list(struct store *st, bool all, struct job_row **out, size_t *nr,
		   struct tc_err *err);
int store_workers(struct store *st, const char *job, struct worker_row **out, size_t *nr,
		  struct tc_err *err);
int store_events(struct store *st, const char *job, struct event_row **out, size_t *nr,
		 struct tc_err *err);

void job_row_release(struct job_row *j);
void job_rows_free(struct job_row *v, size_t nr);
void event_rows_free(struct event_row *v, size_t nr);

#endif
