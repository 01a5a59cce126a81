/*
 * rounds.c -- the rounds of a multi-node job (rounds.h): the driver's
 * record of who runs each attempt, written as the job's round note.
 *
 * The loss is the moment the driver saw the round before fail (its nodes'
 * outcomes read): the one clock every backend has.  A lost node's last
 * sign of life would be earlier, by up to the time srun takes to notice.
 */
#include "launch/rounds.h"
#include "launch/launch.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "hub/sink.h"
#include "jobs/jobs.h"
#include "spec/spec.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Why a node's outcome says to leave it out, or NULL: it does not. */
static const char *leave_why(json_t *o)
{
	const char *state = json_string_value(json_object_get(o, "state"));
	bool failed = state && !strcmp(state, job_state_name(JOB_FAILED));
	const char *action = json_string_value(json_object_get(o, "on_log"));
	if (failed && json_is_true(json_object_get(o, LAUNCH_NODE_LOST_KEY)))
		return job_round_why_name(JOB_ROUND_LOST);
	if (json_is_true(json_object_get(o, "unhealthy")))
		return job_round_why_name(JOB_ROUND_UNHEALTHY);
	if (failed && action && !strcmp(action, "exclude_node"))
		return job_round_why_name(JOB_ROUND_EXCLUDED);
	return NULL;
}

void launch_round_end(struct launch_rounds *r, const char *run_dir, int attempt, int nodes,
		      bool failed)
{
	json_decref(r->why);
	json_t *why = json_object();
	r->why = why;
	r->failed_at = failed ? now_wall() : 0;
	for (int n = 0; failed && n < nodes; n++) {
		char *path = launch_node_result_path(run_dir, attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		const char *host = json_string_value(json_object_get(o, "node_name"));
		if (!host || !*host)
			host = json_string_value(json_object_get(o, "hostname"));
		const char *w = leave_why(o);
		if (host && *host && w) {
			json_t *c = json_object_get(o, "cause");
			json_object_set_new(why, host, json_pack("{s:s, s:O}", "why", w, "cause",
								 json_is_string(c) ? c : json_null()));
		}
		json_decref(o);
	}
}

static bool listed(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return true;
	return false;
}

void launch_round_begin(struct launch_rounds *r, struct sink *k, const char *job_id,
			int attempt, int nodes, const struct strvec *members,
			void (*say)(void *arg, const char *msg), void *arg)
{
	json_t *rec = json_pack("{s:i, s:i}", "attempt", attempt, "nodes", nodes);
	json_t *mem = json_array(), *out = json_array(), *spares = json_array();
	for (size_t i = 0; i < members->nr; i++)
		json_array_append_new(mem, json_string(members->v[i]));
	/* the round before's members not in this one: left out, each with its node rank then */
	for (size_t i = 0; i < r->prev.nr; i++) {
		if (listed(members, r->prev.v[i]))
			continue;
		json_t *w = json_object_get((json_t *)r->why, r->prev.v[i]);
		json_t *cause = json_object_get(w, "cause");
		json_array_append_new(out, json_pack("{s:i, s:s, s:s, s:O}", "node", (int)i, "host",
						     r->prev.v[i], "why",
						     w ? json_string_value(json_object_get(w, "why"))
						       : job_round_why_name(JOB_ROUND_LEFT_OUT),
						     "cause", cause ? cause : json_null()));
	}
	/* a host new to the members at a rank: a spare, in place of who had that rank */
	for (size_t i = 0; r->prev.nr && i < members->nr; i++)
		if (!listed(&r->prev, members->v[i]))
			json_array_append_new(spares, json_pack("{s:i, s:s, s:s?}", "node", (int)i,
								"host", members->v[i], "in_place_of",
								i < r->prev.nr ? r->prev.v[i] : NULL));
	json_object_set_new(rec, "members", mem);
	json_object_set_new(rec, "left_out", out);
	json_object_set_new(rec, "spares", spares);
	json_object_set_new(rec, "lost_at", r->failed_at > 0 ? json_real(r->failed_at) : json_null());
	char *text = job_round_text(rec);
	json_decref(rec);
	struct tc_err e = TC_ERR_INIT;
	if (sink_note(k, job_id, JOB_NOTE_ROUND, text, &e)) {
		struct sbuf m = SBUF_INIT;
		sbuf_addf(&m, "warning: the round of attempt %d is not recorded: %s", attempt, e.msg);
		say(arg, m.buf);
		sbuf_release(&m);
	}
	tc_err_release(&e);
	free(text);
	strvec_clear(&r->prev);
	for (size_t i = 0; i < members->nr; i++)
		strvec_push(&r->prev, members->v[i]);
	r->failed_at = 0;
}

void launch_spares_ignored(const struct spec *s, struct sink *k, const char *job_id)
{
	if (s->spares <= 0)
		return;
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, "spares: %d is for multi-node Slurm jobs: ignored on one machine", s->spares);
	struct tc_err e = TC_ERR_INIT;
	(void)sink_note(k, job_id, JOB_NOTE_SPARES_IGNORED, t.buf, &e); /* not vital: see rounds.h */
	tc_err_release(&e);
	sbuf_release(&t);
}

void launch_rounds_release(struct launch_rounds *r)
{
	strvec_clear(&r->prev);
	json_decref(r->why);
	r->why = NULL;
}
