/*
 * attempt.c -- what follows an attempt of a job (attempt.h): the verdict,
 * a pure function, and its record through the sink and the webhooks.
 */
#include "launch/attempt.h"
#include "launch/notify_int.h"
#include "core/proc.h"
#include "core/util.h"
#include "hub/sink.h"

#include <string.h>

bool attempt_again(const struct attempt_outcome *o)
{
	bool budget = o->restarts < o->max_restarts;
	switch (o->end) {
	case ATTEMPT_FAILED:
		return budget && o->final == ATTEMPT_MAY_RESTART;
	case ATTEMPT_LOST:
		/* a job stopped, preempted or paused through the server is not lost */
		return budget && o->asked == JOB_STOP_NONE;
	default:
		return false;
	}
}

/* The end of a failed job: why it did not restart (note 2 of attempt.h). */
static void no_restart_why(const struct attempt_outcome *o, struct sbuf *why)
{
	bool budget = o->restarts < o->max_restarts;
	if (o->final == ATTEMPT_FINAL_LIMIT)
		return; /* "stopped: it ran past limits.max_runtime" says it all */
	if (budget && o->final == ATTEMPT_FINAL_FIRST_STEP)
		sbuf_adds(why, " (restart.policy first_step: no restart for a failure before the "
			       "first step)");
	else if (budget && o->final == ATTEMPT_FINAL_ON_LOG)
		sbuf_adds(why, " (no restart: the on_log action says so)");
	else if (budget && o->final == ATTEMPT_FINAL_EITHER)
		sbuf_adds(why, " (no restart: the on_log action or restart.policy first_step says so)");
	else if (o->max_restarts)
		sbuf_addf(why, " (after %d restart%s)", o->restarts, plural_s(o->restarts));
}

static void decide_stopped(const struct attempt_outcome *o, struct attempt_verdict *v)
{
	if (o->asked == JOB_STOP_PREEMPTED || o->asked == JOB_STOP_PAUSED) {
		/* the server runs it again later: a state, not an end */
		sbuf_addf(&v->why, "%s by the server (workers stopped by ", job_stop_name(o->asked));
		proc_describe_stop_signal(&v->why, o->signal);
		sbuf_addch(&v->why, ')');
		v->state = job_stop_state(o->asked);
		v->notify = o->asked == JOB_STOP_PREEMPTED;
		v->event = NOTIFY_PREEMPTED;
		v->notify_state = job_stop_name(o->asked);
		return;
	}
	if (o->asked != JOB_STOP_NONE) {
		sbuf_addf(&v->why, "stopped through the server (%s)", job_stop_name(o->asked));
	} else if (o->cause && *o->cause) {
		sbuf_adds(&v->why, o->cause); /* the supervisor's own stop: limits.idle_minutes */
	} else {
		sbuf_adds(&v->why, "stopped by ");
		proc_describe_stop_signal(&v->why, o->signal);
	}
	v->ends = v->root = v->notify = true;
	v->state = JOB_KILLED;
	v->exit_code = 1;
	v->event = NOTIFY_KILLED;
}

void attempt_decide(const struct attempt_outcome *o, struct attempt_verdict *v)
{
	*v = (struct attempt_verdict){ .exit_code = -1, .restarts = o->restarts };
	sbuf_init(&v->why, 0);
	sbuf_init(&v->cause, 0);
	v->again = attempt_again(o);
	const char *cause = o->cause ? o->cause : "";
	switch (o->end) {
	case ATTEMPT_OK:
		sbuf_adds(&v->why, o->scope == ATTEMPT_EVERY_NODE ? "every worker on every node exited 0"
								   : "every worker exited 0");
		v->ends = v->notify = true;
		v->state = JOB_SUCCEEDED;
		v->exit_code = 0;
		v->event = NOTIFY_SUCCEEDED;
		break;
	case ATTEMPT_UPLOAD_FAILED:
		/* the results are part of the result: a failed final upload fails the job */
		sbuf_adds(&v->why, cause);
		v->ends = v->root = v->notify = true;
		v->state = JOB_FAILED;
		v->exit_code = 1;
		v->event = NOTIFY_FAILED;
		break;
	case ATTEMPT_FAILED:
		v->notify = true;
		if (v->again) {
			v->restarts++;
			sbuf_addf(&v->why, "%s; restarting %s (%d of %d)", cause,
				  o->scope == ATTEMPT_EVERY_NODE ? "every node" : "the group", v->restarts,
				  o->max_restarts);
			v->state = JOB_RESTARTING;
			v->event = NOTIFY_RESTARTED;
			break;
		}
		sbuf_adds(&v->why, cause);
		no_restart_why(o, &v->why);
		v->ends = v->root = true;
		v->state = JOB_FAILED;
		v->exit_code = 1;
		v->event = NOTIFY_FAILED;
		break;
	case ATTEMPT_STOPPED:
		decide_stopped(o, v);
		break;
	case ATTEMPT_LOST:
		if (v->again) {
			v->restarts++;
			sbuf_addf(&v->why, "requeued after its supervisor was lost (restart %d of %d)",
				  v->restarts, o->max_restarts);
			v->state = JOB_QUEUED;
		} else {
			/* the server recorded it lost already: nothing more to say */
			v->ends = true;
			v->state = JOB_LOST;
		}
		break;
	}
	if (!v->notify_state)
		v->notify_state = job_state_name(v->state);
	/* the event in the job's record: a failure's own cause, else the reason */
	sbuf_adds(&v->cause, o->end == ATTEMPT_FAILED && !v->again ? cause : v->why.buf);
}

void attempt_verdict_release(struct attempt_verdict *v)
{
	sbuf_release(&v->why);
	sbuf_release(&v->cause);
}

int attempt_record(const struct attempt_ctl *c, const struct attempt_verdict *v,
		   const char *detail, struct tc_err *err)
{
	struct sbuf root = SBUF_INIT;
	int rc;
	if (v->ends) {
		sbuf_add(&root, v->why.buf, v->why.len);
		if (detail)
			sbuf_adds(&root, detail);
		rc = sink_finish(c->sink, c->job_id, v->state, v->exit_code, v->root ? root.buf : NULL,
				 v->cause.buf, err);
	} else {
		rc = sink_mark(c->sink, c->job_id, v->state, v->why.buf, err);
		if (!rc && v->state == JOB_RESTARTING)
			rc = sink_restarts(c->sink, c->job_id, v->restarts, err);
	}
	if (v->state == JOB_RESTARTING && c->say)
		c->say(c->say_ctx, v->why.buf);
	if (v->notify)
		launch_notify(c->ln, v->event, v->notify_state, v->why.buf, c->attempt, v->exit_code);
	if (c->result && v->state != JOB_RESTARTING) {
		sbuf_reset(c->result);
		if (v->state == JOB_SUCCEEDED)
			sbuf_addf(c->result, "job %s %s", c->job_id, job_state_name(v->state));
		else if (v->state == JOB_KILLED)
			sbuf_addf(c->result, "job %s %s (%s)", c->job_id, job_state_name(v->state),
				  root.buf);
		else if (v->ends)
			sbuf_addf(c->result, "job %s %s: %s", c->job_id, job_state_name(v->state),
				  root.buf);
		else
			sbuf_addf(c->result, "job %s %s", c->job_id, v->why.buf);
	}
	sbuf_release(&root);
	return rc;
}
