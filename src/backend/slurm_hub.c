/*
 * slurm_hub.c -- the hub of a Slurm job run without a server (hub/hub.h):
 * the foreground `trainctl run` on the submit host listens for the job's
 * supervisors while it waits (slurm_hub_start); when that terminal is gone,
 * any ps, show or logs on the submit host that finds the job unfinished
 * and its hub not answering starts a detached `trainctl hub JOB` on the
 * same address and port (slurm_hub_revive), which takes the nodes' backlog
 * and exits once the job has ended and Slurm is done with it.
 */
#include "backend/backend.h"
#include "backend/slurm_int.h"
#include "core/http.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "jobs/runpath.h"
#include "launch/launch.h"
#include "report/report.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPEC_ENV_MAX (96u << 10) /* below Linux's 128 KiB for one environment string */

struct slurm_hub {
	struct hub *h;
	struct hub_daemon *d;
	char *url;
};

bool slurm_hub_wanted(void)
{
	const char *v = getenv("TRAINCTL_HUB");
	return !v || strcmp(v, "off") != 0;
}

/* "ADDR[:PORT]" of TRAINCTL_HUB_LISTEN, else this host's address and any port. */
static int listen_addr(char **addr, int *port, struct tc_err *err)
{
	const char *v = getenv("TRAINCTL_HUB_LISTEN");
	*port = 0;
	if (!v || !*v) {
		*addr = host_ipv4();
		if (!*addr)
			*addr = xstrdup("127.0.0.1");
		return 0;
	}
	const char *colon = strrchr(v, ':');
	long p = 0;
	if (colon && !parse_long(colon + 1, 0, 65535, &p))
		return tc_error(err, TC_EUSAGE, "TRAINCTL_HUB_LISTEN must be ADDR[:PORT], not '%s'", v);
	*addr = colon ? xstrndup(v, (size_t)(colon - v)) : xstrdup(v);
	*port = (int)p;
	return 0;
}

/* http://ADDR:PORT -> ADDR, PORT */
static int url_split(const char *url, char **addr, int *port, struct tc_err *err)
{
	const char *h = url && !strncmp(url, "http://", 7) ? url + 7 : NULL;
	const char *colon = h ? strrchr(h, ':') : NULL;
	long p;
	size_t plen = colon ? strcspn(colon + 1, "/") : 0;
	char *ps = colon ? xstrndup(colon + 1, plen) : NULL;
	bool ok = colon && parse_long(ps, 1, 65535, &p);
	free(ps);
	if (!ok)
		return tc_error(err, TC_EUSAGE, "hub: '%s' is not http://ADDR:PORT", url ? url : "");
	*addr = xstrndup(h, (size_t)(colon - h));
	*port = (int)p;
	return 0;
}

static char *server_hub_url; /* backend_set_hub: the server's URL for its jobs' supervisors */

void backend_set_hub(const char *url)
{
	free(server_hub_url);
	server_hub_url = url ? xstrdup(url) : NULL;
}

const char *slurm_server_hub(void)
{
	return slurm_hub_wanted() ? server_hub_url : NULL;
}

int slurm_hub_register(struct store *st, const char *job_id, const struct spec *s,
		       const char *url, struct strvec *env_add, struct tc_err *err)
{
	char *secret = NULL;
	struct sbuf sb = SBUF_INIT;
	int rc = hub_secret_new(&secret, err);
	if (!rc) {
		hub_secret_hash(secret, &sb);
		rc = store_hub_job_set(st, job_id, sb.buf, url, err);
	}
	if (!rc) {
		/* the batch script's environment only (hub.h note 4): never argv, never a file */
		sbuf_reset(&sb);
		sbuf_addf(&sb, "TRAINCTL_HUB_URL=%s", url);
		strvec_push(env_add, sb.buf);
		sbuf_reset(&sb);
		sbuf_addf(&sb, "TRAINCTL_HUB_SECRET=%s", secret);
		strvec_push(env_add, sb.buf);
		memset(sb.buf, 0, sb.len);
		char *js = spec_to_json(s);
		if (strlen(js) < SPEC_ENV_MAX) {
			sbuf_reset(&sb);
			sbuf_addf(&sb, "TRAINCTL_JOB_SPEC=%s", js);
			strvec_push(env_add, sb.buf);
		}
		free(js);
	}
	if (secret) {
		memset(secret, 0, strlen(secret));
		free(secret);
	}
	sbuf_release(&sb);
	return rc;
}

/* the hub's and the report's warnings: on the driver's console */
static void report_warn(void *ctx, const char *msg)
{
	(void)ctx;
	launch_say("%s", msg);
}

int slurm_hub_start(struct store *st, const char *home, const char *job_id,
		    const struct spec *s, struct slurm_hub **out, struct strvec *env_add,
		    struct tc_err *err)
{
	struct slurm_hub *sh = xcalloc(1, sizeof(*sh));
	char *addr = NULL;
	int port = 0;
	*out = NULL;
	int rc = listen_addr(&addr, &port, err);
	if (!rc && !(rc = hub_new(home, &sh->h, err)))
		hub_set_warn(sh->h, report_warn, NULL);
	if (!rc)
		rc = hub_daemon_start(sh->h, addr, port, &sh->d, &port, err);
	if (!rc) {
		struct sbuf sb = SBUF_INIT;
		sbuf_addf(&sb, "http://%s:%d", addr, port);
		sh->url = sbuf_detach(&sb);
		rc = slurm_hub_register(st, job_id, s, sh->url, env_add, err);
	}
	free(addr);
	if (rc) {
		tc_error_prefix(err, "the job's hub");
		slurm_hub_stop(sh);
		return rc;
	}
	*out = sh;
	return 0;
}

const char *slurm_hub_url(const struct slurm_hub *sh)
{
	return sh ? sh->url : NULL;
}

void slurm_hub_stop(struct slurm_hub *sh)
{
	if (!sh)
		return;
	hub_daemon_stop(sh->d);
	hub_free(sh->h);
	free(sh->url);
	free(sh);
}

/* Does something answer at addr:port (a TCP connect within a second)? */
static bool answers(const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return true; /* not ours to judge */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true;
	struct timeval tv = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS;
	close(fd);
	return ok;
}

void slurm_hub_revive(struct store *st, const struct job_row *j)
{
	char *sha = NULL, *url = NULL, *addr = NULL, *runs = NULL, *home = NULL;
	int port = 0;
	struct tc_err err = TC_ERR_INIT;
	/* a server's job waits for its server: a hub here would take the server's port */
	if (j->managed || store_hub_job_get(st, j->id, &sha, &url, &err) ||
	    url_split(url, &addr, &port, &err) || answers(addr, port))
		goto out;
	char *exe = path_self_exe();
	if (!exe)
		goto out;
	/* the state folder is the one the run folder is in: HOME/runs/JOB */
	runs = path_dirname(j->run_dir);
	home = path_dirname(runs);
	struct proc p = PROC_INIT;
	strvec_push(&p.args, exe);
	strvec_push(&p.args, "hub");
	strvec_push(&p.args, j->id);
	proc_env_inherit(&p.env);
	env_set(&p.env, "TRAINCTL_HOME", home);
	struct sbuf log = SBUF_INIT;
	run_path(&log, j->run_dir, NULL, RUN_LOGS, 0);
	sbuf_adds(&log, "/hub.out");
	int fd = open(log.buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	sbuf_release(&log);
	p.in.how = PROC_IO_NULL;
	if (fd >= 0)
		p.out = (struct proc_io){ PROC_IO_FD, fd };
	else
		p.out.how = PROC_IO_NULL;
	p.err.how = PROC_IO_STDOUT;
	/* a hub that cannot bind (another took over, or the address is not this host's) just exits */
	if (proc_start_detached(&p, &err))
		tc_err_release(&err);
	else /* until it holds the job (slurm_reconcile leaves Slurm's end to it), 3 s at most */
		for (int i = 0; i < 60 && !slurm_hub_held(home, j->id); i++)
			http_sleep_ms(50);
	if (fd >= 0)
		close(fd);
	proc_clear(&p);
	free(exe);
out:
	tc_err_release(&err);
	free(sha);
	free(url);
	free(addr);
	free(runs);
	free(home);
}


/*
 * Take what the job's nodes left in their journals: a supervisor waits
 * TRAINCTL_HUB_WAIT at most for its hub, then exits with the rest on its
 * node's disk.  `trainctl hub JOB --flush` on every node of the job (one
 * srun, a new small allocation) sends those journals here; a new secret
 * authenticates it, as this hub never knew the first (it keeps its hash).
 *
 * flush_proc sets p up for job j: its account's and allowlist's (be, a
 * server's job: slurm_as_job_user, and the journal in its run folder as
 * slurm_submit put it) or ours (be NULL); the secret only in p->env.
 */
static int flush_proc(const struct backend_env *be, struct hub *h, const struct job_row *j,
		      const char *url, struct proc *p, gid_t **gids, struct tc_err *err)
{
	char *secret = NULL, *exe = NULL;
	struct sbuf sb = SBUF_INIT;
	int rc = hub_secret_new(&secret, err);
	if (!rc)
		rc = hub_rekey(h, j->id, secret, url, err);
	if (!rc && !(exe = path_self_exe()))
		rc = tc_error(err, TC_ESYS, "cannot find trainctl's own binary");
	if (!rc)
		rc = slurm_as_job_user(be, p, gids, err);
	if (rc)
		goto out;
	const char *wait = getenv("TRAINCTL_HUB_PULL_WAIT");
	strvec_push(&p->args, "srun");
	sbuf_addf(&sb, "--job-name=trainctl-flush-%s", j->id);
	strvec_push(&p->args, sb.buf);
	sbuf_reset(&sb);
	sbuf_addf(&sb, "--nodelist=%s", j->slurm_nodes);
	strvec_push(&p->args, sb.buf);
	strvec_push(&p->args, "--ntasks-per-node=1");
	strvec_push(&p->args, "--time=15");
	strvec_push(&p->args, "--export=ALL");
	strvec_push(&p->args, exe);
	strvec_push(&p->args, "hub");
	strvec_push(&p->args, j->id);
	strvec_push(&p->args, "--flush");
	/* the environment only, as for the job itself (hub.h note 4) */
	env_set(&p->env, "TRAINCTL_HUB_URL", url);
	env_set(&p->env, "TRAINCTL_HUB_SECRET", secret);
	env_set(&p->env, "TRAINCTL_HUB_WAIT", wait && *wait ? wait : "120");
	if (be && be->user) {
		sbuf_reset(&sb);
		sbuf_addf(&sb, "%s/journal", j->run_dir);
		env_set(&p->env, "TRAINCTL_HUB_JOURNAL", sb.buf);
	}
	p->in.how = PROC_IO_NULL;
	p->err.how = PROC_IO_STDOUT;
out:
	if (secret) {
		memset(secret, 0, strlen(secret));
		free(secret);
	}
	free(exe);
	sbuf_release(&sb);
	return rc;
}

/* The secret out of a flush's environment, once it has started. */
static void flush_proc_clear(struct proc *p)
{
	for (size_t i = 0; i < p->env.nr; i++)
		memset(p->env.v[i], 0, strlen(p->env.v[i]));
	proc_clear(p);
}

static void pull_journals(struct store *st, struct hub *h, const char *job_id, const char *url)
{
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	struct proc p = PROC_INIT;
	struct sbuf out = SBUF_INIT;
	gid_t *gids = NULL;
	if (store_job_get(st, job_id, &j, &err) || !j.slurm_nodes || !*j.slurm_nodes)
		goto out; /* it never ran on a node: nothing to pull */
	if (flush_proc(NULL, h, &j, url, &p, &gids, &err))
		goto out;
	launch_say("hub: job %s: taking what its nodes (%s) left in their journals", job_id, j.slurm_nodes);
	struct proc_capture c = { .out = &out, .max = 16384, .timeout_ms = 20 * 60 * 1000 };
	if (!proc_capture(&p, &c, &err)) {
		sbuf_rtrim(&out);
		launch_say("hub: job %s: the nodes' journals: %s%s%s", job_id,
		    proc_exit_ok(c.status) ? "taken" : "not all taken", out.len ? "\n" : "", out.buf);
	}
out:
	if (err.msg)
		launch_say("hub: job %s: cannot take the nodes' journals: %s", job_id, err.msg);
	flush_proc_clear(&p);
	free(gids);
	sbuf_release(&out);
	job_row_release(&j);
	tc_err_release(&err);
}

/* ---- the same for a job of `trainctl server` (backend.h: backend_pull_*) ---- */

struct backend_pull {
	struct proc p;
	gid_t *gids;
	char *job, *out_path;
	int fd; /* the flush's output, read at its end */
};

int backend_pull_start(const struct backend_env *be, struct store *st, struct hub *h,
		       const char *job_id, bool *later, struct backend_pull **out,
		       struct tc_err *err)
{
	struct job_row j = { 0 };
	struct slurm_jobinfo sj = { 0 };
	char *sha = NULL, *url = NULL;
	struct backend_pull *bp = NULL;
	*out = NULL;
	*later = false;
	int rc = store_job_get(st, job_id, &j, err);
	if (rc || !j.slurm_job || !j.slurm_nodes || !*j.slurm_nodes)
		goto out; /* never submitted, or never ran on a node: nothing to pull */
	if ((rc = store_hub_job_get(st, job_id, &sha, &url, err)))
		goto out;
	if (!url || strncmp(url, "http://", 7) != 0)
		goto out; /* its supervisors report on this host's socket: no nodes */
	if ((rc = slurm_jobinfo_query(j.slurm_job, &sj, err)))
		goto out;
	enum job_state ignored;
	bool final = !sj.state;
	if (sj.state)
		slurm_state_map(sj.state, &ignored, &final);
	if (!final) {
		*later = true; /* Slurm still has it: its supervisors may yet deliver themselves */
		goto out;
	}
	bp = xcalloc(1, sizeof(*bp));
	bp->p = (struct proc)PROC_INIT;
	bp->fd = -1;
	bp->job = xstrdup(job_id);
	/* the flush's output: ours (root's), in the state folder, never the account's run folder */
	struct sbuf path = SBUF_INIT;
	sbuf_addf(&path, "%s/hub", be->home);
	if ((rc = mkdir_p(path.buf, err))) {
		sbuf_release(&path);
		goto out;
	}
	sbuf_addf(&path, "/%s.pull.out", job_id);
	bp->out_path = sbuf_detach(&path);
	bp->fd = open(bp->out_path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (bp->fd < 0) {
		rc = tc_error_errno(err, TC_ESYS, "cannot write %s", bp->out_path);
		goto out;
	}
	if ((rc = flush_proc(be, h, &j, url, &bp->p, &bp->gids, err)))
		goto out;
	bp->p.out = (struct proc_io){ PROC_IO_FD, bp->fd };
	bp->p.default_sigs = PROC_SIG(SIGPIPE); /* the server ignores it; exec would keep that */
	backend_say(be, "job %s: Slurm is done with it: taking what its nodes (%s) left in their "
		    "journals, as %s", job_id, j.slurm_nodes, be->user ? be->user : "this account");
	if ((rc = proc_start(&bp->p, err)))
		goto out;
	/* the secret lives on only in the child */
	for (size_t i = 0; i < bp->p.env.nr; i++)
		memset(bp->p.env.v[i], 0, strlen(bp->p.env.v[i]));
	*out = bp;
	bp = NULL;
out:
	if (bp) {
		flush_proc_clear(&bp->p);
		backend_pull_free(bp);
	}
	slurm_jobinfo_release(&sj);
	free(sha);
	free(url);
	job_row_release(&j);
	return rc;
}

bool backend_pull_done(struct backend_pull *bp, struct sbuf *said)
{
	int status = 0;
	pid_t r = waitpid(bp->p.pid, &status, WNOHANG);
	if (r == 0 || (r < 0 && errno == EINTR))
		return false;
	bp->p.pid = -1;
	struct sbuf text = SBUF_INIT;
	char buf[4096];
	ssize_t n;
	if (lseek(bp->fd, 0, SEEK_SET) == 0)
		while (text.len < 16384 && (n = read(bp->fd, buf, sizeof(buf))) > 0)
			sbuf_add(&text, buf, (size_t)n);
	sbuf_rtrim(&text);
	sbuf_addf(said, "job %s: the nodes' journals: %s", bp->job,
		  r > 0 && proc_exit_ok(status) ? "taken" : "not all taken");
	if (r > 0 && !proc_exit_ok(status)) {
		sbuf_adds(said, " (");
		proc_describe_exit(said, status);
		sbuf_adds(said, ")");
	}
	if (text.len)
		sbuf_addf(said, "\n%s", text.buf);
	sbuf_release(&text);
	return true;
}

void backend_pull_free(struct backend_pull *bp)
{
	if (!bp)
		return;
	if (bp->p.pid > 0)
		(void)proc_stop(&bp->p, 5000, NULL); /* the server stops: srun cancels its step on SIGTERM */
	if (bp->fd >= 0)
		close(bp->fd);
	if (bp->out_path)
		unlink(bp->out_path);
	proc_clear(&bp->p);
	free(bp->gids);
	free(bp->out_path);
	free(bp->job);
	free(bp);
}

/*
 * One look at Slurm for the hub's loop: its moves recorded (queued,
 * requeued, paused); once it is done with the job, the nodes' journals
 * pulled (once) before its end is recorded.  True when the job is over.
 */
static bool follow_slurm(struct store *st, struct hub *h, const char *job_id, const char *url,
			 bool *pulled)
{
	struct job_row j = { 0 };
	struct slurm_jobinfo sj = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool over = false, final = false, queried = false;
	if (store_job_get(st, job_id, &j, &err))
		goto out;
	if (!j.slurm_job) {
		over = job_state_terminal(j.state);
		goto out;
	}
	if (slurm_jobinfo_query(j.slurm_job, &sj, &err))
		goto out; /* Slurm did not answer: ask again */
	queried = true;
	enum job_state ignored;
	bool slurm_final = !sj.state;
	if (sj.state)
		slurm_state_map(sj.state, &ignored, &slurm_final);
	if (slurm_final && !*pulled) {
		pull_journals(st, h, job_id, url);
		*pulled = true;
	}
	if (slurm_sync_state(st, job_id, j.slurm_job, &sj, &final, &err) == 0)
		over = final;
	else
		launch_say("hub: job %s: %s", job_id, err.msg);
out:
	if (queried)
		slurm_jobinfo_release(&sj);
	job_row_release(&j);
	tc_err_release(&err);
	return over;
}

bool slurm_hub_held(const char *home, const char *job_id)
{
	struct sbuf lock = SBUF_INIT;
	sbuf_addf(&lock, "%s/hub/%s.lock", home, job_id);
	int fd = open(lock.buf, O_RDONLY | O_CLOEXEC);
	sbuf_release(&lock);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

int slurm_hub_main(const char *home, const char *job_id, struct tc_err *err)
{
	struct store *st = NULL;
	struct hub *h = NULL;
	struct hub_daemon *d = NULL;
	char *sha = NULL, *url = NULL, *addr = NULL;
	int port = 0, lockfd = -1;
	struct sbuf lock = SBUF_INIT;
	int rc = store_open(home, &st, err);
	if (!rc)
		rc = store_hub_job_get(st, job_id, &sha, &url, err);
	if (!rc)
		rc = url_split(url, &addr, &port, err);
	if (rc)
		goto out;
	/* one hub per job on this host */
	sbuf_addf(&lock, "%s/hub", home);
	if ((rc = mkdir_p(lock.buf, err)))
		goto out;
	sbuf_addf(&lock, "/%s.lock", job_id);
	lockfd = open(lock.buf, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = tc_error(err, TC_EBUSY, "hub: job %s has a hub here already", job_id);
		goto out;
	}
	if ((rc = hub_new(home, &h, err)))
		goto out;
	hub_set_warn(h, report_warn, NULL);
	if ((rc = hub_daemon_start(h, addr, port, &d, &port, err)))
		goto out;
	launch_say("hub: job %s: listening on %s", job_id, url);
	/*
	 * The backlog comes in while the job runs; once Slurm is done with it,
	 * what its supervisors could not deliver in their TRAINCTL_HUB_WAIT is
	 * pulled from the nodes' journals, then Slurm's end is recorded (unless
	 * the driver's came in) and we are done.  Meanwhile this process, not
	 * ps or show, follows the job's Slurm state (slurm_reconcile).
	 */
	bool pulled = false, over = false;
	for (int64_t t0 = now_mono_ms(); !over && now_mono_ms() - t0 < 48LL * 3600 * 1000;) {
		http_sleep_ms(1000);
		over = follow_slurm(st, h, job_id, url, &pulled);
	}
	if (over)
		report_job_end(st, job_id, NULL, report_warn, NULL); /* the driver had no database */
	launch_say("hub: job %s: over", job_id);
out:
	hub_daemon_stop(d);
	hub_free(h);
	if (lockfd >= 0)
		close(lockfd);
	sbuf_release(&lock);
	store_close(st);
	free(sha);
	free(url);
	free(addr);
	return rc;
}
