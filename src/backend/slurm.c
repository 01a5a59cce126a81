/*
 * slurm.c -- backend: slurm (backend.h, docs/slurm.md).
 *
 * THE PROCESSES OF ONE JOB
 *
 *   submit host                      first node            every node
 *   -----------                      ----------            ----------
 *   trainctl run  --sbatch-->  job.sbatch: trainctl slurm-batch
 *   (slurm_run: waits,              (launch_multinode)
 *    streams rank logs,              for each attempt:
 *    maps Slurm's states)            srun --kill-on-bad-exit=1 ---> trainctl supervise-node
 *                                                                   (launch_run, one node)
 *
 * NOTES ON THE DESIGN
 *  (1) Submission runs `sbatch --test-only` first, so a request the cluster
 *      can never satisfy (bad partition, more nodes than it has) is refused
 *      with Slurm's own words before anything is recorded; then the job is
 *      created (state queued), job.sbatch written and `sbatch --parsable`
 *      submits it.
 *  (2) The job-level driver records running / restarting / succeeded /
 *      failed (launch_multinode).  What only Slurm knows (the job was
 *      cancelled, hit its time limit, lost a node, was requeued) is mapped
 *      from Slurm's job state by whoever looks next: `trainctl run` while it
 *      waits, or ps / show / logs (slurm_reconcile) while the job has not
 *      ended.  An ended job needs no Slurm: the server, which follows its
 *      jobs, asks until Slurm's own state for it is final (slurm_settle).
 *  (3) Stopping: `scancel --signal=TERM` reaches the node supervisors only
 *      (not srun, which would answer SIGTERM with SIGKILL), so workers get
 *      the job's grace_seconds; a job still there after that is cancelled.
 *      Slurm's own SIGTERM (scancel, time limit, preemption) reaches every
 *      supervisor directly, with KillWait as the grace.
 *  (4) A signal given by slurm: {signal: USR1@120} reaches the supervisors,
 *      which pass it to their workers (a checkpoint warning); sent to the
 *      batch step only (B:USR1) the driver passes it on through srun.
 */
#include "backend/backend.h"
#include "core/proc.h"
#include "jobs/jobs.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MS 200
#define QUERY_MS 500

/* ---- running Slurm's commands ---- */

int slurm_command(const char *const *argv, const char *input, struct sbuf *out,
		  struct sbuf *errout, int *status, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, argv);
	proc_env_inherit(&p.env);
	p.default_sigs = PROC_SIG(SIGPIPE);
	p.in.how = PROC_IO_NULL;
	p.out.how = p.err.how = PROC_IO_NULL; /* what is not collected is dropped */
	p.wait_exec = true;
	struct proc_capture c = { .input = input, .out = out, .err = errout };
	int rc = proc_capture(&p, &c, err);
	*status = c.status;
	if (rc && p.exec_errno) {
		errno = p.exec_errno;
		rc = tc_error_errno(err, TC_EBACKEND, "slurm: cannot run %s%s", argv[0],
				    p.exec_errno == ENOENT ? " (is Slurm installed? Debian: slurm-client)" : "");
	}
	proc_clear(&p);
	return rc;
}

/* Slurm's message as one line: trimmed lines joined with "; ". */
static void quote_lines(struct sbuf *dst, const char *text)
{
	const char *p = text;
	bool first = true;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		while (len && (p[len - 1] == '\r' || p[len - 1] == ' '))
			len--;
		if (len) {
			if (!first)
				sbuf_adds(dst, "; ");
			sbuf_add(dst, p, len);
			first = false;
		}
		p = nl ? nl + 1 : p + strlen(p);
	}
}

/* Errors that mean Slurm itself is unreachable or broken (exit 3), not the request (2). */
static bool infrastructure_error(const char *msg)
{
	static const char *const words[] = {
		"Unable to contact slurm controller", "Unable to process configuration file",
		"Socket timed out", "Zero Bytes were transmitted", "Communication connection failure",
		"Connection refused", "Munge", "munge", "Protocol authentication error",
		"Slurm backup controller in standby mode", NULL,
	};
	for (const char *const *w = words; *w; w++)
		if (strstr(msg, *w))
			return true;
	return false;
}

/* A failed Slurm command as an error: "slurm: WHAT: <Slurm's words>". */
static int command_error(const char *what, int status, const struct sbuf *out,
			 const struct sbuf *errout, struct tc_err *err)
{
	struct sbuf q = SBUF_INIT;
	quote_lines(&q, errout->len ? errout->buf : out->buf);
	if (!q.len) {
		if (WIFEXITED(status))
			sbuf_addf(&q, "exit status %d", WEXITSTATUS(status));
		else
			sbuf_addf(&q, "killed by signal %d", WTERMSIG(status));
	}
	int code = infrastructure_error(q.buf) ? TC_EBACKEND : TC_EINPUT;
	int rc = tc_error(err, code, "slurm: %s: %s", what, q.buf);
	sbuf_release(&q);
	return rc;
}

static bool exited_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- the state of a Slurm job ---- */

struct slurm_jobinfo {
	char *state;   /* JobState, e.g. RUNNING; NULL: Slurm does not know the job */
	char *reason;  /* Reason */
	char *nodes;   /* NodeList */
	int restarts;  /* Restarts (requeues) */
	char *exit;    /* ExitCode "0:0" */
};

static void jobinfo_release(struct slurm_jobinfo *j)
{
	free(j->state);
	free(j->reason);
	free(j->nodes);
	free(j->exit);
	memset(j, 0, sizeof(*j));
}

/* The value of " KEY=" in a `scontrol -o show job` line (up to the next space). */
static char *field(const char *line, const char *key)
{
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, " %s=", key);
	const char *p = strstr(line, k.buf);
	if (!p && !strncmp(line, k.buf + 1, k.len - 1))
		p = line - 1;
	char *v = NULL;
	if (p) {
		p += k.len;
		v = xstrndup(p, strcspn(p, " \n"));
	}
	sbuf_release(&k);
	return v;
}

static int jobinfo_query(const char *id, struct slurm_jobinfo *out, struct tc_err *err)
{
	const char *argv[] = { "scontrol", "-o", "show", "job", id, NULL };
	struct sbuf o = SBUF_INIT, e = SBUF_INIT;
	int status = 0;
	memset(out, 0, sizeof(*out));
	int rc = slurm_command(argv, NULL, &o, &e, &status, err);
	if (!rc && exited_ok(status)) {
		out->state = field(o.buf, "JobState");
		out->reason = field(o.buf, "Reason");
		out->nodes = field(o.buf, "NodeList");
		out->exit = field(o.buf, "ExitCode");
		char *r = field(o.buf, "Restarts");
		long v = 0;
		if (r && parse_long(r, 0, 1 << 30, &v))
			out->restarts = (int)v;
		free(r);
		if (out->nodes && !strcmp(out->nodes, "(null)")) {
			free(out->nodes);
			out->nodes = NULL;
		}
	} else if (!rc && strstr(e.buf, "Invalid job id")) {
		/* purged from the controller's memory (MinJobAge): ask accounting */
		const char *sacct[] = { "sacct", "-n", "-P", "-X", "-j", id, "-o", "State,NodeList,ExitCode", NULL };
		struct sbuf o2 = SBUF_INIT, e2 = SBUF_INIT;
		struct tc_err ignore = TC_ERR_INIT;
		if (slurm_command(sacct, NULL, &o2, &e2, &status, &ignore) == 0 && exited_ok(status) &&
		    o2.len && strchr(o2.buf, '|')) {
			char *bar = strchr(o2.buf, '|');
			out->state = xstrndup(o2.buf, (size_t)(bar - o2.buf));
			char *bar2 = strchr(bar + 1, '|');
			if (bar2) {
				out->nodes = xstrndup(bar + 1, (size_t)(bar2 - bar - 1));
				out->exit = xstrndup(bar2 + 1, strcspn(bar2 + 1, "\n"));
			}
		}
		tc_err_release(&ignore);
		sbuf_release(&o2);
		sbuf_release(&e2);
	} else if (!rc) {
		rc = command_error("scontrol show job", status, &o, &e, err);
		if (rc == TC_EINPUT)
			err->code = rc = TC_EBACKEND;
	}
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

/* Why Slurm's state moved the job: "Slurm job 12 is PENDING (Priority)". */
static void slurm_why(struct sbuf *why, const char *slurm_id, const char *verb,
		      const struct slurm_jobinfo *sj)
{
	sbuf_addf(why, "Slurm job %s %s %s", slurm_id, verb, sj->state);
	if (sj->reason && strcmp(sj->reason, "None") != 0)
		sbuf_addf(why, " (%s)", sj->reason);
}

/* Slurm is done with the job: record its end unless the driver did. */
static int sync_end(struct store *st, const struct job_row *j, const char *slurm_id,
		    const struct slurm_jobinfo *sj, bool known, enum job_state mapped, struct tc_err *err)
{
	if (job_state_terminal(j->state))
		return 0; /* the driver recorded the outcome */
	struct sbuf why = SBUF_INIT;
	slurm_why(&why, slurm_id, "ended", sj);
	if (!strncmp(sj->state, "TIMEOUT", 7))
		sbuf_adds(&why, ": time limit reached");
	else if (!strncmp(sj->state, "PREEMPTED", 9))
		sbuf_adds(&why, ": preempted and not requeued");
	enum job_state end = known ? mapped : JOB_FAILED;
	int rc = jobs_finish(st, j->id, end, end == JOB_SUCCEEDED ? 0 : 1, why.buf, why.buf, err);
	sbuf_release(&why);
	return rc;
}

/* queued -> starting, running -> queued (requeue), running <-> paused */
static int sync_move(struct store *st, const struct job_row *j, const char *slurm_id,
		     const struct slurm_jobinfo *sj, enum job_state mapped, struct tc_err *err)
{
	bool change = false;
	if (mapped == JOB_QUEUED)
		change = j->state != JOB_QUEUED && !job_state_terminal(j->state);
	else if (mapped == JOB_STARTING)
		change = j->state == JOB_QUEUED;
	else if (mapped == JOB_PAUSED)
		change = j->state != JOB_PAUSED;
	else if (mapped == JOB_RUNNING)
		change = j->state == JOB_PAUSED || j->state == JOB_QUEUED;
	if (!change)
		return 0;
	struct sbuf why = SBUF_INIT;
	slurm_why(&why, slurm_id, "is", sj);
	if (mapped == JOB_QUEUED && sj->restarts)
		sbuf_addf(&why, ": requeued %d time%s", sj->restarts, sj->restarts == 1 ? "" : "s");
	int rc;
	if (mapped == JOB_QUEUED)
		rc = jobs_mark_queued(st, j->id, why.buf, err);
	else if (mapped == JOB_PAUSED)
		rc = jobs_mark_held(st, j->id, JOB_STOP_PAUSED, why.buf, err);
	else /* running itself is the driver's to record (it names the attempt) */
		rc = jobs_mark_starting(st, j->id, why.buf, err);
	sbuf_release(&why);
	return rc;
}

/*
 * Bring the stored job up to date with Slurm's view (design note 2).
 * *final: Slurm is done with the job and its stored state is terminal.
 */
static int sync_state(struct store *st, const char *job_id, const char *slurm_id,
		      const struct slurm_jobinfo *sj, bool *final, struct tc_err *err)
{
	struct job_row j = { 0 };
	int rc = store_job_get(st, job_id, &j, err);
	*final = false;
	if (rc)
		return rc;
	if (!sj->state) {
		/* Slurm forgot the job and no accounting remembers it */
		if (!job_state_terminal(j.state)) {
			struct sbuf why = SBUF_INIT;
			sbuf_addf(&why, "Slurm no longer knows job %s and no end was recorded", slurm_id);
			rc = jobs_mark_lost(st, job_id, why.buf, err);
			sbuf_release(&why);
		}
		*final = true;
		goto out;
	}
	if ((rc = store_slurm_set(st, job_id, NULL, sj->nodes, sj->state, err)))
		goto out;
	bool slurm_final;
	enum job_state mapped = JOB_FAILED;
	bool known = slurm_state_map(sj->state, &mapped, &slurm_final);
	if (slurm_final) {
		*final = true;
		rc = sync_end(st, &j, slurm_id, sj, known, mapped, err);
	} else if (known && !job_state_terminal(j.state)) {
		rc = sync_move(st, &j, slurm_id, sj, mapped, err);
	}
out:
	job_row_release(&j);
	return rc;
}

/* Ask Slurm about j and record what it says; j is read again afterwards. */
static int ask_slurm(struct store *st, struct job_row *j, bool *final, struct tc_err *err)
{
	struct slurm_jobinfo sj;
	int rc = jobinfo_query(j->slurm_job, &sj, err);
	if (!rc)
		rc = sync_state(st, j->id, j->slurm_job, &sj, final, err);
	jobinfo_release(&sj);
	struct job_row fresh = { 0 };
	if (!rc && !(rc = store_job_get(st, j->id, &fresh, err))) {
		job_row_release(j);
		*j = fresh;
	}
	return rc;
}

static int slurm_reconcile(struct store *st, struct job_row *j, struct tc_err *err)
{
	bool final;
	/* an ended job is the store's (slurm_settle brings its Slurm state to the end) */
	if (!j->slurm_job || job_state_terminal(j->state))
		return 0;
	return ask_slurm(st, j, &final, err);
}

/*
 * The driver records the end before its batch step is gone, so the Slurm
 * state last seen of a job the server followed is not final yet: ask until
 * it is (or Slurm forgot the job).
 */
static int slurm_settle(struct store *st, struct job_row *j, bool *done, struct tc_err *err)
{
	enum job_state ignored;
	bool final = false;
	if (j->slurm_state)
		slurm_state_map(j->slurm_state, &ignored, &final);
	*done = !j->slurm_job || final;
	if (*done)
		return 0;
	return ask_slurm(st, j, done, err);
}

/* show: the Slurm job of j under "slurm" (job, nodes, state) once it has one. */
static void slurm_to_json(const struct job_row *j, json_t *o)
{
	if (j->slurm_job)
		json_object_set_new(o, "slurm", json_pack("{s:s, s:s?, s:s?}", "job", j->slurm_job,
							  "nodes", j->slurm_nodes, "state",
							  j->slurm_state));
}

/* ---- submission ---- */

static char *run_dir_of(const char *home, const char *job_id)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/runs/%s", home, job_id);
	return sbuf_detach(&sb);
}

/* sbatch --test-only: refused requests get Slurm's words and nothing is recorded. */
static int test_only(const char *script, struct tc_err *err)
{
	const char *argv[] = { "sbatch", "--test-only", NULL };
	struct sbuf o = SBUF_INIT, e = SBUF_INIT;
	int status = 0;
	int rc = slurm_command(argv, script, &o, &e, &status, err);
	if (!rc && !exited_ok(status))
		rc = command_error("the cluster refused the job", status, &o, &e, err);
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

static int slurm_submit(const struct backend_env *env, struct store *st, const struct spec *s,
			const char *job_id, struct tc_err *err)
{
	char *exe = path_self_exe();
	char *home_abs = path_absolute(env->home, NULL);
	char *run_dir = run_dir_of(home_abs, job_id);
	struct sbuf path = SBUF_INIT, o = SBUF_INIT, e = SBUF_INIT;
	char *script = NULL;
	int rc = 0, status = 0;
	if (!exe) {
		rc = tc_error_errno(err, TC_ESYS, "cannot find the trainctl binary");
		goto out;
	}
	struct slurm_script_in in = { s, job_id, home_abs, run_dir, exe };
	script = slurm_script(&in);
	sbuf_addf(&path, "%s/job.sbatch", run_dir);
	if ((rc = write_file_atomic(path.buf, script, strlen(script), err)))
		goto out;
	const char *argv[] = { "sbatch", "--parsable", path.buf, NULL };
	if ((rc = slurm_command(argv, NULL, &o, &e, &status, err)))
		goto out;
	if (!exited_ok(status)) {
		rc = command_error("sbatch", status, &o, &e, err);
		goto out;
	}
	sbuf_rtrim(&o);
	/* "123" or "123;cluster" */
	char *id = xstrndup(o.buf, strcspn(o.buf, ";\n"));
	long v;
	if (!parse_long(id, 1, 1L << 40, &v)) {
		rc = tc_error(err, TC_EBACKEND, "slurm: sbatch --parsable printed '%s', not a job id", o.buf);
		free(id);
		goto out;
	}
	struct sbuf why = SBUF_INIT;
	sbuf_addf(&why, "submitted to Slurm as job %s (%s)", id, path.buf);
	rc = store_slurm_set(st, job_id, id, NULL, "PENDING", err);
	if (!rc)
		rc = jobs_mark_queued(st, job_id, why.buf, err);
	if (!rc)
		backend_say(env, "job %s submitted to Slurm as job %s", job_id, id);
	sbuf_release(&why);
	free(id);
out:
	free(exe);
	free(home_abs);
	free(run_dir);
	free(script);
	sbuf_release(&path);
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

/* ---- stopping (design note 3) ---- */

static int scancel(const char *id, const char *signal_name, struct tc_err *err)
{
	struct sbuf sig = SBUF_INIT, o = SBUF_INIT, e = SBUF_INIT;
	const char *argv[4] = { "scancel", id, NULL, NULL };
	if (signal_name) {
		sbuf_addf(&sig, "--signal=%s", signal_name);
		argv[1] = sig.buf;
		argv[2] = id;
	}
	int status = 0;
	int rc = slurm_command(argv, NULL, &o, &e, &status, err);
	if (!rc && !exited_ok(status))
		rc = command_error("scancel", status, &o, &e, err);
	sbuf_release(&sig);
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

/* Is the Slurm job past running (or gone)? */
static bool slurm_done(const char *id)
{
	struct slurm_jobinfo sj;
	struct tc_err e = TC_ERR_INIT;
	bool done = true, final = false;
	enum job_state ignored;
	if (jobinfo_query(id, &sj, &e) == 0 && sj.state) {
		slurm_state_map(sj.state, &ignored, &final);
		done = final;
	}
	jobinfo_release(&sj);
	tc_err_release(&e);
	return done;
}

/* The job's grace time as its stored spec gives it. */
static int grace_of(const struct job_row *j)
{
	struct spec *s = NULL;
	struct tc_err e = TC_ERR_INIT;
	int grace = spec_from_json(j->spec_json, &s, &e) == 0 ? s->grace_seconds : 0;
	spec_free(s);
	tc_err_release(&e);
	return grace;
}

static int slurm_stop(const struct backend_env *env, struct store *st, const struct job_row *j,
		      enum job_stop why, struct tc_err *err)
{
	if (why == JOB_STOP_PAUSED || why == JOB_STOP_PREEMPTED)
		return tc_error(err, TC_EUSAGE, "job %s runs under Slurm: it can be stopped, not %s",
				j->id, job_stop_name(why));
	if (!j->slurm_job) {
		/* not submitted yet: nothing runs, the server ends it itself */
		if (why == JOB_STOP_STOPPED)
			return jobs_finish(st, j->id, JOB_KILLED, 1, "stopped before it ran",
					   "stopped through the server", err);
		return tc_error(err, TC_EUSAGE, "stop: job %s was never submitted to Slurm", j->id);
	}
	int grace = grace_of(j);
	int rc = store_job_set_stop_reason(st, j->id, JOB_STOP_STOPPED, err);
	if (rc)
		return rc;
	backend_say(env, "stopping %s (Slurm job %s: SIGTERM to its supervisors, %d s grace)", j->id,
		    j->slurm_job, grace);
	if ((rc = scancel(j->slurm_job, "TERM", err)))
		return rc;
	double deadline = now_wall() + (double)grace + 10;
	while (now_wall() < deadline && !slurm_done(j->slurm_job))
		usleep(250 * 1000);
	if (!slurm_done(j->slurm_job))
		rc = scancel(j->slurm_job, NULL, err);
	return rc;
}

/* ---- `trainctl run` in the foreground ---- */

static void say(const char *fmt, ...) TC_PRINTF(1, 2);

/* A message of `trainctl run` on its console, as the local supervisor writes them. */
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	launch_vsay(-1, fmt, ap);
	va_end(ap);
}

static volatile sig_atomic_t fg_signals;

static void on_fg_signal(int sig)
{
	(void)sig;
	fg_signals++;
}

struct follow {
	int fd;
	struct sbuf partial;
};

/* Print the rank logs' new whole lines, "[r] " first (as the local supervisor does). */
static void follow_logs(struct follow *f, int world, const char *log_dir, bool quiet, bool final)
{
	for (int r = 0; r < world; r++) {
		if (f[r].fd < 0) {
			struct sbuf p = SBUF_INIT;
			sbuf_addf(&p, "%s/rank-%d.log", log_dir, r);
			f[r].fd = open(p.buf, O_RDONLY | O_CLOEXEC);
			sbuf_release(&p);
			if (f[r].fd < 0)
				continue;
		}
		char buf[65536];
		ssize_t n;
		while ((n = read(f[r].fd, buf, sizeof(buf))) > 0)
			sbuf_add(&f[r].partial, buf, (size_t)n);
		if (final && f[r].partial.len && f[r].partial.buf[f[r].partial.len - 1] != '\n')
			sbuf_addch(&f[r].partial, '\n');
		char *last = f[r].partial.len ? memrchr(f[r].partial.buf, '\n', f[r].partial.len) : NULL;
		if (!last)
			continue;
		size_t whole = (size_t)(last - f[r].partial.buf) + 1;
		if (!quiet) {
			struct sbuf c = SBUF_INIT;
			for (const char *p = f[r].partial.buf; p < f[r].partial.buf + whole;) {
				const char *nl = memchr(p, '\n', (size_t)(f[r].partial.buf + whole - p));
				sbuf_addf(&c, "[%d] ", r);
				sbuf_add(&c, p, (size_t)(nl - p) + 1);
				p = nl + 1;
			}
			/* best effort, as on the local console */
			if (write_all(STDOUT_FILENO, c.buf, c.len) < 0)
				errno = 0;
			sbuf_release(&c);
		}
		sbuf_remove_front(&f[r].partial, whole);
	}
}

/*
 * One `trainctl run` of a Slurm job, step by step: check the request with
 * Slurm (fg_check), record the job (fg_record), submit it (fg_submit),
 * follow it to its end (fg_follow, fg_on_signals) and say how it ended
 * (fg_outcome).
 */
struct fg {
	const struct spec *s;
	const struct launch_opts *o;
	struct store *st;
	char *id, *run_dir, *home_abs, *exe, *slurm_job;
	int world;
	struct follow *f;     /* one per rank */
	struct sbuf log_dir;
	int64_t hard_at;      /* when a stop turns into a cancel; 0: none pending */
	int handled;          /* signals acted upon */
};

/* Design note 1: ask Slurm before anything is recorded. */
static int fg_check(struct fg *g, struct tc_err *err)
{
	struct slurm_script_in in = { g->s, g->id, g->home_abs, g->run_dir,
				      g->exe ? g->exe : "trainctl" };
	char *script = slurm_script(&in);
	int rc = test_only(script, err);
	free(script);
	return rc;
}

/* The run folder, job.yaml and the job's row (queued, backend slurm). */
static int fg_record(struct fg *g, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	int rc = 0;
	const char *sub[] = { "logs", "output", "data" };
	for (size_t i = 0; !rc && i < sizeof(sub) / sizeof(sub[0]); i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", g->run_dir, sub[i]);
		rc = mkdir_p(p.buf, err);
	}
	if (!rc) {
		char *yaml = spec_to_yaml(g->s);
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/job.yaml", g->run_dir);
		rc = write_file_atomic(p.buf, yaml, strlen(yaml), err);
		free(yaml);
	}
	sbuf_release(&p);
	if (rc)
		return rc;
	char *spec_json = spec_to_json(g->s);
	struct job_row row = {
		.id = g->id, .name = g->s->name, .state = JOB_QUEUED, .run_dir = g->run_dir,
		.spec_json = spec_json, .created = now_wall(), .world_size = g->world,
	};
	rc = store_job_create(g->st, &row, err);
	free(spec_json);
	if (!rc)
		rc = store_slurm_set(g->st, g->id, NULL, NULL, NULL, err);
	return rc;
}

/* Submit the recorded job; a refused submission ends it failed. */
static int fg_submit(struct fg *g, struct tc_err *err)
{
	struct job_row j = { 0 };
	struct backend_env env = { g->o->home, NULL, NULL }; /* run says it itself */
	int rc = slurm_submit(&env, g->st, g->s, g->id, err);
	if (rc) {
		struct tc_err e2 = TC_ERR_INIT;
		jobs_finish(g->st, g->id, JOB_FAILED, tc_exit_status(rc), err->msg, err->msg, &e2);
		tc_err_release(&e2);
		return rc;
	}
	if ((rc = store_job_get(g->st, g->id, &j, err)))
		return rc;
	g->slurm_job = xstrdup(j.slurm_job ? j.slurm_job : "?");
	job_row_release(&j);
	return 0;
}

static void warn_if(int failed, const struct tc_err *e)
{
	if (failed)
		say("warning: %s", e->msg);
}

/* SIGINT or SIGTERM: the first stops the job within its grace time, another cancels it. */
static void fg_on_signals(struct fg *g, int64_t now)
{
	struct tc_err e = TC_ERR_INIT;
	if (fg_signals > g->handled) {
		g->handled = fg_signals;
		if (g->handled == 1) {
			say("stopping Slurm job %s (SIGTERM to its supervisors, %d s grace)", g->slurm_job,
			    g->s->grace_seconds);
			warn_if(store_job_set_stop_reason(g->st, g->id, JOB_STOP_STOPPED, &e) ||
					scancel(g->slurm_job, "TERM", &e),
				&e);
			g->hard_at = now + (int64_t)g->s->grace_seconds * 1000 + 10000;
		} else {
			say("cancelling Slurm job %s now", g->slurm_job);
			warn_if(scancel(g->slurm_job, NULL, &e), &e);
			g->hard_at = 0;
		}
	}
	if (g->hard_at && now >= g->hard_at) {
		warn_if(scancel(g->slurm_job, NULL, &e), &e);
		g->hard_at = 0;
	}
	tc_err_release(&e);
}

/* Copy the rank logs and keep the stored state in step with Slurm until it is done. */
static void fg_follow(struct fg *g)
{
	struct sigaction sa = { 0 }, old_int, old_term;
	sa.sa_handler = on_fg_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	fg_signals = 0;
	int64_t next_query = 0;
	bool final = false;
	while (!final) {
		int64_t now = now_mono_ms();
		fg_on_signals(g, now);
		follow_logs(g->f, g->world, g->log_dir.buf, g->o->quiet, false);
		if (now >= next_query) {
			struct slurm_jobinfo sj;
			struct tc_err e = TC_ERR_INIT;
			warn_if(jobinfo_query(g->slurm_job, &sj, &e) ||
					sync_state(g->st, g->id, g->slurm_job, &sj, &final, &e),
				&e);
			tc_err_release(&e);
			jobinfo_release(&sj);
			next_query = now + QUERY_MS;
		}
		if (!final)
			usleep(POLL_MS * 1000);
	}
	follow_logs(g->f, g->world, g->log_dir.buf, g->o->quiet, true);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
}

/* The end as the store has it: exit status 0 for succeeded, 1 otherwise. */
static int fg_outcome(struct fg *g, int *exit_status, struct tc_err *err)
{
	struct job_row j = { 0 };
	int rc = store_job_get(g->st, g->id, &j, err);
	if (rc)
		return rc;
	*exit_status = j.state == JOB_SUCCEEDED ? 0 : 1;
	if (*exit_status)
		say("job %s %s%s%s", g->id, job_state_name(j.state), j.root_cause ? ": " : "",
		    j.root_cause ? j.root_cause : "");
	else
		say("job %s %s", g->id, job_state_name(j.state));
	job_row_release(&j);
	return 0;
}

static int slurm_run(const struct spec *s, const struct launch_opts *o, char **job_id,
		     int *exit_status, struct tc_err *err)
{
	struct fg g = { .s = s, .o = o, .world = s->nodes * s->per_node, .log_dir = SBUF_INIT };
	*exit_status = 1;
	*job_id = NULL;
	g.exe = path_self_exe();
	g.home_abs = path_absolute(o->home, NULL);
	g.id = store_new_job_id();
	g.run_dir = run_dir_of(g.home_abs, g.id);
	int rc = fg_check(&g, err);
	if (rc) {
		free(g.id);
		goto out;
	}
	*job_id = g.id; /* the caller's from here on */
	if ((rc = store_open(o->home, &g.st, err)) || (rc = fg_record(&g, err)) ||
	    (rc = fg_submit(&g, err)))
		goto out;
	say("job %s (%s): %d nodes x %d %s workers, Slurm job %s, run folder %s", g.id, s->name,
	    s->nodes, s->per_node, s->device_type, g.slurm_job, g.run_dir);
	g.f = xcalloc((size_t)g.world, sizeof(*g.f));
	for (int r = 0; r < g.world; r++) {
		g.f[r].fd = -1;
		sbuf_init(&g.f[r].partial, 0);
	}
	sbuf_addf(&g.log_dir, "%s/logs", g.run_dir);
	fg_follow(&g);
	rc = fg_outcome(&g, exit_status, err);
out:
	for (int r = 0; g.f && r < g.world; r++) {
		if (g.f[r].fd >= 0)
			close(g.f[r].fd);
		sbuf_release(&g.f[r].partial);
	}
	free(g.f);
	store_close(g.st);
	free(g.run_dir);
	free(g.exe);
	free(g.home_abs);
	free(g.slurm_job);
	sbuf_release(&g.log_dir);
	return rc;
}

/* ---- the batch script's driver: one srun per attempt ---- */

static volatile sig_atomic_t batch_term, batch_fwd;
static volatile pid_t batch_srun;

static void on_batch_signal(int sig)
{
	if (sig == SIGUSR1 || sig == SIGUSR2) {
		/* B:USR1 warnings: pass them to the node supervisors through srun */
		if (batch_srun > 0)
			kill(batch_srun, sig);
		batch_fwd++;
		return;
	}
	batch_term = sig;
}

struct batch {
	const char *home, *job_id, *run_dir;
	char *exe;
	int nodes;
};

static int srun_attempt(void *ctx, const struct launch_attempt *a, bool *failed, bool *stopped,
			struct tc_err *err)
{
	struct batch *b = ctx;
	struct strvec argv = STRVEC_INIT;
	strvec_push(&argv, "srun");
	strvec_push(&argv, "--kill-on-bad-exit=1");
	strvec_pushf(&argv, "--nodes=%d", a->nodes);
	strvec_pushf(&argv, "--ntasks=%d", a->nodes);
	strvec_push(&argv, "--ntasks-per-node=1");
	strvec_push(&argv, "--export=ALL");
	strvec_push(&argv, b->exe);
	strvec_push(&argv, "supervise-node");
	strvec_push(&argv, b->job_id);
	strvec_pushf(&argv, "--attempt=%d", a->attempt);
	strvec_pushf(&argv, "--master=%s:%d", a->master_addr, a->master_port);
	if (a->resume_from)
		strvec_pushf(&argv, "--resume=%s", a->resume_from);
	*failed = *stopped = false;
	struct proc p = PROC_INIT;
	p.args = argv; /* taken over: proc_clear frees it */
	proc_env_inherit(&p.env);
	/* ours are handled here (on_batch_signal); srun gets its own defaults */
	p.default_sigs = PROC_SIG(SIGTERM) | PROC_SIG(SIGINT) | PROC_SIG(SIGUSR1) | PROC_SIG(SIGUSR2);
	int rc = proc_start(&p, err);
	if (rc) {
		proc_clear(&p);
		return rc;
	}
	batch_srun = p.pid;
	int status = 0;
	/* a failed wait leaves status 0: the nodes' results below still decide */
	struct tc_err ew = TC_ERR_INIT;
	if (proc_wait(&p, &status, &ew))
		status = 0;
	tc_err_release(&ew);
	proc_clear(&p);
	batch_srun = 0;
	if (batch_term) {
		*stopped = true;
		return 0;
	}
	/* nodes stopped by a signal and none failed: scancel --signal, --signal=TERM@ */
	int killed = 0, bad = 0;
	for (int n = 0; n < a->nodes; n++) {
		char *path = launch_node_result_path(b->run_dir, a->attempt, n);
		json_t *r = json_load_file(path, 0, NULL);
		free(path);
		const char *word = json_string_value(json_object_get(r, "state"));
		enum job_state state;
		if (word && job_state_parse(word, strlen(word), &state)) {
			killed += state == JOB_KILLED;
			bad += state == JOB_FAILED;
		}
		json_decref(r);
	}
	if (killed && !bad) {
		*stopped = true;
		return 0;
	}
	/* `trainctl stop` says so before its scancel: a stop, whatever the nodes saw */
	struct store *st = NULL;
	enum job_stop asked = JOB_STOP_NONE;
	struct tc_err e2 = TC_ERR_INIT;
	if (store_open(b->home, &st, &e2) == 0 && store_job_stop_reason(st, b->job_id, &asked, &e2) == 0 &&
	    asked == JOB_STOP_STOPPED)
		*stopped = true;
	else
		*failed = !exited_ok(status);
	store_close(st);
	tc_err_release(&e2);
	return 0;
}

int slurm_batch_main(const char *home, const char *job_id, int *exit_status, struct tc_err *err)
{
	struct store *st = NULL;
	struct job_row j = { 0 };
	struct spec *s = NULL;
	struct sbuf p = SBUF_INIT;
	struct batch b = { home, job_id, NULL, path_self_exe(), 0 };
	*exit_status = 1;
	int rc = store_open(home, &st, err);
	if (!rc)
		rc = store_job_get(st, job_id, &j, err);
	if (rc)
		goto out;
	b.run_dir = j.run_dir;
	sbuf_addf(&p, "%s/job.yaml", j.run_dir);
	if ((rc = spec_load(p.buf, &s, err)))
		goto fail;
	if (!b.exe) {
		rc = tc_error_errno(err, TC_ESYS, "cannot find the trainctl binary");
		goto fail;
	}
	const char *nodes = getenv("SLURM_JOB_NODELIST");
	if (nodes && (rc = store_slurm_set(st, job_id, getenv("SLURM_JOB_ID"), nodes, "RUNNING", err)))
		goto fail;
	struct sigaction sa = { 0 };
	sa.sa_handler = on_batch_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	struct launch_backend_ops ops = { srun_attempt, &b, nodes };
	store_close(st); /* launch_multinode keeps its own connection */
	st = NULL;
	rc = launch_multinode(s, home, job_id, &ops, exit_status, err);
	if (rc || *exit_status != 143 || batch_term)
		goto out;
	/*
	 * Stopped with the batch step untouched: `trainctl stop` or a
	 * --signal=TERM warning; Slurm would call it COMPLETED, so say killed.
	 */
	enum job_stop asked = JOB_STOP_NONE;
	if ((rc = store_open(home, &st, err)) || (rc = store_job_stop_reason(st, job_id, &asked, err)))
		goto out;
	struct sbuf why = SBUF_INIT;
	if (asked == JOB_STOP_STOPPED)
		sbuf_adds(&why, "stopped by trainctl stop (every node's workers got SIGTERM)");
	else
		sbuf_adds(&why, "the workers were stopped by a signal from Slurm");
	rc = jobs_finish(st, job_id, JOB_KILLED, 1, why.buf, why.buf, err);
	sbuf_release(&why);
	*exit_status = 0;
	goto out;
fail:
	if (st) {
		struct tc_err e2 = TC_ERR_INIT;
		jobs_finish(st, job_id, JOB_FAILED, tc_exit_status(rc), err->msg, err->msg, &e2);
		tc_err_release(&e2);
	}
out:
	spec_free(s);
	free(b.exe);
	sbuf_release(&p);
	job_row_release(&j);
	store_close(st);
	return rc;
}

/* ---- one node: `trainctl supervise-node` under srun ---- */

static int env_int(const char *name, int *out, struct tc_err *err)
{
	const char *v = getenv(name);
	long n;
	if (!v || !parse_long(v, 0, 1 << 20, &n))
		return tc_error(err, TC_EUSAGE, "supervise-node: $%s is %s (run it under srun)", name,
				v ? "not a number" : "not set");
	*out = (int)n;
	return 0;
}

int slurm_node_main(const struct slurm_node_args *a, int *exit_status, struct tc_err *err)
{
	struct launch_node nd = { 0 };
	struct store *st = NULL;
	struct job_row j = { 0 };
	struct spec *s = NULL;
	struct sbuf p = SBUF_INIT;
	char *addr = NULL, *id = NULL;
	*exit_status = 1;
	int rc = env_int("SLURM_NODEID", &nd.node_rank, err);
	if (!rc)
		rc = env_int("SLURM_NNODES", &nd.nnodes, err);
	const char *colon = a->master ? strrchr(a->master, ':') : NULL;
	long port = 0;
	if (!rc && (!colon || colon == a->master || !parse_long(colon + 1, 1, 65535, &port)))
		rc = tc_error(err, TC_EUSAGE, "supervise-node: --master takes ADDR:PORT");
	if (rc)
		goto out;
	addr = xstrndup(a->master, (size_t)(colon - a->master));
	nd.master_addr = addr;
	nd.master_port = (int)port;
	nd.attempt = a->attempt;
	nd.resume_from = a->resume_from;
	if ((rc = store_open(a->home, &st, err)) || (rc = store_job_get(st, a->job_id, &j, err)))
		goto out;
	store_close(st);
	st = NULL;
	sbuf_addf(&p, "%s/job.yaml", j.run_dir);
	if ((rc = spec_load(p.buf, &s, err)))
		goto out;
	if (s->nodes != nd.nnodes) {
		rc = tc_error(err, TC_EUSAGE, "supervise-node: the job wants %d nodes, srun gave %d",
			      s->nodes, nd.nnodes);
		goto out;
	}
	struct launch_opts lo = { .home = a->home, .quiet = true, .job_id = a->job_id, .node = &nd };
	rc = launch_run(s, &lo, &id, exit_status, err);
out:
	free(id);
	free(addr);
	spec_free(s);
	sbuf_release(&p);
	job_row_release(&j);
	store_close(st);
	return rc;
}

const struct backend_ops backend_slurm = {
	.id = BACKEND_SLURM,
	.run = slurm_run,
	.submit = slurm_submit,
	.stop = slurm_stop,
	.pause = NULL, /* Slurm suspends only for its admins: stop, or let Slurm preempt */
	.resume = NULL,
	.reconcile = slurm_reconcile,
	.settle = slurm_settle,
	.to_json = slurm_to_json,
};
