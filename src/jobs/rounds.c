/*
 * rounds.c -- a multi-node job's rounds (jobs.h): the round note's text,
 * which the driver writes (launch/rounds.c), read back for show and the
 * job's page, and each round's first training step from its metrics.
 */
#include "jobs/jobs.h"
#include "core/sbuf.h"
#include "metrics/query.h"
#include "store/store_metrics.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *sget(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "?";
}

/* s with control characters as spaces: the note's first line stays one line. */
static void add_flat(struct sbuf *out, const char *s)
{
	for (; *s; s++)
		sbuf_addch(out, (unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s);
}

const char *job_round_why_name(enum job_round_why w)
{
	/* LEFT_OUT: the driver knows no reason (an exclusion of an attempt before) */
	static const char *const names[] = { "lost", "unhealthy", "excluded", "left out" };
	return (size_t)w < sizeof(names) / sizeof(names[0]) ? names[w] : names[JOB_ROUND_LEFT_OUT];
}

char *job_round_text(json_t *record)
{
	struct sbuf t = SBUF_INIT;
	struct sbuf line = SBUF_INIT;
	json_t *x;
	size_t i;
	long long nodes = json_integer_value(json_object_get(record, "nodes"));
	sbuf_addf(&line, "attempt %lld: %lld node%s",
		  json_integer_value(json_object_get(record, "attempt")), nodes, nodes == 1 ? "" : "s");
	json_array_foreach(json_object_get(record, "members"), i, x) {
		sbuf_adds(&line, i ? "," : " ");
		sbuf_adds(&line, json_string_value(x) ? json_string_value(x) : "?");
	}
	json_array_foreach(json_object_get(record, "left_out"), i, x) {
		sbuf_addf(&line, "; node %lld (%s) %s", json_integer_value(json_object_get(x, "node")),
			  sget(x, "host"), sget(x, "why"));
		const char *cause = json_string_value(json_object_get(x, "cause"));
		if (cause)
			sbuf_addf(&line, ": %s", cause);
	}
	json_array_foreach(json_object_get(record, "spares"), i, x)
		sbuf_addf(&line, "; spare %s takes node %lld", sget(x, "host"),
			  json_integer_value(json_object_get(x, "node")));
	add_flat(&t, line.buf);
	sbuf_release(&line);
	char *j = json_dumps(record, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	sbuf_addf(&t, "\n%s", j ? j : "{}");
	free(j);
	return sbuf_detach(&t);
}

json_t *job_rounds_json(const struct event_row *ev, size_t nev)
{
	json_t *rounds = json_array();
	for (size_t i = 0; i < nev; i++) {
		if (job_note_of_reason(ev[i].reason) != JOB_NOTE_ROUND)
			continue;
		const char *nl = strchr(ev[i].reason, '\n');
		json_t *r = nl ? json_loads(nl + 1, 0, NULL) : NULL;
		if (!json_is_object(r)) {
			json_decref(r);
			continue;
		}
		json_object_set_new(r, "started", json_real(ev[i].time));
		json_object_set_new(r, "loss_to_first_step_s", json_null());
		json_array_append_new(rounds, r);
	}
	return rounds;
}

/* The walk over one series: each round's first plain point at or after its start. */
struct first_walk {
	json_t *rounds;
	size_t at; /* the round whose first step is looked for */
	bool done; /* every round has its first step: the walk stopped */
};

static int first_point(void *arg, const struct store_mpoint *p)
{
	struct first_walk *w = arg;
	size_t n = json_array_size(w->rounds);
	if (p->kind != STORE_MPOINT)
		return 0;
	while (w->at < n) {
		json_t *r = json_array_get(w->rounds, w->at);
		json_t *next = json_array_get(w->rounds, w->at + 1);
		if (p->wall_time < json_number_value(json_object_get(r, "started")))
			return 0; /* an earlier round's */
		if (next && p->wall_time >= json_number_value(json_object_get(next, "started"))) {
			w->at++; /* that round made no step */
			continue;
		}
		json_t *lost = json_object_get(r, "lost_at");
		if (json_is_number(lost))
			json_object_set_new(r, "loss_to_first_step_s",
					    json_real(p->wall_time - json_number_value(lost)));
		w->at++;
		return 0;
	}
	w->done = true;
	return 1;
}

void job_rounds_first_step(struct store *st, const char *job_id,
			   const struct metrics_job_summary *ms, json_t *rounds)
{
	const struct metrics_metric_sum *first = NULL;
	for (size_t i = 0; i < ms->nmetrics; i++) /* a metric with step points: an epoch's is late */
		if (ms->metrics[i].kind && !strcmp(ms->metrics[i].kind, "point") &&
		    (!first || ms->metrics[i].rank < first->rank))
			first = &ms->metrics[i];
	/* only a round after a loss has anything to measure */
	size_t i, from = json_array_size(rounds);
	json_t *r;
	json_array_foreach(rounds, i, r)
		if (json_is_number(json_object_get(r, "lost_at")) && i < from)
			from = i;
	if (!first || from == json_array_size(rounds))
		return;
	struct first_walk w = { rounds, from, false };
	struct tc_err err = TC_ERR_INIT;
	(void)store_metric_walk(st, job_id, first->name, first->rank, first_point, &w, &err);
	tc_err_release(&err); /* unreadable metrics: the times stay null (jobs.h) */
}
