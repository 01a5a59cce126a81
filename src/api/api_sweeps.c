/*
 * api_sweeps.c -- sweeps through the server: the endpoints (submit, list,
 * detail, stop).  The main loop's round of every running sweep, which
 * queues their trials, is server/sweeps.c.  Everything a sweep is lives in
 * the store (sweep/sweep.h, note 5), so a restarted server goes on where
 * it was.
 */
#include "server/server_int.h"
#include "api/api_int.h"
#include "server/admit.h"
#include "backend/backend.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"
#include "spec/spec.h"
#include "sweep/sweep.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the endpoints ---- */

int h_sweep_submit(struct srv *s, struct MHD_Connection *con, const struct who *w,
		   const struct sbuf *body)
{
	json_error_t je;
	json_t *o = json_loadb(body->buf, body->len, 0, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return reply_err(con, 400, "the body must be a JSON object with a 'sweep' (the sweep file's text)");
	}
	const char *text = json_string_value(json_object_get(o, "sweep"));
	const char *file = json_string_value(json_object_get(o, "file"));
	const char *base = json_string_value(json_object_get(o, "base"));
	const char *spec = json_string_value(json_object_get(o, "spec"));
	if (!text || (base && base[0] != '/')) {
		json_decref(o);
		return reply_err(con, 400, "'sweep' must be the sweep file's text and 'base' an absolute path");
	}
	struct sweep_def *d = NULL;
	struct tc_err err = TC_ERR_INIT;
	json_t *trials = NULL;
	struct trial_row *rows = NULL;
	size_t n = 0;
	char *cwd = getcwd(NULL, 0);
	/* its spec: path is read as the caller: a file they may not read stays unread */
	struct fs_ids ids;
	int rc, ret;
	if (!srv_fs_as_caller(w, &ids)) {
		proc_fs_restore(&ids);
		free(cwd);
		ret = reply_err(con, 403, "user '%s' has no account to read the sweep's files as", w->user);
		goto out;
	}
	rc = sweep_parse(text, strlen(text), file ? file : "sweep", base ? base : (cwd ? cwd : "/"),
			 spec, &d, &err);
	proc_fs_restore(&ids);
	free(cwd);
	if (rc) {
		ret = reply_tc(con, &err);
		goto out;
	}
	/* every trial as a submit of the caller's would be, before anything is stored */
	trials = sweep_trials(d);
	bool admin = w->admin || w->local;
	size_t ti;
	json_t *tv;
	json_array_foreach(trials, ti, tv) {
		char *p = json_dumps(tv, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
		unsigned st = srv_admit_trial(s, w->user, admin, d, p ? p : "{}", NULL, false, true,
					      NULL, &err);
		if (st) {
			char *txt = sweep_params_text(p ? p : "{}");
			ret = st >= 500 ? reply_tc(con, &err)
					: reply_err(con, st, "trial %zu (%s): %s", ti, txt,
						    err.msg ? err.msg : "refused");
			free(txt);
			free(p);
			goto out;
		}
		free(p);
	}
	struct sweep_row sw = { .id = store_new_job_id(), .name = d->name, .state = (char *)sweep_state_name(SWEEP_RUNNING),
				.user = w->user, .managed = true, .created = now_wall() };
	json_t *dj = sweep_def_to_json(d);
	json_object_set_new(dj, SWEEP_ADMIN_KEY, json_boolean(admin));
	sw.def_json = json_dumps(dj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(dj);
	n = json_array_size(trials);
	rows = xcalloc(n + 1, sizeof(*rows));
	for (size_t i = 0; i < n; i++) {
		rows[i].sweep_id = sw.id;
		rows[i].idx = (int)i;
		rows[i].params_json = json_dumps(json_array_get(trials, i),
						 JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
		rows[i].state = (char *)trial_state_name(TRIAL_PENDING);
	}
	pthread_mutex_lock(&s->mu);
	rc = store_sweep_create(s->st, &sw, rows, n, &err);
	s->next_sweeps = 0; /* its first trials at the next round */
	srv_wake(s);
	pthread_mutex_unlock(&s->mu);
	if (rc)
		ret = reply_tc(con, &err);
	else
		ret = reply_jsont(con, 201, sweep_brief_json(&sw));
	for (size_t i = 0; i < n; i++)
		free(rows[i].params_json);
	free(sw.id);
	free(sw.def_json);
out:
	free(rows);
	json_decref(trials);
	sweep_def_free(d);
	json_decref(o);
	tc_err_release(&err);
	return ret;
}

int h_sweep_list(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	struct sweep_row *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = store_sweep_list(s->st, false, &v, &n, &err);
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		int ret = reply_tc(con, &err);
		tc_err_release(&err);
		return ret;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		if (server_may_see(w, v[i].user))
			json_array_append_new(arr, sweep_brief_json(&v[i]));
	sweep_rows_free(v, n);
	return reply_jsont(con, 200, json_pack("{s:o}", "sweeps", arr));
}

/* The sweep ref names, when w may see it (0), else the reply is sent (*ret). */
static int find_sweep(struct srv *s, struct MHD_Connection *con, const struct who *w,
		      const char *ref, struct sweep_row *out, int *ret)
{
	struct tc_err err = TC_ERR_INIT;
	if (!api_id_ok(ref)) {
		*ret = reply_err(con, 400, "bad sweep id");
		return -1;
	}
	pthread_mutex_lock(&s->mu);
	int rc = store_sweep_get(s->st, ref, out, &err);
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		*ret = reply_tc(con, &err);
		tc_err_release(&err);
		return -1;
	}
	if (!server_may_see(w, out->user)) {
		sweep_row_release(out);
		*ret = reply_err(con, 403, "sweep %s is another user's", ref);
		return -1;
	}
	return 0;
}

int h_sweep_detail(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *ref)
{
	struct sweep_row sw = { 0 };
	int ret;
	if (find_sweep(s, con, w, ref, &sw, &ret))
		return ret;
	json_t *o = NULL;
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = sweep_show_json(s->st, sw.id, &o, &err);
	pthread_mutex_unlock(&s->mu);
	ret = rc ? reply_tc(con, &err) : reply_jsont(con, 200, o);
	tc_err_release(&err);
	sweep_row_release(&sw);
	return ret;
}

/* Stop a sweep: no new trial starts, its running trials are stopped. */
int h_sweep_stop(struct srv *s, struct MHD_Connection *con, const struct who *w, const char *ref)
{
	struct sweep_row sw = { 0 };
	int ret;
	if (find_sweep(s, con, w, ref, &sw, &ret))
		return ret;
	struct trial_row *t = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = !sweep_state_is(sw.state, SWEEP_RUNNING) ? 0 : store_sweep_trials(s->st, sw.id, &t, &n, &err);
	for (size_t i = 0; !rc && i < n; i++) {
		struct sjob *j = t[i].job_id && trial_state_is(t[i].state, TRIAL_RUNNING) ? srv_find(s, t[i].job_id) : NULL;
		struct tc_err e2 = TC_ERR_INIT;
		if (j && srv_stop_job(s, j, JOB_STOP_STOPPED, &e2))
			srv_say(s, e2.msg);
		tc_err_release(&e2);
		if (trial_state_is(t[i].state, TRIAL_RUNNING) || trial_state_is(t[i].state, TRIAL_PENDING)) {
			/* no round follows a stopped sweep: its trials end here */
			free(t[i].state);
			t[i].state = xstrdup(trial_state_name(TRIAL_KILLED));
			free(t[i].note);
			t[i].note = xstrdup("the sweep was stopped");
			t[i].ended = now_wall();
			rc = store_trial_update(s->st, &t[i], &err);
		}
	}
	if (!rc && sweep_state_is(sw.state, SWEEP_RUNNING))
		rc = store_sweep_set_state(s->st, sw.id, sweep_state_name(SWEEP_STOPPED), "stopped through the API", true, &err);
	srv_wake(s);
	pthread_mutex_unlock(&s->mu);
	ret = rc ? reply_tc(con, &err)
		 : reply_jsont(con, 200, json_pack("{s:s, s:s, s:b}", "id", sw.id, "action", "stop", "ok", 1));
	trial_rows_free(t, n);
	tc_err_release(&err);
	sweep_row_release(&sw);
	return ret;
}
