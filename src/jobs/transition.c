/*
 * transition.c -- one function per edge of the job state diagram
 * (state.h), over the store.  Each names the state it records, so callers
 * never pick a state word; the store writes it and its event row in one
 * transaction.
 */
#include "jobs/jobs.h"
#include "core/sbuf.h"

#include <string.h>

static int bad_end(const char *id, enum job_state s, struct tc_err *err)
{
	return tc_error(err, TC_EUSAGE, "job %s: %s is not how a job ends here", id,
			job_state_name(s));
}

int jobs_mark_starting(struct store *st, const char *id, const char *why, struct tc_err *err)
{
	return store_job_set_state(st, id, JOB_STARTING, why, err);
}

int jobs_mark_running(struct store *st, const char *id, const char *why, struct tc_err *err)
{
	return store_job_set_state(st, id, JOB_RUNNING, why, err);
}

int jobs_mark_started(struct store *st, const struct store_start *s, struct tc_err *err)
{
	return store_job_started(st, s, err);
}

int jobs_mark_restarting(struct store *st, const char *id, const char *why, struct tc_err *err)
{
	return store_job_set_state(st, id, JOB_RESTARTING, why, err);
}

int jobs_mark_held(struct store *st, const char *id, enum job_stop asked, const char *why,
		   struct tc_err *err)
{
	if (asked != JOB_STOP_PAUSED && asked != JOB_STOP_PREEMPTED)
		return bad_end(id, job_stop_state(asked), err);
	return store_job_set_state(st, id, job_stop_state(asked), why, err);
}

int jobs_mark_queued(struct store *st, const char *id, const char *why, struct tc_err *err)
{
	return store_job_set_state(st, id, JOB_QUEUED, why, err);
}

int jobs_finish(struct store *st, const char *id, enum job_state end, int exit_code,
		const char *root_cause, const char *why, struct tc_err *err)
{
	if (!job_state_terminal(end))
		return bad_end(id, end, err);
	return store_job_finish(st, id, end, exit_code, root_cause, why, err);
}

int jobs_mark_lost(struct store *st, const char *id, const char *why, struct tc_err *err)
{
	return store_job_finish(st, id, JOB_LOST, 3, why, why, err);
}

int jobs_launch(struct store *st, const char *id, const char *devices, pid_t pid,
		unsigned long long ticks, const char *why, struct tc_err *err)
{
	return store_job_launch(st, id, devices, pid, ticks, why, err);
}

int jobs_requeue(struct store *st, const char *id, enum job_state to, bool count_restart,
		 const char *why, struct tc_err *err)
{
	if (to != JOB_QUEUED && to != JOB_PAUSED)
		return tc_error(err, TC_EUSAGE, "job %s: cannot be requeued as %s", id,
				job_state_name(to));
	return store_job_requeue(st, id, to, count_restart, why, err);
}

int jobs_note(struct store *st, const char *id, enum job_note n, const char *text,
	      struct tc_err *err)
{
	struct sbuf r = SBUF_INIT;
	sbuf_addf(&r, "%s: %s", job_note_name(n), text);
	int rc = store_job_event(st, id, r.buf, err);
	sbuf_release(&r);
	return rc;
}
