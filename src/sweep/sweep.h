/*
 * sweep.h -- hyperparameter sweeps: the sweep file, its trials, the
 * objective, early stopping, and the loop that runs a sweep (docs/sweeps.md).
 *
 * A sweep is a base spec plus a search space over dotted spec keys
 * ("args.lr").  Each trial is an ordinary job: the base spec with the
 * trial's values applied as overrides (spec/override.h), tagged with the
 * sweep id and its parameters in the store (sweep_trials rows).
 *
 * NOTES ON THE DESIGN
 * (1) Every trial and its parameters are decided when the sweep is created
 *     (grid: the product in file order, first key slowest; random: count
 *     draws from a generator seeded by seed) and stored as rows, so a sweep
 *     resumed after a restart of its driver (the server) runs exactly the
 *     same trials, and `sweep show` lists the ones not yet started.
 * (2) The objective is the metric's numbers on rank 0, the finest kind the
 *     job logged (step records, else epoch, else summary), reduced by
 *     last/min/max/mean.  A "step" of early stopping is one such number:
 *     the n-th value of the objective metric.
 * (3) A trial's end is its job's end: succeeded, failed (root cause from the
 *     job, or from the launch when no job came to exist), killed, or
 *     stopped (early stopping asked, through the job's stop action).  A
 *     failed trial never stops the sweep.
 * (4) The best trial is the best objective among the succeeded trials
 *     (any trial with an objective when none succeeded).
 * (5) sweep_tick is the whole loop body and keeps nothing in memory: it
 *     reads the sweep and its trials from the store, brings the trials up
 *     to date from their jobs, stops what early stopping condemns, starts
 *     pending trials up to parallel, and marks the sweep done when nothing
 *     is left.  The CLI (local trials) and the server (queued trials) call
 *     it with their own way of starting and stopping a trial.
 * (6) An objective that went NaN or infinite is no objective: the trial
 *     ends failed-objective (when its job succeeded), never best, never
 *     ranked on its last finite value.
 * (7) A trial that succeeded without logging the objective at all, while
 *     no trial has, means a wrong metric name: the sweep ends "failed" at
 *     once, its note naming the metrics that trial did log (and the
 *     closest), its running trials stopped, no new one started.
 *
 * Ownership: struct sweep_def owns its strings and JSON; sweep_def_free.
 * Nothing here prints.
 */
#ifndef TC_SWEEP_H
#define TC_SWEEP_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "store/store.h"

enum sweep_dist { SWEEP_GRID, SWEEP_UNIFORM, SWEEP_LOGUNIFORM, SWEEP_INT };
enum sweep_mode { SWEEP_MIN, SWEEP_MAX };
enum sweep_reduce { SWEEP_LAST, SWEEP_RMIN, SWEEP_RMAX, SWEEP_MEAN };
enum sweep_rule { SWEEP_RULE_NONE, SWEEP_RULE_MEDIAN, SWEEP_RULE_HALVING };

struct sweep_param {
	char *key;            /* dotted spec key */
	enum sweep_dist dist;
	json_t *values;       /* grid: the array of choices */
	double lo, hi;        /* ranges: [lo, hi] (int: whole numbers) */
};

struct sweep_def {
	char *name;
	char *spec_path;  /* the base spec file (absolute), NULL when inline */
	char *spec_text;  /* the base spec: the file's text, or the inline map as JSON */
	char *base;       /* where an inline spec's relative paths resolve (absolute) */
	struct sweep_param *params;
	size_t nparams;
	bool random;      /* a range among the parameters: random search */
	int count;        /* trials (grid: the product) */
	unsigned long long seed;
	char *metric;
	enum sweep_mode mode;
	enum sweep_reduce reduce;
	int parallel;
	struct sweep_stop {
		enum sweep_rule rule;
		long grace;      /* median: steps before a trial can be stopped */
		int min_trials;  /* median: other trials that reached the step */
		long budget;     /* halving: the steps of a whole trial */
		int eta;         /* halving: keep the best 1/eta at each rung */
		long min_steps;  /* halving: the first rung */
	} stop;
	int priority;     /* server: 0 = the base spec's */
	int preemptible;  /* server: -1 = the base spec's, else 0/1 */
};

/*
 * Parse and check a sweep file's text (YAML or JSON).  name is used in
 * messages ("sweep.yaml:4: parameters: ..."), dir resolves a relative spec
 * path.  spec_text: the text of the spec file it names, when the caller
 * has it (the server gets it with the sweep); NULL: the file is read.
 * TC_ESPEC on a bad file; *out untouched then.
 */
int sweep_parse(const char *text, size_t len, const char *name, const char *dir,
		const char *spec_text, struct sweep_def **out, struct tc_err *err);
int sweep_load(const char *path, struct sweep_def **out, struct tc_err *err);
void sweep_def_free(struct sweep_def *d);
/* The definition as stored (sweeps.def_json) and back. */
json_t *sweep_def_to_json(const struct sweep_def *d);
int sweep_def_from_json(const char *text, struct sweep_def **out, struct tc_err *err);

/* The trials' parameters (note 1): a new array of {key: value} objects. */
json_t *sweep_trials(const struct sweep_def *d);
/* A value as override text (VALUE of --set KEY=VALUE); heap string. */
char *sweep_value_text(const json_t *v);
/* "lr=0.1 batch-size=32": a trial's parameters, short keys; heap string. */
char *sweep_params_text(const char *params_json);

/* The objective of values (note 2); NaN when n is 0. */
double sweep_reduce_values(const double *v, size_t n, enum sweep_reduce r);
/*
 * Does metric name a score one maximises (accuracy, acc, f1, precision,
 * recall, auc, map, bleu, ... as its last dotted/underscored word)?  For
 * the warning on such an objective with mode min.
 */
bool sweep_metric_maximised(const char *metric);
/* Is a better than b (NaN is worse than any number)? */
bool sweep_better(enum sweep_mode mode, double a, double b);

/* One trial's curve so far, for early stopping. */
struct sweep_curve {
	const double *v; /* the objective metric's values, in logged order */
	size_t n;
	bool running;    /* still running: may be stopped */
};
/*
 * Should trial i stop now?  Median rule: after grace steps, when its best
 * value so far is worse than the median of the running averages of at
 * least min_trials other trials over the same steps.  Successive halving:
 * at the highest rung (min_steps * eta^k < budget) it reached, when it is
 * not among the best max(1, m/eta) of the m >= eta trials that reached
 * that rung (each judged on its values up to the rung, reduced).  why
 * says which rule and the numbers.
 */
bool sweep_should_stop(const struct sweep_def *d, const struct sweep_curve *c, size_t n, size_t i,
		       struct sbuf *why);

/*
 * The trial state words (sweep_trials.state) are trial_state_name()'s
 * (jobs/state.h: enum trial_state); failed-objective is a trial whose job
 * succeeded but whose objective was NaN/inf or never logged (notes 6, 7).
 * Has the trial in state (a stored word) ended?
 */
bool sweep_trial_ended(const char *state);

/* ---- a trial's spec (trial.c) ---- */

struct spec;
struct strvec;
/* The trial's parameters as "KEY=VALUE" overrides, in the sweep file's order. */
void sweep_trial_sets(const char *params_json, struct strvec *sets);
/* The base spec with the trial's overrides, validated (spec_parse_set; backend NULL: as written). */
int sweep_trial_spec(const struct sweep_def *d, const char *params_json, const char *backend,
		     struct spec **out, struct tc_err *err);
/*
 * Every trial's spec checked before anything runs: a key that does not
 * exist or a value that does not fit fails the sweep at once (TC_ESPEC,
 * "trial 2 (lr=abc): --set args.lr=abc: ...") instead of every trial.
 */
int sweep_check_trials(const struct sweep_def *d, const json_t *trials, const char *backend,
		       struct tc_err *err);

/* ---- running a sweep (engine.c) ---- */

/* How a driver starts and stops trials (note 5). */
struct sweep_ops {
	/*
	 * Start trial t (state pending) with the base spec and the trial's
	 * parameters.  Set t->job_id when the job exists at once (the server);
	 * a launcher whose job comes later (local) leaves it NULL and answers
	 * poll.  An error ends the trial failed with err's message as its root
	 * cause; the sweep goes on.
	 */
	int (*launch)(void *arg, const struct sweep_row *sw, const struct sweep_def *d,
		      struct trial_row *t, struct tc_err *err);
	/*
	 * Local trials: the job id when it is known now (heap, or NULL), and
	 * whether the trial's launcher ended (with a root cause when it ended
	 * without a job).  NULL for drivers whose jobs exist at launch.
	 */
	void (*poll)(void *arg, const struct sweep_row *sw, const struct trial_row *t,
		     char **job_id, bool *ended, char **cause);
	/* Stop a running trial's job (early stopping). */
	int (*stop)(void *arg, const struct trial_row *t, const char *why, struct tc_err *err);
	void *arg;
	/* a driver that is stopping: bring the trials up to date, start and stop nothing */
	bool record_only;
};

/* One round of the loop (note 5): *done when the sweep has ended. */
int sweep_tick(struct store *st, const char *sweep_id, const struct sweep_ops *ops, bool *done,
	       struct tc_err *err);
/* The job name of trial idx of a sweep ("NAME-xxxx-3", unique). */
char *sweep_trial_name(const struct sweep_row *sw, int idx);
/*
 * Order trials best first (note 4: succeeded by objective, then the other
 * trials with an objective, then the rest by index); returns the index in
 * v of the best trial, or -1.
 */
long sweep_rank_trials(enum sweep_mode mode, struct trial_row *v, size_t n);

/* ---- the sweep as JSON (sweep_json.c) ---- */

/*
 * {id, name, state, note, definition, parameters, metric, mode, counts,
 * trials: [{trial, params, state, job, objective, steps, early_stopped,
 * note, started, ended}] best first, best: {trial, job, objective, rerun}
 * or null}.  A local sweep whose driver is gone reads "stopped".
 */
int sweep_show_json(struct store *st, const char *ref, json_t **out, struct tc_err *err);
/* {id, name, state, managed, created, ended, note} of a listing. */
json_t *sweep_brief_json(const struct sweep_row *s);

#endif
