/*
 * sweep_json.c -- a sweep as JSON: the one form `sweep show`, `compare --sweep`,
 * the API and the web UI read (trials best first, the best named, how to
 * run it again).
 */
#include "sweep/sweep.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* "trainctl run --set args.lr=0.1 ... SPEC": the best trial again, here. */
static char *rerun_text(const struct sweep_def *d, const struct trial_row *t)
{
	struct sbuf sb = SBUF_INIT;
	json_t *o = json_loads(t->params_json ? t->params_json : "{}", 0, NULL);
	const char *k;
	json_t *v;
	sbuf_adds(&sb, "trainctl run");
	json_object_foreach(o, k, v) {
		char *txt = sweep_value_text(v);
		bool quote = strpbrk(txt, " \"'[]{}*?$&;|<>()`\\!") != NULL;
		sbuf_addf(&sb, " --set %s%s=%s%s", quote ? "'" : "", k, txt, quote ? "'" : "");
		free(txt);
	}
	json_decref(o);
	/* the file's own path, not the one it was reached by ("sweeps/../job.yaml") */
	char *clean = d->spec_path ? realpath(d->spec_path, NULL) : NULL;
	const char *path = clean ? clean : d->spec_path;
	sbuf_addch(&sb, ' ');
	if (path && path[strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "0123456789/._-+:,@=")])
		sbuf_add_shell_quoted(&sb, path);
	else if (path)
		sbuf_adds(&sb, path);
	else
		sbuf_adds(&sb, "SPEC");
	free(clean);
	return sbuf_detach(&sb);
}

static bool driver_gone(const struct sweep_row *s)
{
	return !s->managed && sweep_state_is(s->state, SWEEP_RUNNING) &&
	       (!s->driver_pid || !proc_alive(s->driver_pid, s->driver_ticks));
}

int sweep_show_json(struct store *st, const char *ref, json_t **out, struct tc_err *err)
{
	struct sweep_row s = { 0 };
	struct sweep_def *d = NULL;
	struct trial_row *t = NULL;
	size_t n = 0;
	int rc = store_sweep_get(st, ref, &s, err);
	if (!rc)
		rc = sweep_def_from_json(s.def_json, &d, err);
	if (!rc)
		rc = store_sweep_trials(st, s.id, &t, &n, err);
	if (rc)
		goto out;
	long best = sweep_rank_trials(d->mode, t, n);
	json_t *o = json_object();
	json_object_set_new(o, "id", json_string(s.id));
	json_object_set_new(o, "name", json_string(s.name));
	/* a `trainctl sweep` that died leaves its row running: say so */
	json_object_set_new(o, "state", json_string(driver_gone(&s) ? sweep_state_name(SWEEP_STOPPED) : s.state));
	json_object_set_new(o, "user", json_string(s.user ? s.user : ""));
	json_object_set_new(o, "managed", json_boolean(s.managed));
	json_object_set_new(o, "created", json_real(s.created));
	json_object_set_new(o, "ended", s.ended > 0 ? json_real(s.ended) : json_null());
	json_object_set_new(o, "note", driver_gone(&s) ? json_string("its trainctl sweep process is gone")
						       : json_string_or_null(s.note));
	json_object_set_new(o, "definition", sweep_def_to_json(d));
	json_object_del(json_object_get(o, "definition"), "spec_text");
	json_t *keys = json_array();
	for (size_t i = 0; i < d->nparams; i++)
		json_array_append_new(keys, json_string(d->params[i].key));
	json_object_set_new(o, "parameters", keys);
	json_object_set_new(o, "metric", json_string(d->metric));
	json_object_set_new(o, "mode", json_string(d->mode == SWEEP_MAX ? "max" : "min"));
	size_t counts[TRIAL_NSTATES] = { 0 };
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		enum trial_state ts;
		if (trial_state_parse(t[i].state, &ts))
			counts[ts]++;
		json_t *x = json_object();
		json_object_set_new(x, "trial", json_integer(t[i].idx));
		json_t *p = json_loads(t[i].params_json ? t[i].params_json : "{}", 0, NULL);
		json_object_set_new(x, "params", p ? p : json_object());
		json_object_set_new(x, "state", json_string(t[i].state));
		json_object_set_new(x, "job", json_string_or_null(t[i].job_id));
		json_object_set_new(x, "objective", json_real_or_null(t[i].objective));
		json_object_set_new(x, "steps", json_integer(t[i].steps));
		json_object_set_new(x, "early_stopped", json_boolean(t[i].early));
		json_object_set_new(x, "note", json_string_or_null(t[i].note));
		json_object_set_new(x, "started", t[i].started > 0 ? json_real(t[i].started) : json_null());
		json_object_set_new(x, "ended", t[i].ended > 0 ? json_real(t[i].ended) : json_null());
		json_array_append_new(arr, x);
	}
	json_t *c = json_object();
	for (int w = 0; w < TRIAL_NSTATES; w++)
		json_object_set_new(c, trial_state_name((enum trial_state)w),
				    json_integer((json_int_t)counts[w]));
	json_object_set_new(o, "counts", c);
	json_object_set_new(o, "trials", arr);
	if (best >= 0) {
		char *again = rerun_text(d, &t[best]);
		json_object_set_new(o, "best", json_pack("{s:i, s:o, s:o, s:s}", "trial", t[best].idx, "job",
							 json_string_or_null(t[best].job_id), "objective",
							 json_real_or_null(t[best].objective), "rerun",
							 again));
		free(again);
	} else {
		json_object_set_new(o, "best", json_null());
	}
	*out = o;
out:
	trial_rows_free(t, n);
	sweep_def_free(d);
	sweep_row_release(&s);
	return rc;
}

json_t *sweep_brief_json(const struct sweep_row *s)
{
	return json_pack("{s:s, s:s, s:s, s:b, s:f, s:o, s:o}", "id", s->id, "name", s->name, "state",
			 driver_gone(s) ? sweep_state_name(SWEEP_STOPPED) : s->state, "managed", s->managed, "created",
			 s->created, "ended", s->ended > 0 ? json_real(s->ended) : json_null(), "note",
			 json_string_or_null(s->note));
}
