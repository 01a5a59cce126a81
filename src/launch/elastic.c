/*
 * elastic.c -- a multi-node job on fewer nodes (elastic_int.h): nodes left
 * out given back, the wait for nodes below nodes.min, the plan per node
 * count.  The driver (multinode.c) decides who is left out; this file
 * acts on it through the backend's hooks (launch.h: launch_backend_ops).
 */
#include "launch/elastic_int.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/jobs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say(struct elastic *e, const char *fmt, ...) TC_PRINTF(2, 3);

static void say(struct elastic *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(e->say, e->say_ctx, fmt, ap);
	va_end(ap);
}

/* Take name out of the left-out list (launch.h: launch_attempt.exclude): it is usable again. */
static void include_node(struct elastic *e, const char *name)
{
	struct sbuf kept = SBUF_INIT;
	for (const char *p = e->exclude->buf; *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len && (len != strlen(name) || strncmp(p, name, len)))
			sbuf_addf(&kept, "%s%.*s", kept.len ? "," : "", (int)len, p);
		p = c ? c + 1 : p + len;
	}
	sbuf_release(e->exclude);
	*e->exclude = kept;
}

int elastic_wait(struct elastic *e, size_t n, struct tc_err *err)
{
	struct strvec cand = STRVEC_INIT;
	int up = 0;
	for (size_t i = 0; i < e->members->nr; i++) {
		if (launch_host_listed(e->exclude->buf, e->members->v[i]))
			strvec_push(&cand, e->members->v[i]);
		else
			up++;
	}
	for (size_t i = 0; i < e->spares->nr; i++)
		if (launch_host_listed(e->exclude->buf, e->spares->v[i]))
			strvec_push(&cand, e->spares->v[i]);
	struct sbuf dur = SBUF_INIT, names = SBUF_INIT, t = SBUF_INIT, why = SBUF_INIT;
	format_duration(&dur, e->s->nodes_wait);
	for (size_t i = 0; i < cand.nr; i++)
		sbuf_addf(&names, "%s%s", i ? ", " : "", cand.v[i]);
	sbuf_addf(&t, "node %zu (%s) is left out and no spare is left: %d node%s up, nodes.min is "
		      "%d; waiting up to %s for %s to be usable again", n, e->members->v[n], up,
		  up == 1 ? "" : "s", e->s->nodes_min, dur.buf, names.buf);
	struct tc_err ne = TC_ERR_INIT;
	if (sink_note(e->sink, e->job_id, JOB_NOTE_WAIT_NODES, t.buf, &ne))
		say(e, "warning: %s", ne.msg);
	tc_err_release(&ne);
	say(e, "%s", t.buf);
	char *back = NULL;
	double until = now_wall() + (double)e->s->nodes_wait;
	for (;;) {
		for (size_t i = 0; i < cand.nr && !back; i++) {
			sbuf_reset(&why);
			if (e->ops->usable(e->ops->ctx, cand.v[i], &why))
				back = xstrdup(cand.v[i]);
			else
				say(e, "%s is not usable yet: %s", cand.v[i], why.buf);
		}
		if (back || now_wall() >= until)
			break;
		sleep(2); /* each probe is a Slurm step: not more often */
	}
	int rc = 0;
	if (back) {
		say(e, "%s is usable again: %s", back, why.buf);
		sbuf_addf(e->change, "%s%s usable again after a wait for nodes",
			  e->change->len ? ", " : "", back);
		include_node(e, back);
		free(back);
	} else {
		rc = tc_error(err, TC_EJOB, "waited %s for nodes: %d node%s up, nodes.min is %d (%s: "
				"%s)", dur.buf, up, up == 1 ? "" : "s", e->s->nodes_min, names.buf,
			      why.len ? why.buf : "no answer");
	}
	strvec_clear(&cand);
	sbuf_release(&dur);
	sbuf_release(&names);
	sbuf_release(&t);
	sbuf_release(&why);
	return rc;
}

void elastic_release(struct elastic *e)
{
	struct strvec *sp = e->spares;
	size_t i = 0;
	while (e->ops->release && !e->release_refused && i < sp->nr) {
		if (!launch_host_listed(e->exclude->buf, sp->v[i])) {
			i++;
			continue;
		}
		struct tc_err re = TC_ERR_INIT;
		if (e->ops->release(e->ops->ctx, sp->v[i], &re)) {
			say(e, "warning: %s is left out but stays in the allocation: %s", sp->v[i],
			    re.msg ? re.msg : "the backend kept it");
			e->release_refused = true;
			tc_err_release(&re);
			return;
		}
		sbuf_addf(e->change, "%s%s released from the allocation", e->change->len ? ", " : "",
			  sp->v[i]);
		free(sp->v[i]);
		memmove(&sp->v[i], &sp->v[i + 1], (sp->nr - i - 1) * sizeof(char *));
		sp->nr--;
	}
}

int elastic_plan(struct elastic *e, int nodes, struct tc_err *err)
{
	if (!e->s->parallel.on || nodes == e->s->nodes)
		return 0;
	struct spec_plan p;
	struct tc_err perr = TC_ERR_INIT;
	if (spec_plan_for(e->s, nodes, &p, &perr)) {
		int rc = tc_error(err, TC_EJOB, "parallel: no plan for %d node%s: %s", nodes,
				  nodes == 1 ? "" : "s", perr.msg ? perr.msg : "the planner failed");
		tc_err_release(&perr);
		return rc;
	}
	sbuf_addf(e->change, "%splan dp=%d tp=%d pp=%d for %d node%s", e->change->len ? ", " : "",
		  p.dp, p.tp, p.pp, nodes, nodes == 1 ? "" : "s");
	spec_plan_release(&p);
	return 0;
}
