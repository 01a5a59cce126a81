/*
 * external.c -- the server's jobs whose backend queues and runs them
 * itself (slurm, backend_ops.submit): submitted when the loop dequeues
 * them, their stored state following their backend's record, what their
 * nodes left pulled in, and their ends settled (backend_ops.settle).
 * Called by the loop (server.c) with s->mu held.
 */
#include "server/server_int.h"
#include "backend/backend.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "report/report.h"
#include "server/srvlog.h"
#include "spec/spec.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/*
 * A root server's Slurm job runs as its account from the batch script on
 * (sbatch as the user), and its driver and nodes write in its run folder:
 * the folder and the subfolders we just made are handed to the account
 * (opened O_NOFOLLOW, each checked to be ours first).  Nothing to do for
 * root's own jobs or an unprivileged server.
 */
static int hand_run_dir(struct srv *s, const struct sjob *j, const char *const *sub, size_t nsub,
			struct tc_err *err)
{
	(void)s;
	struct passwd *pw = geteuid() == 0 && strcmp(j->user, "root") ? getpwnam(j->user) : NULL;
	if (!pw || pw->pw_uid == 0)
		return 0;
	int rc = 0;
	struct sbuf p = SBUF_INIT;
	for (size_t i = 0; i <= nsub && !rc; i++) {
		sbuf_reset(&p);
		sbuf_adds(&p, j->run_dir);
		if (i < nsub)
			sbuf_addf(&p, "/%s", sub[i]);
		int fd = open(p.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat sb;
		if (fd < 0 || fstat(fd, &sb) < 0)
			rc = tc_error_errno(err, TC_ESYS, "cannot hand %s to %s", p.buf, j->user);
		else if (sb.st_uid == pw->pw_uid) /* handed already (submitted again) */
			;
		else if (sb.st_uid != 0)
			rc = tc_error(err, TC_ESYS, "%s belongs to uid %u: not handed to %s", p.buf,
				      (unsigned)sb.st_uid, j->user);
		else if (fchown(fd, pw->pw_uid, pw->pw_gid) < 0 || fchmod(fd, 0700) < 0)
			rc = tc_error_errno(err, TC_ESYS, "cannot hand %s to %s", p.buf, j->user);
		if (fd >= 0)
			close(fd);
	}
	sbuf_release(&p);
	return rc;
}

/*
 * The team's Slurm account and qos (teams: NAME: slurm:) go on the job's
 * sbatch; Slurm's fair share and limits then apply to it, not ours.  A
 * team gone from the file (reload) charges nothing: the spec's own stay.
 */
static void charge_team(struct srv *s, const struct sjob *j, struct spec *sp)
{
	const struct team *t = teams_find(&s->teams, j->team);
	if (!t || !t->slurm_account)
		return;
	struct sbuf said = SBUF_INIT;
	slurm_spec_charge(sp, t->slurm_account, t->slurm_qos, &said);
	if (said.len)
		srvlog_act(s->o.quiet, "job %s: %s", j->id, said.buf);
	sbuf_release(&said);
}

/*
 * A backend with a queue of its own (slurm) gets the queued job j (sbatch of
 * job.sbatch in its run folder); from then on it decides where and when the
 * job runs and srv_poll_external follows it.  A refused submission ends the job
 * failed and forgets it.
 */
void srv_submit_external(struct srv *s, struct sjob *j)
{
	/* sbatch runs as the job's account, with our allowlist and never our credentials (jobenv.c) */
	struct strvec jenv = STRVEC_INIT;
	srv_job_env(environ, s->o.pass_env, &jenv);
	srv_notify_env(s->o.notify, s->o.nnotify, &jenv); /* the server's hooks: events only */
	struct backend_env env = { .home = s->home, .say = srv_say, .say_arg = s, .env = &jenv,
				   .user = j->user };
	struct tc_err err = TC_ERR_INIT;
	struct spec *sp = NULL;
	struct sbuf p = SBUF_INIT;
	int rc = 0;
	const char *sub[] = { "logs", "output", "data" };
	for (size_t i = 0; !rc && i < sizeof(sub) / sizeof(sub[0]); i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", j->run_dir, sub[i]);
		rc = mkdir_p(p.buf, &err);
	}
	sbuf_reset(&p);
	run_path(&p, j->run_dir, NULL, RUN_SPEC, 0);
	if (!rc)
		rc = spec_load(p.buf, &sp, &err);
	if (!rc)
		charge_team(s, j, sp);
	if (!rc)
		rc = hand_run_dir(s, j, sub, sizeof(sub) / sizeof(sub[0]), &err);
	if (!rc)
		rc = j->be->submit(&env, s->st, sp, j->id, &err);
	if (!rc) {
		j->st = SJ_RUNNING;
		j->next_poll = now_wall() + 1;
		s->dirty = true;
	} else {
		struct tc_err e2 = TC_ERR_INIT;
		if (jobs_finish(s->st, j->id, JOB_FAILED, tc_exit_status(rc), err.msg, err.msg, &e2))
			srvlog_act(s->o.quiet, "warning: %s", e2.msg);
		tc_err_release(&e2);
		srvlog_act(s->o.quiet, "job %s: %s", j->id, err.msg);
		srv_forget(s, j->id);
	}
	spec_free(sp);
	sbuf_release(&p);
	tc_err_release(&err);
	strvec_clear(&jenv);
}

/*
 * Does the end of job `id` wait for what its nodes left (sjob.pull)?  One
 * step of the pull: started once its backend is done with the job, as the
 * job's account with our allowlist (like its sbatch), then followed until
 * it has ended.  False once there is nothing (more) to wait for.
 */
static bool pull_pending(struct srv *s, const char *id, bool *pull, struct backend_pull **p)
{
	struct sbuf said = SBUF_INIT;
	if (*p) {
		if (!backend_pull_done(*p, &said))
			return true;
		srv_say(s, said.buf);
		sbuf_release(&said);
		backend_pull_free(*p);
		*p = NULL;
		*pull = false;
		return false;
	}
	if (!*pull)
		return false;
	struct job_row r = { 0 };
	struct tc_err err = TC_ERR_INIT;
	struct strvec jenv = STRVEC_INIT;
	bool later = false;
	struct hub *h = srv_hub(s, &err);
	int rc = h ? store_job_get(s->st, id, &r, &err) : err.code;
	if (!rc) {
		srv_job_env(environ, s->o.pass_env, &jenv);
		struct backend_env env = { .home = s->home, .say = srv_say, .say_arg = s, .env = &jenv,
					   .user = r.user };
		rc = backend_pull_start(&env, s->st, h, id, &later, p, &err);
	}
	if (rc)
		srvlog_act(s->o.quiet, "warning: job %s: cannot take what its nodes left: %s", id, err.msg);
	if (rc || (!*p && !later))
		*pull = false; /* nothing to take, or no way to: its end as Slurm has it */
	strvec_clear(&jenv);
	job_row_release(&r);
	tc_err_release(&err);
	return *p != NULL;
}

/* Follow an ended job's backend record for a while (backend_ops.settle). */
void srv_settle_add(struct srv *s, struct sjob *j)
{
	if (!j->be->settle)
		return;
	XGROW(s->settling, s->nsettling + 1, s->settling_alloc);
	double now = now_wall();
	s->settling[s->nsettling++] = (struct settle){ xstrdup(j->id), j->be, now + 1, now + 600,
						       j->pull, j->pulling };
	j->pulling = NULL; /* the settling entry's now */
}

/*
 * A job whose hub this server is (its nodes reported here; no database on
 * them): the server writes its report.json once Slurm is done with it, as
 * the foreground run and `trainctl hub` do for theirs.
 */
static void settled_report(struct srv *s, const char *id)
{
	char *sha = NULL, *url = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (store_hub_job_get(s->st, id, &sha, &url, &err) == 0)
		report_job_end(s->st, id, NULL, srv_say, s);
	free(sha);
	free(url);
	tc_err_release(&err);
}

static void settle_jobs(struct srv *s, double now)
{
	for (size_t i = 0; i < s->nsettling;) {
		struct settle *x = &s->settling[i];
		if (now < x->next) {
			i++;
			continue;
		}
		struct job_row r = { 0 };
		struct tc_err err = TC_ERR_INIT;
		bool done = true;
		int rc = store_job_get(s->st, x->id, &r, &err);
		if (!rc)
			rc = x->be->settle(s->st, &r, &done, &err);
		if (rc && rc != TC_ENOTFOUND) {
			srvlog_act(s->o.quiet, "warning: job %s: %s", x->id, err.msg);
			done = false;
		}
		job_row_release(&r);
		tc_err_release(&err);
		/* an end that came while what its nodes left waits on them: that first */
		if ((!done && now < x->until) ||
		    (now < x->until + 600 && pull_pending(s, x->id, &x->pull, &x->pulling))) {
			x->next = now + (x->pulling ? 1 : 2);
			i++;
			continue;
		}
		settled_report(s, x->id);
		backend_pull_free(x->pulling);
		free(x->id);
		s->settling[i] = s->settling[--s->nsettling];
	}
}

/* Their stored state follows their backend (backend_reconcile, as ps and show do). */
void srv_poll_external(struct srv *s)
{
	double now = now_wall();
	settle_jobs(s, now);
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = &s->jobs[i];
		if (!srv_external(j) || j->st == SJ_QUEUED || now < j->next_poll)
			continue;
		j->next_poll = now + 2;
		/* its end waits for what its nodes kept while we were away */
		if (pull_pending(s, j->id, &j->pull, &j->pulling)) {
			j->next_poll = now + 1;
			continue;
		}
		struct job_row r = { 0 };
		struct tc_err err = TC_ERR_INIT;
		if (store_job_get(s->st, j->id, &r, &err) == 0 && backend_reconcile(s->st, &r, &err) == 0)
			j->state = r.state;
		else
			srvlog_act(s->o.quiet, "warning: job %s: %s", j->id, err.msg);
		/* an end it recorded reaches memory as an event */
		job_row_release(&r);
		tc_err_release(&err);
	}
}
