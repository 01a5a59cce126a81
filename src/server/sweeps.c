/*
 * sweeps.c -- the main loop's round of every running sweep of the server
 * (srv_sweeps), which queues trials as the sweep's owner's jobs with the
 * sweep's priority and preemptibility, through the admission door
 * (admit.c).  The sweep routes are api/api_sweeps.c; everything a sweep is
 * lives in the store (sweep/sweep.h, note 5), so a restarted server goes
 * on where it was.
 */
#include "server/server_int.h"
#include "server/admit.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "sweep/sweep.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Rounds of the sweeps at most this often: each reads its trials' metrics. */
#define SWEEP_ROUND_S 0.5

/* One trial through the admission door (admit.c), as its sweep's owner. */
unsigned srv_admit_trial(struct srv *s, const char *owner, bool admin, const struct sweep_def *d,
			 const char *params_json, const char *name, bool locked, bool dry, char **id,
			 struct tc_err *err)
{
	struct strvec sets = STRVEC_INIT;
	sweep_trial_sets(params_json, &sets);
	struct admit_req r = { .owner = owner, .admin = admin, .text = d->spec_text,
			       .file = d->spec_path ? d->spec_path : "spec", .base = d->base,
			       .name = name, .sets = &sets, .priority = d->priority,
			       .preemptible = d->preemptible, .locked = locked, .dry = dry };
	unsigned st = srv_admit(s, &r, id, NULL, err);
	strvec_clear(&sets);
	return st;
}

static int srv_trial_launch(void *arg, const struct sweep_row *sw, const struct sweep_def *d,
			    struct trial_row *t, struct tc_err *err)
{
	struct srv *s = arg;
	json_t *def = sw->def_json ? json_loads(sw->def_json, 0, NULL) : NULL;
	bool admin = json_is_true(json_object_get(def, SWEEP_ADMIN_KEY));
	json_decref(def);
	char *name = sweep_trial_name(sw, t->idx);
	free(t->job_id);
	t->job_id = NULL;
	/* the main loop holds s->mu */
	unsigned st = srv_admit_trial(s, sw->user ? sw->user : "", admin, d, t->params_json, name,
				      true, false, &t->job_id, err);
	free(name);
	return st ? (err->code ? err->code : TC_EUSAGE) : 0;
}

static int srv_trial_stop(void *arg, const struct trial_row *t, const char *why, struct tc_err *err)
{
	struct srv *s = arg;
	struct sjob *j = t->job_id ? srv_find(s, t->job_id) : NULL;
	if (!j)
		return tc_error(err, TC_EUSAGE, "job %s is not active", t->job_id ? t->job_id : "-");
	srv_say(s, why);
	return srv_stop_job(s, j, JOB_STOP_STOPPED, err);
}

void srv_sweeps(struct srv *s)
{
	double now = now_wall();
	if (now < s->next_sweeps)
		return;
	s->next_sweeps = now + SWEEP_ROUND_S;
	struct sweep_row *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	if (store_sweep_list(s->st, true, &v, &n, &err)) {
		srv_say(s, err.msg);
		tc_err_release(&err);
		return;
	}
	struct sweep_ops ops = { .launch = srv_trial_launch, .stop = srv_trial_stop, .arg = s };
	for (size_t i = 0; i < n; i++) {
		bool done = false;
		if (sweep_tick(s->st, v[i].id, &ops, &done, &err)) {
			struct sbuf m = SBUF_INIT;
			sbuf_addf(&m, "sweep %s: %s", v[i].id, err.msg ? err.msg : "error");
			srv_say(s, m.buf);
			sbuf_release(&m);
			tc_err_release(&err);
		} else if (done) {
			struct sbuf m = SBUF_INIT;
			sbuf_addf(&m, "sweep %s (%s) done", v[i].id, v[i].name);
			srv_say(s, m.buf);
			sbuf_release(&m);
		}
	}
	sweep_rows_free(v, n);
}
