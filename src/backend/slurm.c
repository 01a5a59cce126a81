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
 *      waits, or ps / show / logs (slurm_reconcile).
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
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
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
		if (!store_state_terminal(j.state)) {
			struct sbuf why = SBUF_INIT;
			sbuf_addf(&why, "Slurm no longer knows job %s and no end was recorded", slurm_id);
			rc = store_job_finish(st, job_id, "lost", 3, why.buf, why.buf, err);
			sbuf_release(&why);
		}
		*final = true;
		goto out;
	}
	if ((rc = store_slurm_set(st, job_id, NULL, sj->nodes, sj->state, err)))
		goto out;
	bool slurm_final;
	const char *mapped = slurm_state_map(sj->state, &slurm_final);
	if (slurm_final) {
		*final = true;
		if (store_state_terminal(j.state))
			goto out; /* the driver recorded the outcome */
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "Slurm job %s ended %s", slurm_id, sj->state);
		if (sj->reason && strcmp(sj->reason, "None") != 0)
			sbuf_addf(&why, " (%s)", sj->reason);
		if (!strncmp(sj->state, "TIMEOUT", 7))
			sbuf_adds(&why, ": time limit reached");
		else if (!strncmp(sj->state, "PREEMPTED", 9))
			sbuf_adds(&why, ": preempted and not requeued");
		rc = store_job_finish(st, job_id, mapped ? mapped : "failed",
				      mapped && !strcmp(mapped, "succeeded") ? 0 : 1, why.buf, why.buf,
				      err);
		sbuf_release(&why);
		goto out;
	}
	if (!mapped)
		goto out;
	/* queued -> starting, running -> queued (requeue), running <-> paused */
	bool change = false;
	if (!strcmp(mapped, "queued"))
		change = strcmp(j.state, "queued") != 0 && !store_state_terminal(j.state);
	else if (!strcmp(mapped, "starting"))
		change = !strcmp(j.state, "queued");
	else if (!strcmp(mapped, "paused"))
		change = strcmp(j.state, "paused") != 0;
	else if (!strcmp(mapped, "running"))
		change = !strcmp(j.state, "paused") || !strcmp(j.state, "queued");
	if (change) {
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "Slurm job %s is %s", slurm_id, sj->state);
		if (sj->reason && strcmp(sj->reason, "None") != 0)
			sbuf_addf(&why, " (%s)", sj->reason);
		if (!strcmp(mapped, "queued") && sj->restarts)
			sbuf_addf(&why, ": requeued %d time%s", sj->restarts, sj->restarts == 1 ? "" : "s");
		/* running itself is the driver's to record (it names the attempt) */
		rc = store_job_set_state(st, job_id, !strcmp(mapped, "running") ? "starting" : mapped,
					 why.buf, err);
		sbuf_release(&why);
	}
out:
	job_row_release(&j);
	return rc;
}

static int slurm_reconcile(struct store *st, struct job_row *j, struct tc_err *err)
{
	struct store_slurm x;
	int rc = store_slurm_get(st, j->id, &x, err);
	bool was_final = false;
	if (!rc && x.state)
		slurm_state_map(x.state, &was_final);
	/*
	 * An ended job is asked about once more while its last Slurm state seen
	 * is not final: the driver records the end before its batch step is gone
	 * (a job followed by the server, which does not wait for that).
	 */
	if (rc || !x.job || (store_state_terminal(j->state) && (!x.state || was_final))) {
		store_slurm_release(&x);
		return rc;
	}
	struct slurm_jobinfo sj;
	bool final;
	rc = jobinfo_query(x.job, &sj, err);
	if (!rc)
		rc = sync_state(st, j->id, x.job, &sj, &final, err);
	jobinfo_release(&sj);
	store_slurm_release(&x);
	if (!rc) {
		struct job_row fresh = { 0 };
		if (store_job_get(st, j->id, &fresh, err) == 0) {
			job_row_release(j);
			*j = fresh;
		}
	}
	return rc;
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

static int slurm_submit(const char *home, struct store *st, const struct spec *s,
			const char *job_id, struct tc_err *err)
{
	char *exe = path_self_exe();
	char *home_abs = path_absolute(home, NULL);
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
		rc = store_job_set_state(st, job_id, "queued", why.buf, err);
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
	if (jobinfo_query(id, &sj, &e) == 0 && sj.state) {
		slurm_state_map(sj.state, &final);
		done = final;
	}
	jobinfo_release(&sj);
	tc_err_release(&e);
	return done;
}

static int slurm_stop(const char *home, struct store *st, const struct job_row *j,
		      struct tc_err *err)
{
	(void)home;
	struct store_slurm x;
	int rc = store_slurm_get(st, j->id, &x, err);
	if (rc)
		return rc;
	if (!x.job) {
		rc = tc_error(err, TC_EUSAGE, "stop: job %s was never submitted to Slurm", j->id);
		goto out;
	}
	json_t *spec = json_loads(j->spec_json, 0, NULL);
	json_int_t grace = json_integer_value(
		json_object_get(json_object_get(spec, "restart"), "grace_seconds"));
	json_decref(spec);
	if ((rc = store_job_set_stop_reason(st, j->id, "stopped", err)))
		goto out;
	printf("stopping %s (Slurm job %s: SIGTERM to its supervisors, %lld s grace)\n", j->id,
	       x.job, (long long)grace);
	fflush(stdout);
	if ((rc = scancel(x.job, "TERM", err)))
		goto out;
	double deadline = now_wall() + (double)grace + 10;
	while (now_wall() < deadline && !slurm_done(x.job))
		usleep(250 * 1000);
	if (!slurm_done(x.job))
		rc = scancel(x.job, NULL, err);
out:
	store_slurm_release(&x);
	return rc;
}

/* ---- `trainctl run` in the foreground ---- */

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

static int slurm_run(const struct spec *s, const struct launch_opts *o, char **job_id,
		     int *exit_status, struct tc_err *err)
{
	struct store *st = NULL;
	char *run_dir = NULL, *script = NULL, *exe = NULL, *home_abs = NULL;
	struct store_slurm x = { 0 };
	struct follow *f = NULL;
	struct sbuf p = SBUF_INIT;
	int world = s->nodes * s->per_node;
	int rc;
	*exit_status = 1;
	*job_id = NULL;

	exe = path_self_exe();
	home_abs = path_absolute(o->home, NULL);
	char *id = store_new_job_id();
	run_dir = run_dir_of(home_abs, id);
	{
		/* design note 1: ask before recording anything */
		struct slurm_script_in in = { s, id, home_abs, run_dir, exe ? exe : "trainctl" };
		script = slurm_script(&in);
		rc = test_only(script, err);
	}
	if (rc) {
		free(id);
		goto out;
	}
	*job_id = id;
	if ((rc = store_open(o->home, &st, err)))
		goto out;
	const char *sub[] = { "logs", "output", "data" };
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", run_dir, sub[i]);
		if ((rc = mkdir_p(p.buf, err)))
			goto out;
	}
	char *yaml = spec_to_yaml(s);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/job.yaml", run_dir);
	rc = write_file_atomic(p.buf, yaml, strlen(yaml), err);
	free(yaml);
	if (rc)
		goto out;
	char *spec_json = spec_to_json(s);
	struct job_row row = {
		.id = id, .name = s->name, .state = "queued", .run_dir = run_dir,
		.spec_json = spec_json, .created = now_wall(), .world_size = world,
	};
	rc = store_job_create(st, &row, err);
	free(spec_json);
	if (!rc)
		rc = store_slurm_set(st, id, NULL, NULL, NULL, err);
	if (!rc)
		rc = slurm_submit(o->home, st, s, id, err);
	if (rc) {
		struct tc_err e2 = TC_ERR_INIT;
		store_job_finish(st, id, "failed", tc_exit_status(rc), err->msg, err->msg, &e2);
		tc_err_release(&e2);
		goto out;
	}
	if ((rc = store_slurm_get(st, id, &x, err)))
		goto out;
	fprintf(stderr, "trainctl: job %s (%s): %d nodes x %d %s workers, Slurm job %s, run folder %s\n",
		id, s->name, s->nodes, s->per_node, s->device_type, x.job, run_dir);

	struct sigaction sa = { 0 }, old_int, old_term;
	sa.sa_handler = on_fg_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	fg_signals = 0;
	f = xcalloc((size_t)world, sizeof(*f));
	for (int r = 0; r < world; r++) {
		f[r].fd = -1;
		sbuf_init(&f[r].partial, 0);
	}
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/logs", run_dir);
	int64_t next_query = 0, hard_at = 0;
	int handled = 0;
	bool final = false;
	while (!final) {
		int64_t now = now_mono_ms();
		if (fg_signals > handled) {
			handled = fg_signals;
			struct tc_err e2 = TC_ERR_INIT;
			if (handled == 1) {
				fprintf(stderr, "trainctl: stopping Slurm job %s (SIGTERM to its supervisors, %d s grace)\n",
					x.job, s->grace_seconds);
				if (store_job_set_stop_reason(st, id, "stopped", &e2) || scancel(x.job, "TERM", &e2))
					fprintf(stderr, "trainctl: warning: %s\n", e2.msg);
				hard_at = now + (int64_t)s->grace_seconds * 1000 + 10000;
			} else {
				fprintf(stderr, "trainctl: cancelling Slurm job %s now\n", x.job);
				if (scancel(x.job, NULL, &e2))
					fprintf(stderr, "trainctl: warning: %s\n", e2.msg);
				hard_at = 0;
			}
			tc_err_release(&e2);
		}
		if (hard_at && now >= hard_at) {
			struct tc_err e2 = TC_ERR_INIT;
			if (scancel(x.job, NULL, &e2))
				fprintf(stderr, "trainctl: warning: %s\n", e2.msg);
			tc_err_release(&e2);
			hard_at = 0;
		}
		follow_logs(f, world, p.buf, o->quiet, false);
		if (now >= next_query) {
			struct slurm_jobinfo sj;
			struct tc_err e2 = TC_ERR_INIT;
			if (jobinfo_query(x.job, &sj, &e2) || sync_state(st, id, x.job, &sj, &final, &e2))
				fprintf(stderr, "trainctl: warning: %s\n", e2.msg);
			tc_err_release(&e2);
			jobinfo_release(&sj);
			next_query = now + QUERY_MS;
		}
		if (!final)
			usleep(POLL_MS * 1000);
	}
	follow_logs(f, world, p.buf, o->quiet, true);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	struct job_row j = { 0 };
	if ((rc = store_job_get(st, id, &j, err)))
		goto out;
	*exit_status = !strcmp(j.state, "succeeded") ? 0 : 1;
	if (*exit_status)
		fprintf(stderr, "trainctl: job %s %s%s%s\n", id, j.state, j.root_cause ? ": " : "",
			j.root_cause ? j.root_cause : "");
	else
		fprintf(stderr, "trainctl: job %s succeeded\n", id);
	job_row_release(&j);
out:
	for (int r = 0; f && r < world; r++) {
		if (f[r].fd >= 0)
			close(f[r].fd);
		sbuf_release(&f[r].partial);
	}
	free(f);
	store_slurm_release(&x);
	store_close(st);
	free(run_dir);
	free(script);
	free(exe);
	free(home_abs);
	sbuf_release(&p);
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
		const char *state = json_string_value(json_object_get(r, "state"));
		if (state && !strcmp(state, "killed"))
			killed++;
		if (state && !strcmp(state, "failed"))
			bad++;
		json_decref(r);
	}
	if (killed && !bad) {
		*stopped = true;
		return 0;
	}
	/* `trainctl stop` says so before its scancel: a stop, whatever the nodes saw */
	struct store *st = NULL;
	char *asked = NULL;
	struct tc_err e2 = TC_ERR_INIT;
	if (store_open(b->home, &st, &e2) == 0 && store_job_stop_reason(st, b->job_id, &asked, &e2) == 0 &&
	    asked && !strcmp(asked, "stopped")) {
		*stopped = true;
		free(asked);
		store_close(st);
		return 0;
	}
	free(asked);
	store_close(st);
	tc_err_release(&e2);
	*failed = !exited_ok(status);
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
	char *asked = NULL;
	if ((rc = store_open(home, &st, err)) || (rc = store_job_stop_reason(st, job_id, &asked, err)))
		goto out;
	struct sbuf why = SBUF_INIT;
	if (asked && !strcmp(asked, "stopped"))
		sbuf_adds(&why, "stopped by trainctl stop (every node's workers got SIGTERM)");
	else
		sbuf_adds(&why, "the workers were stopped by a signal from Slurm");
	rc = store_job_finish(st, job_id, "killed", 1, why.buf, why.buf, err);
	sbuf_release(&why);
	free(asked);
	*exit_status = 0;
	goto out;
fail:
	if (st) {
		struct tc_err e2 = TC_ERR_INIT;
		store_job_finish(st, job_id, "failed", tc_exit_status(rc), err->msg, err->msg, &e2);
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
	.name = "slurm",
	.run = slurm_run,
	.submit = slurm_submit,
	.stop = slurm_stop,
	.reconcile = slurm_reconcile,
};
