/*
 * store_sweep.h -- sweeps and their trials (store_sweep.c);
 * store.h includes it.
 */
#ifndef TC_STORE_SWEEP_H
#define TC_STORE_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/* ---- sweeps (store_sweep.c) ----
 *
 * Tables sweeps (one row per sweep: its definition as JSON, state
 * running/done/stopped, who drives it: managed 1 = the server, else the
 * `trainctl sweep` process driver_pid/driver_ticks) and sweep_trials (one
 * row per trial, all written when the sweep is created: parameters as a
 * JSON object, state, the job once it exists, objective, steps seen, note:
 * the root cause or why early stopping stopped it).  The words of the
 * states are sweep/sweep.h's.
 */
struct sweep_row {
	char *id, *name, *state, *def_json, *user;
	bool managed;
	double created, ended; /* ended 0 while running */
	pid_t driver_pid;
	unsigned long long driver_ticks;
	char *note;
};
struct trial_row {
	char *sweep_id;
	int idx;
	char *params_json, *state, *job_id; /* job_id NULL until the job exists */
	double objective;                   /* NaN when none */
	long long steps;
	char *note;
	bool early;                         /* early stopping asked it to stop */
	double started, ended;              /* 0 when not yet */
};
/* The sweep and all its trials, one transaction. */
int store_sweep_create(struct store *st, const struct sweep_row *s, const struct trial_row *t,
		       size_t nt, struct tc_err *err);
/* By id, unique id prefix, or name (the newest); TC_ENOTFOUND. */
int store_sweep_get(struct store *st, const char *ref, struct sweep_row *out, struct tc_err *err);
/* Newest first; running_managed: only the server's sweeps still running. */
int store_sweep_list(struct store *st, bool running_managed, struct sweep_row **out, size_t *nr,
		     struct tc_err *err);
int store_sweep_set_state(struct store *st, const char *id, const char *state, const char *note,
			  bool ended, struct tc_err *err);
int store_sweep_set_driver(struct store *st, const char *id, pid_t pid, unsigned long long ticks,
			   struct tc_err *err);
/* Trials by index. */
int store_sweep_trials(struct store *st, const char *id, struct trial_row **out, size_t *nr,
		       struct tc_err *err);
/* Write a trial's state, job_id, objective, steps, note, early, started, ended. */
int store_trial_update(struct store *st, const struct trial_row *t, struct tc_err *err);
/* The sweep and trial of a job (TC_ENOTFOUND when it is no trial). */
int store_trial_of_job(struct store *st, const char *job_id, struct trial_row *out,
		       struct tc_err *err);
void sweep_row_release(struct sweep_row *s);
void sweep_rows_free(struct sweep_row *v, size_t n);
void trial_row_release(struct trial_row *t);
void trial_rows_free(struct trial_row *v, size_t n);

#endif
