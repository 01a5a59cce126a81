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
 *      ended.  The driver leaves such an end to them even when its nodes
 *      saw it before its own SIGTERM came (slurm_batch.c: slurm_ends_it),
 *      and the first end recorded stays (jobs_finish): who gets there first
 *      does not change the outcome.  An ended job needs no Slurm: the
 *      server, which follows its jobs, asks until Slurm's own state for it
 *      is final (slurm_settle).
 *  (3) Stopping: `scancel --signal=TERM` reaches the node supervisors only
 *      (not srun, which would answer SIGTERM with SIGKILL), so workers get
 *      the job's grace_seconds; a job still there after that is cancelled.
 *      Slurm's own SIGTERM (scancel, time limit, preemption) reaches every
 *      supervisor directly, with KillWait as the grace.
 *  (4) A signal given by slurm: {signal: USR1@120} reaches the supervisors,
 *      which pass it to their workers (a checkpoint warning); sent to the
 *      batch step only (B:USR1) the driver passes it on through srun.
 *
 * THE FILES
 *   slurm.c        Slurm's commands, the stored job kept in step with
 *                  Slurm (reconcile, settle), submission, stopping, and
 *                  the ops table backend_slurm
 *   slurm_run.c    `trainctl run` in the foreground (slurm_run)
 *   slurm_batch.c  inside the allocation: slurm-batch, supervise-node
 *   sbatch.c       job.sbatch and the map of Slurm's job states
 */
#include "backend/backend.h"
#include "backend/slurm_int.h"
#include "core/proc.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "secret/secret.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- running Slurm's commands ---- */

/*
 * Run the command as be says (backend.h: a server's job gets its allowlist
 * and runs as its account); gids is where the account's groups are kept
 * until the command has run.
 */
int slurm_as_job_user(const struct backend_env *be, struct proc *p, gid_t **gids,
		      struct tc_err *err)
{
	if (!be || !be->env) {
		proc_env_inherit(&p->env);
		return 0;
	}
	strvec_pushv(&p->env, (const char *const *)be->env->v);
	if (!be->user || geteuid() != 0 || !strcmp(be->user, "root"))
		return 0;
	struct passwd *pw = getpwnam(be->user);
	if (!pw || pw->pw_uid == 0)
		return tc_error(err, TC_EBACKEND, "slurm: job user '%s' %s", be->user,
				pw ? "maps to root" : "has no account on this machine");
	int n = 64;
	*gids = xcalloc((size_t)n, sizeof(gid_t));
	if (getgrouplist(pw->pw_name, pw->pw_gid, *gids, &n) < 0) {
		free(*gids);
		*gids = xcalloc((size_t)n, sizeof(gid_t));
		if (getgrouplist(pw->pw_name, pw->pw_gid, *gids, &n) < 0)
			n = 1, (*gids)[0] = pw->pw_gid;
	}
	p->set_groups = p->set_gid = p->set_uid = true;
	p->groups = *gids;
	p->ngroups = (size_t)n;
	p->gid = pw->pw_gid;
	p->uid = pw->pw_uid;
	/* the job is the account's: so are its home and names (Slurm passes them on) */
	env_set(&p->env, "HOME", pw->pw_dir);
	env_set(&p->env, "USER", pw->pw_name);
	env_set(&p->env, "LOGNAME", pw->pw_name);
	p->cwd = "/";
	return 0;
}

static int command_env(const struct backend_env *be, const char *const *argv,
		       const char *const *env_add, const char *input, struct sbuf *out,
		       struct sbuf *errout, int *status, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	gid_t *gids = NULL;
	strvec_pushv(&p.args, argv);
	if (slurm_as_job_user(be, &p, &gids, err)) {
		proc_clear(&p);
		return TC_EBACKEND;
	}
	for (size_t i = 0; env_add && env_add[i]; i++) {
		const char *eq = strchr(env_add[i], '=');
		if (!eq)
			continue;
		char *k = xstrndup(env_add[i], (size_t)(eq - env_add[i]));
		env_set(&p.env, k, eq + 1);
		free(k);
	}
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
	free(gids);
	return rc;
}

int slurm_command(const char *const *argv, const char *input, struct sbuf *out,
		  struct sbuf *errout, int *status, struct tc_err *err)
{
	return command_env(NULL, argv, NULL, input, out, errout, status, err);
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

/*
 * Errors that mean Slurm itself is unreachable or broken (exit 3), not the
 * request (2).  Installed but not configured: no slurm.conf makes the
 * client look for its controller in DNS SRV records ("configless"), which
 * fails with "Could not establish a configuration source".
 */
static bool infrastructure_error(const char *msg)
{
	static const char *const words[] = {
		"Unable to contact slurm controller", "Unable to process configuration file",
		"Could not establish a configuration source", "failed to fetch config",
		"s_p_parse_file", "Socket timed out", "Zero Bytes were transmitted",
		"Communication connection failure", "Connection refused", "Munge", "munge",
		"Protocol authentication error", "Slurm backup controller in standby mode", NULL,
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
	int rc;
	if (infrastructure_error(q.buf))
		rc = tc_error(err, TC_EBACKEND,
			      "slurm: Slurm is not configured or its controller is not reachable "
			      "(SLURM_CONF, else /etc/slurm/slurm.conf): %s", q.buf);
	else
		rc = tc_error(err, TC_EINPUT, "slurm: %s: %s", what, q.buf);
	sbuf_release(&q);
	return rc;
}

bool slurm_exited_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- the state of a Slurm job ---- */

void slurm_jobinfo_release(struct slurm_jobinfo *j)
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

int slurm_jobinfo_query(const char *id, struct slurm_jobinfo *out, struct tc_err *err)
{
	const char *argv[] = { "scontrol", "-o", "show", "job", id, NULL };
	struct sbuf o = SBUF_INIT, e = SBUF_INIT;
	int status = 0;
	memset(out, 0, sizeof(*out));
	int rc = slurm_command(argv, NULL, &o, &e, &status, err);
	if (!rc && slurm_exited_ok(status)) {
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
		if (slurm_command(sacct, NULL, &o2, &e2, &status, &ignore) == 0 && slurm_exited_ok(status) &&
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
	enum job_state end = known ? mapped : JOB_FAILED;
	/* its driver had no time to say so (a stop that ended in a cancel) */
	if (j->stop_reason == JOB_STOP_STOPPED && end == JOB_KILLED)
		sbuf_adds(&why, "stopped by trainctl stop: ");
	slurm_why(&why, slurm_id, "ended", sj);
	if (!strncmp(sj->state, "TIMEOUT", 7))
		sbuf_adds(&why, ": time limit reached");
	else if (!strncmp(sj->state, "PREEMPTED", 9))
		sbuf_adds(&why, ": preempted and not requeued");
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
int slurm_sync_state(struct store *st, const char *job_id, const char *slurm_id,
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
	int rc = slurm_jobinfo_query(j->slurm_job, &sj, err);
	if (!rc)
		rc = slurm_sync_state(st, j->id, j->slurm_job, &sj, final, err);
	slurm_jobinfo_release(&sj);
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
	/* its supervisors report to a hub that is gone (the terminal of run closed): a new one */
	slurm_hub_revive(st, j);
	/*
	 * That hub follows Slurm itself: it pulls what the nodes left in their
	 * journals before it records Slurm's end (slurm_hub.c: follow_slurm).
	 */
	char *runs = path_dirname(j->run_dir), *home = path_dirname(runs);
	bool held = slurm_hub_held(home, j->id);
	free(runs);
	free(home);
	if (held)
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

char *slurm_run_dir_of(const char *home, const char *job_id)
{
	struct sbuf sb = SBUF_INIT;
	run_path(&sb, home, job_id, RUN_DIR, 0);
	return sbuf_detach(&sb);
}

/* sbatch --test-only: refused requests get Slurm's words and nothing is recorded. */
int slurm_test_only(const char *script, struct tc_err *err)
{
	const char *argv[] = { "sbatch", "--test-only", NULL };
	struct sbuf o = SBUF_INIT, e = SBUF_INIT;
	int status = 0;
	int rc = slurm_command(argv, script, &o, &e, &status, err);
	if (!rc && !slurm_exited_ok(status))
		rc = command_error("the cluster refused the job", status, &o, &e, err);
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

int slurm_submit(const struct backend_env *env, struct store *st, const struct spec *s,
		 const char *job_id, struct tc_err *err)
{
	const char *hub = slurm_server_hub();
	if (!hub)
		return slurm_submit_env(env, NULL, st, s, job_id, err);
	/* the server is the job's hub: its supervisors report to it */
	struct strvec add = STRVEC_INIT;
	int rc = slurm_hub_register(st, job_id, s, hub, &add, err);
	if (!rc && env->user) {
		/* the account cannot write the server's state folder: its journal goes in its run folder */
		char *home_abs = path_absolute(env->home, NULL);
		char *rd = slurm_run_dir_of(home_abs, job_id);
		strvec_pushf(&add, "TRAINCTL_HUB_JOURNAL=%s/journal", rd);
		free(rd);
		free(home_abs);
		/*
		 * The job's secrets, from its user's store on the server: with the
		 * hub's variables, in sbatch's environment only (the nodes'
		 * supervisors take them out of theirs, secret.h)
		 */
		char *dir = secret_user_dir(env->home, env->user);
		char *text = NULL;
		rc = secret_handover(s, dir, &text, err);
		if (!rc && *text)
			strvec_pushf(&add, "%s=%s", SECRET_ENV_VAR, text);
		if (text)
			explicit_bzero(text, strlen(text));
		free(text);
		free(dir);
	}
	if (!rc)
		rc = slurm_submit_env(env, (const char *const *)add.v, st, s, job_id, err);
	for (size_t i = 0; i < add.nr; i++)
		memset(add.v[i], 0, strlen(add.v[i]));
	strvec_clear(&add);
	return rc;
}

int slurm_submit_env(const struct backend_env *env, const char *const *env_add,
		     struct store *st, const struct spec *s, const char *job_id,
		     struct tc_err *err)
{
	char *exe = path_self_exe();
	char *home_abs = path_absolute(env->home, NULL);
	char *run_dir = slurm_run_dir_of(home_abs, job_id);
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
	/*
	 * A job that reports to a hub needs no shared run folder, so Slurm's
	 * output goes where every node has a folder (a missing one fails the
	 * job); the driver sends it on to logs/slurm-<id>.out (slurm_batch.c).
	 * The command line overrides job.sbatch's #SBATCH --output.
	 */
	struct sbuf outopt = SBUF_INIT;
	sbuf_addf(&outopt, "--output=%s", SLURM_HUB_OUTPUT_DIR "/trainctl-");
	sbuf_addf(&outopt, "%s-%%j.out", job_id);
	const char *argv[] = { "sbatch", "--parsable", path.buf, NULL, NULL };
	if (env_add) {
		argv[2] = outopt.buf;
		argv[3] = path.buf;
	}
	if ((rc = command_env(env, argv, env_add, NULL, &o, &e, &status, err)))
		goto out;
	if (!slurm_exited_ok(status)) {
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
	sbuf_release(&outopt);
	sbuf_release(&path);
	sbuf_release(&o);
	sbuf_release(&e);
	return rc;
}

/* ---- stopping (design note 3) ---- */

int slurm_scancel(const char *id, const char *signal_name, struct tc_err *err)
{
	return slurm_scancel_as(NULL, id, signal_name, err);
}

int slurm_scancel_as(const struct backend_env *be, const char *id, const char *signal_name,
		     struct tc_err *err)
{
	struct sbuf sig = SBUF_INIT, o = SBUF_INIT, e = SBUF_INIT;
	const char *argv[4] = { "scancel", id, NULL, NULL };
	if (signal_name) {
		sbuf_addf(&sig, "--signal=%s", signal_name);
		argv[1] = sig.buf;
		argv[2] = id;
	}
	int status = 0;
	int rc = command_env(be, argv, NULL, NULL, &o, &e, &status, err);
	if (!rc && !slurm_exited_ok(status))
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
	if (slurm_jobinfo_query(id, &sj, &e) == 0 && sj.state) {
		slurm_state_map(sj.state, &ignored, &final);
		done = final;
	}
	slurm_jobinfo_release(&sj);
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
	if ((rc = slurm_scancel_as(env, j->slurm_job, "TERM", err)))
		return rc;
	double deadline = now_wall() + (double)grace + 10;
	while (now_wall() < deadline && !slurm_done(j->slurm_job))
		usleep(250 * 1000);
	if (!slurm_done(j->slurm_job))
		rc = slurm_scancel_as(env, j->slurm_job, NULL, err);
	return rc;
}

/* ---- the ops table (backend.h) ---- */

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
