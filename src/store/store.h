/*
 * store.h -- the job database: one SQLite file ($TRAINCTL_HOME/trainctl.db)
 * in WAL mode with a busy timeout, so the supervisor writing and `ps` or
 * `show` reading never block each other for long.
 *
 * Tables: jobs, workers (one row per rank and attempt), events (every state
 * change with its reason).  Nothing important lives only in memory: the
 * supervisor writes each change as it happens.
 *
 * JOB STATES
 *
 *                 store_job_create
 *                        |
 *                        v
 *   queued ---------> starting --------> running ----------> succeeded
 *   (server)            |                 |   ^                 failed
 *                       |                 v   | (group back)    killed
 *                       |              restarting               lost
 *                       +-----> failed / killed
 *
 *   paused, preempted: set by the scheduler of `trainctl server`.
 *   lost: the supervisor vanished without recording an end; set by
 *         store_job_reconcile() when a reader finds its pid gone.
 *
 * Every transition goes through store_job_set_state(), which writes the
 * state and an event row in one transaction.  Terminal states: succeeded,
 * failed, killed, lost.
 */
#ifndef TC_STORE_H
#define TC_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

struct job_row {
	char *id;
	char *name;
	char *state;
	char *run_dir;
	char *spec_json;
	double created, started, ended; /* 0 when not yet */
	int exit_code;                  /* trainctl's exit status for the job; -1 while running */
	char *root_cause;               /* NULL or text */
	int restarts;
	int world_size;
	pid_t sup_pid;
	unsigned long long sup_ticks;
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
	char *state;
	char *reason;
};

int store_open(const char *home, struct store **out, struct tc_err *err);
void store_close(struct store *st);

/* A new unique job id that sorts by time: YYYYMMDD-HHMMSS-mmm-xxxx. */
char *store_new_job_id(void);

int store_job_create(struct store *st, const struct job_row *job, struct tc_err *err);
int store_job_set_state(struct store *st, const char *id, const char *state, const char *reason,
			struct tc_err *err);
/* Record the end: state, exit status and root cause in one go. */
int store_job_finish(struct store *st, const char *id, const char *state, int exit_code,
		     const char *root_cause, const char *reason, struct tc_err *err);
int store_job_set_restarts(struct store *st, const char *id, int restarts, struct tc_err *err);
int store_job_set_supervisor(struct store *st, const char *id, pid_t pid,
			     unsigned long long ticks, struct tc_err *err);

int store_worker_start(struct store *st, const char *job, int attempt, int rank, int local_rank,
		       pid_t pid, struct tc_err *err);
int store_worker_end(struct store *st, const char *job, int attempt, int rank, int exit_code,
		     int signal, struct tc_err *err);

/*
 * Find one job by id, unique id prefix, or name (the newest of that name).
 * Returns TC_ENOTFOUND (or TC_EUSAGE for an ambiguous prefix).
 */
int store_job_get(struct store *st, const char *ref, struct job_row *out, struct tc_err *err);
/* Newest first; all=false keeps jobs that are not finished plus the 20 newest. */
int store_job_list(struct store *st, bool all, struct job_row **out, size_t *nr,
		   struct tc_err *err);
int store_workers(struct store *st, const char *job, struct worker_row **out, size_t *nr,
		  struct tc_err *err);
int store_events(struct store *st, const char *job, struct event_row **out, size_t *nr,
		 struct tc_err *err);
/*
 * A job that claims to be active but whose supervisor process is gone is
 * marked lost (with an event); call before showing jobs.
 */
int store_job_reconcile(struct store *st, struct job_row *job, struct tc_err *err);

bool store_state_terminal(const char *state);

void job_row_release(struct job_row *j);
void job_rows_free(struct job_row *v, size_t nr);
void event_rows_free(struct event_row *v, size_t nr);

#endif
