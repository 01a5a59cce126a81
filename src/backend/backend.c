/* backend.c -- the backend table and backend: local (backend.h). */
#include "backend/backend.h"
#include "container/container.h"
#include "core/util.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void backend_say(const struct backend_env *env, const char *fmt, ...)
{
	if (!env || !env->say)
		return;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(env->say, env->say_arg, fmt, ap);
	va_end(ap);
}

int backend_prepare(const struct backend_ops *be, struct spec *s, struct tc_err *err)
{
	/* slurm: pyxis, else the local runtime under srun, else refused (docs/containers.md#slurm) */
	if (be == &backend_slurm)
		return container_slurm_runtime(s, "srun", err);
	return 0;
}

/* ---- backend: local ---- */

static int local_stop(const struct backend_env *env, struct store *st, const struct job_row *j,
		      enum job_stop why, struct tc_err *err)
{
	if (job_state_waiting(j->state)) {
		/* nothing runs: the server ends it itself; without one there is nobody to ask */
		if (why == JOB_STOP_STOPPED)
			return jobs_finish(st, j->id, JOB_KILLED, 1, "stopped before it ran",
					   "stopped through the server", err);
		if (why == JOB_STOP_NONE)
			return tc_error(err, TC_EUSAGE, "stop: job %s has no running supervisor (%s);"
					" a queued job needs its server", j->id,
					job_state_name(j->state));
		return 0; /* pausing or preempting what waits: nothing to do */
	}
	int rc = why == JOB_STOP_NONE ? 0 : store_job_set_stop_reason(st, j->id, why, err);
	if (rc)
		return rc;
	if (!proc_alive(j->sup_pid, j->sup_ticks))
		return tc_error(err, TC_EUSAGE, "stop: job %s has no running supervisor (%s)", j->id,
				job_state_name(j->state));
	if (kill(j->sup_pid, SIGTERM) < 0)
		return tc_error_errno(err, TC_ESYS, "stop: cannot signal supervisor %ld",
				      (long)j->sup_pid);
	if (why == JOB_STOP_NONE)
		backend_say(env, "stopping %s (SIGTERM to supervisor %ld)", j->id, (long)j->sup_pid);
	else
		backend_say(env, "job %s: %s (SIGTERM to supervisor %ld)", j->id, job_stop_name(why),
			    (long)j->sup_pid);
	return 0;
}

static int local_pause(const struct backend_env *env, struct store *st, const struct job_row *j,
		       struct tc_err *err)
{
	if (j->state == JOB_PAUSED)
		return 0;
	if (job_state_waiting(j->state))
		return jobs_requeue(st, j->id, JOB_PAUSED, false, "paused before it ran", err);
	return local_stop(env, st, j, JOB_STOP_PAUSED, err);
}

static int local_resume(const struct backend_env *env, struct store *st, const struct job_row *j,
			struct tc_err *err)
{
	(void)env;
	if (j->state != JOB_PAUSED)
		return tc_error(err, TC_EUSAGE, "job %s is %s: only a paused job can be resumed", j->id,
				job_state_name(j->state));
	return jobs_requeue(st, j->id, JOB_QUEUED, false, "resumed", err);
}

static bool local_gone(const struct job_row *j)
{
	return job_state_active(j->state) && !proc_alive(j->sup_pid, j->sup_ticks);
}

/*
 * The end a supervisor killed while a full disk kept it from the database
 * left in the run folder (runpath.h: RUN_OUTCOME, docs/reliability.md):
 * recorded as the job's end; 1 when there was one, 0 when none.
 */
static int recorded_outcome(struct store *st, const struct job_row *j, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	struct tc_err e2 = TC_ERR_INIT;
	int rc = 0;
	if (!j->run_dir)
		return 0;
	run_path(&path, j->run_dir, NULL, RUN_OUTCOME, 0);
	json_t *o = NULL;
	if (!read_file_nofollow(path.buf, &text, &e2))
		o = json_loadb(text.buf, text.len, 0, NULL); /* reserved, never written: no object */
	const char *job = json_string_value(json_object_get(o, "job"));
	const char *state = json_string_value(json_object_get(o, "state"));
	enum job_state end;
	if (job && !strcmp(job, j->id) && state && job_state_parse(state, strlen(state), &end) &&
	    job_state_terminal(end)) {
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "supervisor (pid %ld) is gone; its end, kept from the database by a"
			  " full disk, read from %s", (long)j->sup_pid, path.buf);
		const char *cause = json_string_value(json_object_get(o, "root_cause"));
		rc = jobs_finish(st, j->id, end,
				 (int)json_integer_value(json_object_get(o, "exit_code")),
				 cause && *cause ? cause : NULL, why.buf, err);
		sbuf_release(&why);
		if (!rc && unlink(path.buf) < 0)
			errno = 0; /* recorded: the file is only left over */
		rc = rc ? rc : 1;
	}
	json_decref(o);
	tc_err_release(&e2);
	sbuf_release(&text);
	sbuf_release(&path);
	return rc;
}

/* A job that claims to be active but whose supervisor is gone is marked lost. */
static int local_reconcile(struct store *st, struct job_row *j, struct tc_err *err)
{
	if (!local_gone(j))
		return 0;
	int rc = recorded_outcome(st, j, err);
	if (rc < 0)
		return rc;
	struct sbuf why = SBUF_INIT;
	sbuf_addf(&why, "supervisor (pid %ld) is gone without recording an end", (long)j->sup_pid);
	if (!rc)
		rc = jobs_mark_lost(st, j->id, why.buf, err);
	else
		rc = 0;
	sbuf_release(&why);
	struct job_row fresh = { 0 };
	if (!rc && !(rc = store_job_get(st, j->id, &fresh, err))) {
		job_row_release(j);
		*j = fresh;
	}
	return rc;
}

const struct backend_ops backend_local = {
	.id = BACKEND_LOCAL,
	.run = launch_run,
	.submit = NULL, /* the server starts `trainctl supervise` itself */
	.stop = local_stop,
	.pause = local_pause,
	.resume = local_resume,
	.reconcile = local_reconcile,
	.settle = NULL,
	.to_json = NULL,
};

bool backend_supervisor_gone(const struct job_row *j)
{
	return backend_of(j) == &backend_local && local_gone(j);
}

/* ---- the table ---- */

static const struct backend_ops *const backends[BACKEND_COUNT] = {
	[BACKEND_LOCAL] = &backend_local,
	[BACKEND_SLURM] = &backend_slurm,
};

const struct backend_ops *backend_find(const char *name)
{
	int id = backend_lookup(name);
	return id < 0 ? NULL : backends[id];
}

const struct backend_ops *backend_of(const struct job_row *j)
{
	const struct backend_ops *b = backend_find(j->backend);
	return b ? b : &backend_local;
}

int backend_reconcile(struct store *st, struct job_row *j, struct tc_err *err)
{
	if (job_state_terminal(j->state))
		return 0;
	return backend_of(j)->reconcile(st, j, err);
}
