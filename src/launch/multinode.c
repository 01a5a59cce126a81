/*
 * multinode.c -- the job-level driver of a multi-node job (launch.h:
 * launch_multinode).  It runs where the backend runs the job's single
 * controlling process (Slurm: the batch script, on the first node) and
 * owns what must happen once per job, never once per node:
 *
 *   - staging inputs, watching checkpoints, uploading outputs (jobio);
 *   - agreeing on MASTER_ADDR:MASTER_PORT for each attempt (this host, a
 *     free port), written to attempts/<k>/master in the run folder;
 *   - the restart budget: an attempt fails when any node fails; the next
 *     attempt starts every node again, resuming from the newest complete
 *     checkpoint, until spec.max_restarts restarts are spent;
 *   - the job's states and root cause (the first node to report a failure,
 *     from attempts/<k>/node-<n>.json).
 *
 * Attempt numbers continue across a requeue (the backend starting the
 * driver again after preemption): the driver counts attempts/ folders, and
 * a requeued start resumes from the newest checkpoint without spending the
 * failure budget.
 */
#include "launch/launch.h"
#include "launch/jobio_int.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "report/report.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mn {
	const struct spec *s;
	const char *job_id;
	char *run_dir;
	int logfd;
};

char *launch_node_result_path(const char *run_dir, int attempt, int node_rank)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/attempts/%d/node-%d.json", run_dir, attempt, node_rank);
	return sbuf_detach(&sb);
}

static void say(struct mn *m, const char *fmt, ...) TC_PRINTF(2, 3);

static void say(struct mn *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	launch_vsay(m->logfd, fmt, ap);
	va_end(ap);
}

static void io_say(void *ctx, const char *msg)
{
	say(ctx, "%s", msg);
}

/* Attempts already made (a requeued job continues the numbering). */
static int attempts_made(const char *run_dir)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/attempts", run_dir);
	DIR *d = opendir(p.buf);
	sbuf_release(&p);
	int n = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		long v;
		if (parse_long(e->d_name, 0, 1 << 20, &v) && (int)v + 1 > n)
			n = (int)v + 1;
	}
	closedir(d);
	return n;
}

/*
 * The attempt's root cause: the earliest failure any node reported, with
 * its error file and log tail in detail.  Nodes that were only stopped
 * because another failed are not blamed.
 */
static void attempt_cause(struct mn *m, int attempt, int nodes, struct sbuf *cause,
			  struct sbuf *detail)
{
	double best = 0;
	for (int n = 0; n < nodes; n++) {
		char *path = launch_node_result_path(m->run_dir, attempt, n);
		json_t *o = json_load_file(path, 0, NULL);
		free(path);
		const char *state = json_string_value(json_object_get(o, "state"));
		double t = json_number_value(json_object_get(o, "time"));
		if (state && !strcmp(state, "failed") && (!cause->len || t < best)) {
			best = t;
			sbuf_reset(cause);
			sbuf_reset(detail);
			const char *host = json_string_value(json_object_get(o, "hostname"));
			const char *c = json_string_value(json_object_get(o, "cause"));
			const char *d = json_string_value(json_object_get(o, "detail"));
			sbuf_addf(cause, "node %d%s%s%s: %s", n, host ? " (" : "", host ? host : "",
				  host ? ")" : "", c ? c : "failed");
			if (d)
				sbuf_adds(detail, d);
		}
		json_decref(o);
	}
	if (!cause->len)
		sbuf_addf(cause, "a node ended without reporting its workers' outcome"
				 " (see logs/supervisor-node*.log in %s)", m->run_dir);
}

int launch_multinode(const struct spec *s, const char *home, const char *job_id,
		     const struct launch_backend_ops *ops, int *exit_status, struct tc_err *err)
{
	struct mn m = { s, job_id, NULL, -1 };
	struct store *st = NULL;
	struct jobio *io = NULL;
	struct job_row job = { 0 };
	char *resume = NULL, *log_dir = NULL, *output_dir = NULL, *data_dir = NULL, *ckpt_dir = NULL;
	struct sbuf path = SBUF_INIT;
	int rc;
	*exit_status = 1;

	if ((rc = store_open(home, &st, err)) || (rc = store_job_get(st, job_id, &job, err)))
		goto out;
	m.run_dir = xstrdup(job.run_dir);
	sbuf_addf(&path, "%s/logs", m.run_dir);
	log_dir = sbuf_detach(&path);
	sbuf_addf(&path, "%s/output", m.run_dir);
	output_dir = sbuf_detach(&path);
	sbuf_addf(&path, "%s/data", m.run_dir);
	data_dir = sbuf_detach(&path);
	if (s->ckpt_dir[0] == '/')
		sbuf_adds(&path, s->ckpt_dir);
	else
		sbuf_addf(&path, "%s/%s", output_dir, s->ckpt_dir);
	ckpt_dir = sbuf_detach(&path);
	const char *dirs[] = { log_dir, output_dir, data_dir, ckpt_dir };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if ((rc = mkdir_p(dirs[i], err)))
			goto out;
	sbuf_addf(&path, "%s/supervisor.log", log_dir);
	m.logfd = open(path.buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	sbuf_reset(&path);
	if (m.logfd < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot open %s/supervisor.log", log_dir);
		goto out;
	}

	int world = s->nodes * s->per_node;
	struct jobio_ctx ioc = {
		.s = s, .home = home, .job_id = job_id, .run_dir = m.run_dir, .data_dir = data_dir,
		.output_dir = output_dir, .ckpt_dir = ckpt_dir, .world = world, .say = io_say,
		.say_arg = &m,
	};
	if ((rc = jobio_begin(&ioc, st, &io, err)))
		goto fail;
	int attempt = attempts_made(m.run_dir);
	int restarts = job.restarts;
	bool requeued = attempt > 0;
	resume = jobio_resume(io, !requeued, err);
	if (!resume && err->code) {
		rc = err->code;
		goto fail;
	}
	for (;; attempt++) {
		char *addr = getenv("TRAINCTL_MASTER_ADDR") ? xstrdup(getenv("TRAINCTL_MASTER_ADDR"))
							     : host_ipv4();
		int port = s->master_port ? s->master_port : launch_free_port();
		if (port < 0) {
			free(addr);
			rc = tc_error_errno(err, TC_ESYS, "cannot find a free port");
			goto fail;
		}
		/* the rendezvous every node's workers use, kept with the attempt */
		struct sbuf rv = SBUF_INIT;
		sbuf_addf(&path, "%s/attempts/%d", m.run_dir, attempt);
		rc = mkdir_p(path.buf, err);
		sbuf_adds(&path, "/master");
		sbuf_addf(&rv, "%s:%d\n", addr, port);
		if (!rc)
			rc = write_file_atomic(path.buf, rv.buf, rv.len, err);
		sbuf_reset(&path);
		sbuf_release(&rv);
		struct sbuf why = SBUF_INIT;
		if (requeued)
			sbuf_addf(&why, "requeued: attempt %d on %d nodes (%s)", attempt, s->nodes,
				  ops->where ? ops->where : "?");
		else if (restarts == 0)
			sbuf_addf(&why, "%d workers started on %d nodes (%s)", world, s->nodes,
				  ops->where ? ops->where : "?");
		else
			sbuf_addf(&why, "restart %d of %d: %d workers started on %d nodes", restarts,
				  s->max_restarts, world, s->nodes);
		if (resume)
			sbuf_addf(&why, ", resuming from %s", resume);
		requeued = false;
		if (!rc)
			rc = store_job_set_state(st, job_id, "running", why.buf, err);
		say(&m, "job %s: %s (master %s:%d)", job_id, why.buf, addr, port);
		sbuf_release(&why);
		if (rc) {
			free(addr);
			goto fail;
		}
		struct launch_attempt a = { attempt, s->nodes, addr, port, resume };
		bool failed = false, stopped = false;
		rc = ops->run_attempt(ops->ctx, &a, &failed, &stopped, err);
		free(addr);
		if (rc)
			goto fail;
		if (stopped) {
			say(&m, "job %s: stopped from outside (attempt %d)", job_id, attempt);
			*exit_status = 143;
			goto out;
		}
		if (!failed) {
			rc = store_job_finish(st, job_id, "succeeded", 0, NULL,
					      "every worker on every node exited 0", err);
			say(&m, "job %s succeeded", job_id);
			*exit_status = 0;
			goto out;
		}
		struct sbuf cause = SBUF_INIT, detail = SBUF_INIT;
		attempt_cause(&m, attempt, s->nodes, &cause, &detail);
		if (restarts < s->max_restarts) {
			restarts++;
			free(resume);
			resume = jobio_resume(io, false, err);
			tc_err_release(err); /* no checkpoint to resume from is not fatal */
			struct sbuf why3 = SBUF_INIT;
			sbuf_addf(&why3, "%s; restarting every node (%d of %d)", cause.buf, restarts,
				  s->max_restarts);
			rc = store_job_set_state(st, job_id, "restarting", why3.buf, err);
			if (!rc)
				rc = store_job_set_restarts(st, job_id, restarts, err);
			say(&m, "%s", why3.buf);
			sbuf_release(&why3);
			sbuf_release(&cause);
			sbuf_release(&detail);
			if (rc)
				goto fail;
			continue;
		}
		struct sbuf full = SBUF_INIT;
		sbuf_addf(&full, "%s", cause.buf);
		if (s->max_restarts)
			sbuf_addf(&full, " (after %d restarts)", restarts);
		sbuf_add(&full, detail.buf, detail.len);
		rc = store_job_finish(st, job_id, "failed", 1, full.buf, cause.buf, err);
		say(&m, "job %s failed: %s", job_id, full.buf);
		sbuf_release(&full);
		sbuf_release(&cause);
		sbuf_release(&detail);
		*exit_status = 1;
		goto out;
	}
fail:
	if (rc && st) {
		struct tc_err e2 = TC_ERR_INIT;
		say(&m, "job %s failed: %s", job_id, err->msg ? err->msg : tc_code_name(rc));
		store_job_finish(st, job_id, "failed", tc_exit_status(rc), err->msg, err->msg, &e2);
		tc_err_release(&e2);
	}
out:
	jobio_end(io); /* the final upload, whatever the outcome */
	if (st && job.id && *exit_status != 143)
		report_job_end(st, job_id, NULL, io_say, &m);
	if (m.logfd >= 0)
		close(m.logfd);
	free(resume);
	free(log_dir);
	free(output_dir);
	free(data_dir);
	free(ckpt_dir);
	free(m.run_dir);
	sbuf_release(&path);
	job_row_release(&job);
	store_close(st);
	return rc;
}
