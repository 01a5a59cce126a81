/*
 * json.c -- the one JSON form of a job (jobs.h): `ps --json`, `show
 * --json`, the HTTP API's listing and detail all come from here, so that
 * they name and type every field alike (a time not reached yet is null).
 */
#include "jobs/jobs.h"
#include "backend/backend.h"
#include "core/json.h"

#include <math.h>
#include <string.h>

#define BRIEF_CAUSE_CHARS 300

static json_t *jtime(double t)
{
	return t > 0 && isfinite(t) ? json_real(t) : json_null();
}

/* The first n characters (UTF-8 code points) of s, as a listing shows a root cause. */
static json_t *jstr_cut(const char *s, size_t n)
{
	if (!s)
		return json_null();
	size_t chars = 0, i = 0;
	for (; s[i]; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80 && chars++ == n)
			break;
	return json_stringn(s, i);
}

json_t *job_to_json(const struct job_row *j, unsigned flags)
{
	bool brief = flags & JOB_JSON_BRIEF;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_string_or_null(j->id));
	json_object_set_new(o, "name", json_string_or_null(j->name));
	json_object_set_new(o, "user", json_string_or_null(j->user ? j->user : ""));
	json_object_set_new(o, "state", json_string(job_state_name(j->state)));
	json_object_set_new(o, "priority", json_integer(j->priority));
	json_object_set_new(o, "preemptible", json_boolean(j->preemptible));
	json_object_set_new(o, "device_type", json_string_or_null(j->device_type));
	json_object_set_new(o, "device_count", json_integer(j->device_count));
	json_object_set_new(o, "devices", json_string_or_null(j->devices));
	json_object_set_new(o, "created", jtime(j->created));
	json_object_set_new(o, "started", jtime(j->started));
	json_object_set_new(o, "ended", jtime(j->ended));
	json_object_set_new(o, "exit_code", json_integer(j->exit_code));
	json_object_set_new(o, "restarts", json_integer(j->restarts));
	json_object_set_new(o, "workers", json_integer(j->world_size));
	json_object_set_new(o, "root_cause", brief ? jstr_cut(j->root_cause, BRIEF_CAUSE_CHARS)
						   : json_string_or_null(j->root_cause));
	json_object_set_new(o, "managed", json_boolean(j->managed));
	json_object_set_new(o, "run_dir", json_string_or_null(j->run_dir));
	const struct backend_ops *be = backend_of(j);
	json_object_set_new(o, "backend", json_string(backend_name(be)));
	json_object_set_new(o, "stop_reason", json_string_or_null(job_stop_name(j->stop_reason)));
	json_object_set_new(o, "supervisor_pid", json_integer(j->sup_pid));
	if (be->to_json)
		be->to_json(j, o);
	if (!brief) {
		json_t *spec = j->spec_json ? json_loads(j->spec_json, 0, NULL) : NULL;
		json_object_set_new(o, "spec", spec ? spec : json_null());
	}
	return o;
}

void job_history_json(json_t *o, const struct event_row *ev, size_t nev,
		      const struct worker_row *wk, size_t nwk)
{
	json_t *events = json_array();
	for (size_t i = 0; i < nev; i++) {
		json_t *e = json_object();
		json_object_set_new(e, "time", json_real(ev[i].time));
		json_object_set_new(e, "state", json_string(job_state_name(ev[i].state)));
		json_object_set_new(e, "reason", json_string_or_null(ev[i].reason));
		json_array_append_new(events, e);
	}
	json_object_set_new(o, "events", events);
	json_t *workers = json_array();
	for (size_t i = 0; i < nwk; i++) {
		json_t *w = json_object();
		json_object_set_new(w, "attempt", json_integer(wk[i].attempt));
		json_object_set_new(w, "rank", json_integer(wk[i].rank));
		json_object_set_new(w, "local_rank", json_integer(wk[i].local_rank));
		json_object_set_new(w, "pid", json_integer(wk[i].pid));
		json_object_set_new(w, "started", json_real(wk[i].started));
		json_object_set_new(w, "ended", jtime(wk[i].ended));
		json_object_set_new(w, "exit_code", wk[i].ended > 0 && !wk[i].signal
							    ? json_integer(wk[i].exit_code)
							    : json_null());
		json_object_set_new(w, "signal", wk[i].signal ? json_integer(wk[i].signal) : json_null());
		json_array_append_new(workers, w);
	}
	json_object_set_new(o, "workers_history", workers);
}
