/*
 * engine.c -- one round of a sweep's loop (sweep.h, note 5): trials
 * brought up to date from their jobs, early stopping, new trials started,
 * the sweep's end.  Everything is read from and written to the store each
 * round, so any driver (the CLI, a restarted server) can take over.
 */
#include "sweep/sweep.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

char *sweep_trial_name(const struct sweep_row *sw, int idx)
{
	struct sbuf sb = SBUF_INIT;
	size_t n = strlen(sw->id);
	/* the id's random tail keeps names of two sweeps of one name apart */
	sbuf_addf(&sb, "%s-%s-%d", sw->name, n > 4 ? sw->id + n - 4 : sw->id, idx);
	return sbuf_detach(&sb);
}

/*
 * The objective metric's numbers on rank 0, finest kind (note 2); *bad
 * (when given) says one of its numbers was NaN or infinite (note 6).
 */
static void metric_values(struct store *st, const char *job, const char *metric, double **out,
			  size_t *n, bool *bad)
{
	struct store_mseries *s = NULL;
	size_t ns = 0;
	struct tc_err e = TC_ERR_INIT;
	*out = NULL;
	*n = 0;
	if (bad)
		*bad = false;
	if (store_metric_series(st, job, metric, 0, &s, &ns, &e) || !ns) {
		tc_err_release(&e);
		store_mseries_free(s, ns);
		return;
	}
	int kind = -1;
	for (size_t i = 0; i < s[0].n; i++)
		if (!s[0].v[i].text && isfinite(s[0].v[i].value) && (kind < 0 || s[0].v[i].kind < kind))
			kind = s[0].v[i].kind;
	for (size_t i = 0; bad && i < s[0].n; i++)
		*bad |= !s[0].v[i].text && !isfinite(s[0].v[i].value);
	*out = xcalloc(s[0].n + 1, sizeof(**out));
	for (size_t i = 0; i < s[0].n; i++)
		if (s[0].v[i].kind == kind && !s[0].v[i].text && isfinite(s[0].v[i].value))
			(*out)[(*n)++] = s[0].v[i].value;
	store_mseries_free(s, ns);
}

static void set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = v ? xstrdup(v) : NULL;
}

/* Bring a running trial up to date from its job (or its launcher). */
static int refresh(struct store *st, const struct sweep_row *sw, const struct sweep_def *d,
		   const struct sweep_ops *ops, struct trial_row *t, double **vals, size_t *nv,
		   struct tc_err *err)
{
	bool ended = false;
	char *cause = NULL, *id = NULL;
	if (ops->poll) {
		ops->poll(ops->arg, sw, t, &id, &ended, &cause);
		if (id && !t->job_id) {
			t->job_id = id;
			id = NULL;
		}
	}
	struct job_row j = { 0 };
	struct tc_err e2 = TC_ERR_INIT;
	bool have = t->job_id && !store_job_get(st, t->job_id, &j, &e2);
	tc_err_release(&e2);
	if (have) {
		bool bad = false;
		metric_values(st, j.id, d->metric, vals, nv, &bad);
		t->steps = (long long)*nv;
		t->objective = bad ? NAN : sweep_reduce_values(*vals, *nv, d->reduce);
		if (job_state_terminal(j.state)) {
			enum trial_state to = j.state == JOB_SUCCEEDED && bad ? TRIAL_FAILED_OBJECTIVE
					      : j.state == JOB_SUCCEEDED ? TRIAL_SUCCEEDED
					      : j.state == JOB_KILLED && t->early ? TRIAL_STOPPED
					      : j.state == JOB_KILLED ? TRIAL_KILLED
									   : TRIAL_FAILED;
			set_str(&t->state, trial_state_name(to));
			if (bad && j.state == JOB_SUCCEEDED) {
				struct sbuf why = SBUF_INIT;
				sbuf_addf(&why, "%s was NaN or infinite: no objective", d->metric);
				set_str(&t->note, why.buf);
				sbuf_release(&why);
			} else if (!t->early) {
				set_str(&t->note, j.root_cause);
			}
			t->ended = j.ended > 0 ? j.ended : now_wall();
		} else if (ended) {
			/* its supervisor is gone and recorded no end */
			set_str(&t->state, trial_state_name(TRIAL_FAILED));
			set_str(&t->note, cause ? cause : "the trial's supervisor ended without recording an end");
			t->ended = now_wall();
		}
	} else if (ended) {
		/* the launcher ended and no job came to exist: a failed trial */
		set_str(&t->state, trial_state_name(TRIAL_FAILED));
		set_str(&t->note, cause ? cause : "the trial's job was never created");
		t->ended = now_wall();
	} else if (t->job_id && !ops->poll) {
		/* the server's trial whose job is gone (deleted) */
		set_str(&t->state, trial_state_name(TRIAL_KILLED));
		set_str(&t->note, "its job was deleted");
		t->ended = now_wall();
	}
	job_row_release(&j);
	free(cause);
	free(id);
	return store_trial_update(st, t, err);
}

static void early_stopping(struct store *st, const struct sweep_def *d, const struct sweep_ops *ops,
			   struct trial_row *t, size_t n, double **vals, size_t *nv)
{
	struct sweep_curve *c = xcalloc(n + 1, sizeof(*c));
	for (size_t i = 0; i < n; i++)
		c[i] = (struct sweep_curve){ vals[i], nv[i],
					     trial_state_is(t[i].state, TRIAL_RUNNING) && t[i].job_id && !t[i].early };
	for (size_t i = 0; i < n; i++) {
		struct sbuf why = SBUF_INIT;
		struct tc_err e = TC_ERR_INIT;
		if (sweep_should_stop(d, c, n, i, &why) && !ops->stop(ops->arg, &t[i], why.buf, &e)) {
			t[i].early = true;
			c[i].running = false;
			set_str(&t[i].note, why.buf);
			if (store_trial_update(st, &t[i], &e))
				tc_err_release(&e);
		}
		/* a stop that failed is tried again next round */
		tc_err_release(&e);
		sbuf_release(&why);
	}
	free(c);
}

/*
 * The metrics job logged, ", " separated, into names, and the closest to
 * metric ("val.acc" -> "val.accuracy") into near (note 7).
 */
static void logged_metrics(struct store *st, const char *job, const char *metric,
			   struct sbuf *names, struct sbuf *near)
{
	struct store_msum *v = NULL;
	size_t n = 0, best_d = (size_t)-1, limit = strlen(metric) / 2 + 1;
	struct tc_err e = TC_ERR_INIT;
	if (store_metric_summaries(st, job, &v, &n, &e))
		n = 0;
	tc_err_release(&e);
	for (size_t i = 0; i < n; i++) {
		if (v[i].rank != 0)
			continue;
		sbuf_addf(names, "%s%s", names->len ? ", " : "", v[i].metric);
		size_t d = edit_distance(v[i].metric, metric);
		/* "acc" in "val.accuracy": a name that holds the other counts as close */
		if (strstr(v[i].metric, metric) || strstr(metric, v[i].metric))
			d = d < limit ? d : limit;
		if (d <= limit && d < best_d) {
			best_d = d;
			sbuf_reset(near);
			sbuf_adds(near, v[i].metric);
		}
	}
	store_msum_free(v, n);
}

/*
 * A trial that succeeded without ever logging the objective, while no
 * trial has one: the metric's name is wrong, and every other trial would
 * end the same.  The trial is failed-objective and the sweep fails with
 * what the job did log (note 7).  true when it did.
 */
static bool objective_missing(struct store *st, const struct sweep_row *sw,
			      const struct sweep_def *d, const struct sweep_ops *ops,
			      struct trial_row *t, size_t n, const size_t *nv, int *rc,
			      struct tc_err *err)
{
	size_t first = n;
	for (size_t i = 0; i < n; i++) {
		if (nv[i] || t[i].steps || isfinite(t[i].objective) ||
		    trial_state_is(t[i].state, TRIAL_FAILED_OBJECTIVE))
			return false; /* some trial logs it, or it was already judged */
		if (first == n && trial_state_is(t[i].state, TRIAL_SUCCEEDED) && t[i].job_id)
			first = i;
	}
	if (first == n)
		return false;
	struct sbuf names = SBUF_INIT, near = SBUF_INIT, note = SBUF_INIT;
	logged_metrics(st, t[first].job_id, d->metric, &names, &near);
	sbuf_addf(&note, "trial %d (%s) ended without logging the objective %s; it logged %s",
		  t[first].idx, t[first].job_id, d->metric, names.len ? names.buf : "no metrics");
	if (near.len)
		sbuf_addf(&note, " (did you mean metric: %s?)", near.buf);
	set_str(&t[first].state, trial_state_name(TRIAL_FAILED_OBJECTIVE));
	set_str(&t[first].note, note.buf);
	*rc = store_trial_update(st, &t[first], err);
	for (size_t i = 0; i < n && !*rc; i++) {
		struct tc_err e = TC_ERR_INIT;
		if (trial_state_is(t[i].state, TRIAL_RUNNING) && t[i].job_id)
			(void)ops->stop(ops->arg, &t[i], "the sweep's objective is never logged", &e);
		tc_err_release(&e);
	}
	if (!*rc)
		*rc = store_sweep_set_state(st, sw->id, sweep_state_name(SWEEP_FAILED), note.buf, true, err);
	sbuf_release(&names);
	sbuf_release(&near);
	sbuf_release(&note);
	return true;
}

int sweep_tick(struct store *st, const char *sweep_id, const struct sweep_ops *ops, bool *done,
	       struct tc_err *err)
{
	struct sweep_row sw = { 0 };
	struct sweep_def *d = NULL;
	struct trial_row *t = NULL;
	size_t n = 0;
	double **vals = NULL;
	size_t *nv = NULL;
	*done = false;
	int rc = store_sweep_get(st, sweep_id, &sw, err);
	if (rc)
		return rc;
	if (!sweep_state_is(sw.state, SWEEP_RUNNING)) {
		*done = true;
		goto out;
	}
	if ((rc = sweep_def_from_json(sw.def_json, &d, err)) ||
	    (rc = store_sweep_trials(st, sw.id, &t, &n, err)))
		goto out;
	vals = xcalloc(n + 1, sizeof(*vals));
	nv = xcalloc(n + 1, sizeof(*nv));
	size_t running = 0, pending = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		if (trial_state_is(t[i].state, TRIAL_RUNNING)) {
			rc = refresh(st, &sw, d, ops, &t[i], &vals[i], &nv[i], err);
		} else if (sweep_trial_ended(t[i].state) && t[i].job_id && d->stop.rule != SWEEP_RULE_NONE) {
			/* ended trials' curves count for the rules */
			metric_values(st, t[i].job_id, d->metric, &vals[i], &nv[i], NULL);
		}
	}
	if (rc)
		goto out;
	if (ops->record_only)
		goto out;
	if (objective_missing(st, &sw, d, ops, t, n, nv, &rc, err)) {
		*done = !rc;
		goto out;
	}
	if (d->stop.rule != SWEEP_RULE_NONE)
		early_stopping(st, d, ops, t, n, vals, nv);
	for (size_t i = 0; i < n; i++) {
		if (trial_state_is(t[i].state, TRIAL_RUNNING))
			running++;
		else if (trial_state_is(t[i].state, TRIAL_PENDING))
			pending++;
	}
	for (size_t i = 0; i < n && !rc && running < (size_t)d->parallel; i++) {
		if (!trial_state_is(t[i].state, TRIAL_PENDING))
			continue;
		struct tc_err e = TC_ERR_INIT;
		pending--;
		t[i].started = now_wall();
		if (ops->launch(ops->arg, &sw, d, &t[i], &e)) {
			/* a trial that cannot start is a failed trial, not a failed sweep */
			set_str(&t[i].state, trial_state_name(TRIAL_FAILED));
			set_str(&t[i].note, e.msg ? e.msg : "could not be started");
			t[i].ended = now_wall();
		} else {
			set_str(&t[i].state, trial_state_name(TRIAL_RUNNING));
			running++;
		}
		tc_err_release(&e);
		rc = store_trial_update(st, &t[i], err);
	}
	if (!rc && !running && !pending) {
		long best = sweep_rank_trials(d->mode, t, n);
		struct sbuf note = SBUF_INIT;
		if (best >= 0)
			sbuf_addf(&note, "best: trial %d (%s)", t[best].idx, t[best].job_id);
		else
			sbuf_adds(&note, "no trial reached an objective");
		rc = store_sweep_set_state(st, sw.id, sweep_state_name(SWEEP_DONE), note.buf, true, err);
		sbuf_release(&note);
		*done = !rc;
	}
out:
	for (size_t i = 0; vals && i < n; i++)
		free(vals[i]);
	free(vals);
	free(nv);
	trial_rows_free(t, n);
	sweep_def_free(d);
	sweep_row_release(&sw);
	return rc;
}

/* ---- ranking (note 4) ---- */

static int rank_class(const struct trial_row *t)
{
	if (trial_state_is(t->state, TRIAL_SUCCEEDED) && isfinite(t->objective))
		return 0;
	return isfinite(t->objective) ? 1 : 2;
}

static int cmp_trials(const void *a, const void *b, void *arg)
{
	const struct trial_row *x = a, *y = b;
	enum sweep_mode mode = *(const enum sweep_mode *)arg;
	int cx = rank_class(x), cy = rank_class(y);
	if (cx != cy)
		return cx < cy ? -1 : 1;
	if (cx < 2 && x->objective != y->objective)
		return sweep_better(mode, x->objective, y->objective) ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

long sweep_rank_trials(enum sweep_mode mode, struct trial_row *v, size_t n)
{
	qsort_r(v, n, sizeof(*v), cmp_trials, &mode);
	return n && rank_class(&v[0]) < 2 ? 0 : -1;
}
