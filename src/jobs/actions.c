/*
 * actions.c -- show, stop, pause, resume, delete and clone (jobs.h): the
 * checks every caller needs, then the job's backend (backend.h) for what
 * depends on where it runs.
 */
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "backend/backend.h"
#include "core/json.h"
#include "core/upath.h"
#include "core/util.h"
#include "jobs/diagjson.h"
#include "metrics/query.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *checkpoints_json(const struct store_ckpt *ck, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:f, s:s}", "name",
						   ck[i].name, "step", (json_int_t)ck[i].step, "epoch",
						   (json_int_t)ck[i].epoch, "files",
						   (json_int_t)ck[i].nfiles, "bytes",
						   (json_int_t)ck[i].bytes, "checksum", ck[i].checksum,
						   "created", ck[i].created, "state", ck[i].state));
	return a;
}

/* The job's webhook deliveries (notify/notify.h), oldest first. */
static json_t *deliveries_json(const struct store_delivery *d, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:f, s:s, s:s, s:b, s:i, s:I}", "time", d[i].time, "event",
				      d[i].event, "url", d[i].url, "delivered", d[i].ok, "tries",
				      d[i].tries, "status", (json_int_t)d[i].status);
		json_object_set_new(o, "error", json_string_or_null(d[i].error));
		json_array_append_new(a, o);
	}
	return a;
}

json_t *jobs_diagnostics(const char *run_dir)
{
	if (!run_dir)
		return NULL;
	/* the job's account owns its run folder and writes the file: through
	 * the user-path door, capped (stacks make it large, never this large) */
	struct sbuf text = SBUF_INIT;
	int fd = -1;
	uid_t owner;
	json_t *o = NULL;
	struct sbuf leaf = SBUF_INIT;
	run_leaf(&leaf, RUN_DIAGNOSTICS, 0);
	if (upath_run_dir(run_dir, UPATH_ANY, &fd, &owner, NULL) == 0 &&
	    upath_read(fd, leaf.buf, owner, (size_t)64 << 20, &text, NULL) == 0)
		o = json_loadb(text.buf, text.len, 0, NULL);
	if (fd >= 0)
		close(fd);
	sbuf_release(&leaf);
	sbuf_release(&text);
	/* the job wrote it: only the known keys of their types reach show and the page */
	json_t *typed = jobs_diag_typed(o);
	json_decref(o);
	return typed;
}

int jobs_show(struct store *st, const char *ref, bool reconcile, json_t **out,
	      struct tc_err *err)
{
	struct job_row j = { 0 };
	struct event_row *ev = NULL;
	struct worker_row *wk = NULL;
	struct store_ckpt *ck = NULL;
	struct store_delivery *dl = NULL;
	size_t nev = 0, nwk = 0, nck = 0, ndl = 0;
	struct metrics_job_summary ms = { 0 };
	bool have_ms = false;
	*out = NULL;
	int rc = store_job_get(st, ref, &j, err);
	if (!rc && reconcile)
		rc = backend_reconcile(st, &j, err);
	if (!rc)
		rc = store_events(st, j.id, &ev, &nev, err);
	if (!rc)
		rc = store_workers(st, j.id, &wk, &nwk, err);
	if (!rc)
		rc = store_ckpt_list(st, j.id, true, &ck, &nck, err);
	if (!rc)
		rc = store_deliveries(st, j.id, &dl, &ndl, err);
	if (!rc)
		have_ms = !(rc = metrics_job_summary(st, &j, &ms, err));
	if (rc)
		goto out;
	json_t *o = job_to_json(&j, 0);
	job_history_json(o, ev, nev, wk, nwk);
	json_object_set_new(o, "checkpoints", checkpoints_json(ck, nck));
	json_object_set_new(o, "metrics", metrics_job_summary_json(&ms));
	json_object_set_new(o, "duration", json_real_or_null(ms.duration));
	job_rounds_first_step(st, j.id, &ms, json_object_get(o, "rounds"));
	if (ndl) /* webhooks: only jobs that have any carry the key */
		json_object_set_new(o, "notifications", deliveries_json(dl, ndl));
	struct trial_row tr = { 0 };
	struct tc_err e2 = TC_ERR_INIT;
	if (!store_trial_of_job(st, j.id, &tr, &e2)) { /* a sweep's trial: which, with what values */
		json_t *p = json_loads(tr.params_json ? tr.params_json : "{}", 0, NULL);
		json_object_set_new(o, "sweep", json_pack("{s:s, s:i, s:o}", "id", tr.sweep_id, "trial",
							  tr.idx, "params", p ? p : json_object()));
		trial_row_release(&tr);
	}
	tc_err_release(&e2);
	/* the team it was submitted for (null: none); unreadable, the answer goes without it */
	char *team = NULL;
	if (!store_job_team(st, j.id, &team, &e2))
		json_object_set_new(o, "team", team ? json_string(team) : json_null());
	free(team);
	tc_err_release(&e2);
	json_t *diag = jobs_diagnostics(j.run_dir);
	if (diag)
		json_object_set_new(o, "diagnostics", diag);
	*out = o;
out:
	if (have_ms)
		metrics_job_summary_release(&ms);
	job_row_release(&j);
	event_rows_free(ev, nev);
	free(wk);
	store_ckpt_free(ck, nck);
	store_deliveries_free(dl, ndl);
	return rc;
}

int jobs_stop(const struct backend_env *env, struct store *st, const struct job_row *j,
	      enum job_stop why, struct tc_err *err)
{
	if (job_state_terminal(j->state))
		return tc_error(err, TC_EUSAGE, "stop: job %s already ended (%s)", j->id,
				job_state_name(j->state));
	return backend_of(j)->stop(env, st, j, why, err);
}

int jobs_pause(const struct backend_env *env, struct store *st, const struct job_row *j,
	       struct tc_err *err)
{
	const struct backend_ops *be = backend_of(j);
	if (job_state_terminal(j->state))
		return tc_error(err, TC_EUSAGE, "pause: job %s already ended (%s)", j->id,
				job_state_name(j->state));
	if (!be->pause)
		return tc_error(err, TC_EUSAGE, "job %s runs on backend %s: it can be stopped, not paused",
				j->id, backend_name(be));
	return be->pause(env, st, j, err);
}

int jobs_resume(const struct backend_env *env, struct store *st, const struct job_row *j,
		struct tc_err *err)
{
	const struct backend_ops *be = backend_of(j);
	if (!be->resume)
		return tc_error(err, TC_EUSAGE, "job %s runs on backend %s, which does not pause jobs",
				j->id, backend_name(be));
	return be->resume(env, st, j, err);
}

/* The account a job's files belong to: its user's, else ours (a token user with no account). */
static uid_t job_owner(const struct job_row *j)
{
	struct passwd pwd, *pw = NULL;
	char buf[4096]; /* getpwnam_r: the request threads run side by side */
	if (j->user && *j->user && getpwnam_r(j->user, &pwd, buf, sizeof(buf), &pw) != 0)
		pw = NULL;
	return pw ? pw->pw_uid : geteuid();
}

int jobs_delete(struct store *st, const struct job_row *j, struct tc_err *err)
{
	if (!job_state_terminal(j->state))
		return tc_error(err, TC_EUSAGE, "only a finished job can be deleted (stop it first)");
	int rc = store_job_delete(st, j->id, err);
	if (rc || !j->run_dir || !*j->run_dir)
		return rc;
	/*
	 * The run folder is the account's: it can swap any folder in it for a
	 * link while root deletes.  The walk goes from the descriptor of runs/
	 * (ours) and never follows a link (core/upath.h).
	 */
	char *parent = path_dirname(j->run_dir);
	int base = -1;
	struct tc_err e2 = TC_ERR_INIT;
	rc = upath_base(parent, &base, &e2);
	if (rc == TC_ENOTFOUND)
		rc = 0;
	else if (!rc)
		rc = upath_delete(base, path_basename(j->run_dir), job_owner(j), &e2);
	if (rc)
		rc = tc_error(err, rc, "deleted %s but not all of its run folder: %s", j->id, e2.msg);
	if (base >= 0)
		close(base);
	tc_err_release(&e2);
	free(parent);
	return rc;
}

int jobs_clone_spec(const struct job_row *j, char **text, struct tc_err *err)
{
	*text = NULL;
	json_t *spec = json_loads(j->spec_json ? j->spec_json : "", 0, NULL);
	if (!json_is_object(spec)) {
		json_decref(spec);
		return tc_error(err, TC_EUSAGE, "cannot clone %s: its spec is not stored", j->id);
	}
	/* the ids the allocator chose are not a requirement; the planner chooses again */
	if (!j->device_want)
		json_object_del(json_object_get(spec, "devices"), "ids");
	json_object_del(json_object_get(spec, "parallel"), "plan");
	char *t = json_dumps(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(spec);
	if (!t)
		return tc_error(err, TC_EUSAGE, "cannot clone %s: its spec does not encode", j->id);
	*text = t;
	return 0;
}
