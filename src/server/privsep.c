/*
 * privsep.c -- how `trainctl server` starts a job's supervisor (issue 13,
 * privilege separation; docs/security.md):
 *
 *  - as the job's account from the first instruction after the fork: the
 *    child takes the account's groups, gid and uid (core/proc) before it
 *    runs anything, so the supervisor, its input staging, output upload and
 *    checkpoint watching, and every spec path it reads, are the user's;
 *  - with no database: it reports to this server, its hub (hub/hub.h),
 *    over $home/hub.sock with the job's secret, and asks the hub what it
 *    would have read (a stop's reason, the checkpoints to resume from);
 *  - with a clean environment: jobenv.c's allowlist, the account's HOME,
 *    USER and LOGNAME, and trainctl's own variables, never TRAINCTL_HOME;
 *    its spec comes on its stdin (a sealed memfd: no size cap, no path);
 *  - started only once its exec succeeded (proc: wait_exec), so a binary
 *    the account cannot run fails the job with the reason, not `lost`;
 *  - waiting briefly at its end for a server that is down: the server
 *    that comes back reads what is left of its journal from the run folder
 *    as untrusted input (srv_ingest_journals, hub/ingest_journals.c).
 *
 * The only file work root does for it is what only root may do: hand the
 * run folder it made at submission (in runs/, which only it can write) to
 * the account, through a descriptor opened with O_NOFOLLOW.  Everything in
 * the folder is then the supervisor's to make.
 *
 * A server that is not root starts its supervisors the same way, as its
 * own account: one path, so every server job reports through the hub.
 *
 * The job's secret is HMAC-SHA256(hub.key, job id): the same for every
 * supervisor of a job (a requeued one adopts the journal its predecessor
 * left), with only its SHA-256 in the database (store: hub_jobs).
 */
#include "server/server_int.h"
#include "server/admit.h"
#include "core/enc.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "hub/hub.h"
#include "jobs/runpath.h"
#include "notify/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

#define KEY_FILE "hub.key"

/* $home/hub.key: made once (0600), read at every start; s->hub_key holds its hex. */
static int hub_key(struct srv *s, struct tc_err *err)
{
	if (s->hub_key)
		return 0;
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	sbuf_addf(&path, "%s/" KEY_FILE, s->home);
	int rc = read_file_nofollow(path.buf, &text, NULL);
	sbuf_rtrim(&text);
	if (rc || text.len != 64 || strspn(text.buf, "0123456789abcdef") != 64) {
		char *key = NULL;
		sbuf_reset(&text);
		rc = hub_secret_new(&key, err);
		if (!rc) {
			sbuf_adds(&text, key);
			free(key);
			rc = write_file_atomic_mode(path.buf, text.buf, text.len, 0600, err);
		}
	}
	if (!rc)
		s->hub_key = sbuf_detach(&text);
	sbuf_release(&text);
	sbuf_release(&path);
	return rc;
}

/* The job's secret (heap, 64 hex digits): the same for each of its supervisors. */
static char *job_secret(struct srv *s, const char *job)
{
	unsigned char md[32];
	notify_hmac_sha256(s->hub_key, strlen(s->hub_key), job, strlen(job), md);
	char *hex = xmalloc(2 * 32 + 1);
	hex_encode(hex, md, 32);
	hex[64] = '\0';
	return hex;
}

/*
 * Hand run_dir (made by this server in runs/, which only it can write) to
 * uid:gid, 0711: other accounts pass through to nothing (its folders are
 * the supervisor's, 0700).  Already the account's (a requeued job): kept.
 * Anything else is refused.
 */
static int hand_run_folder(struct srv *s, const char *job, uid_t uid, gid_t gid,
			   struct tc_err *err)
{
	struct sbuf runs = SBUF_INIT;
	run_runs(&runs, s->home);
	int dfd = open(runs.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int fd = dfd < 0 ? -1 : openat(dfd, job, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot open the run folder %s/%s", runs.buf, job);
	else if (sb.st_uid == uid)
		rc = 0;
	else if (sb.st_uid != geteuid())
		rc = tc_error(err, TC_ESYS, "the run folder %s/%s belongs to uid %u: refused", runs.buf,
			      job, (unsigned)sb.st_uid);
	else if (fchown(fd, uid, gid) < 0 || fchmod(fd, 0711) < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot hand the run folder of %s to uid %u", job,
				    (unsigned)uid);
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	sbuf_release(&runs);
	return rc;
}

/*
 * Can uid (with gids) pass through every folder down to path and enter it?
 * Else the supervisor, started as that account, could not reach its run
 * folder: refused with the first folder in the way named in *where.
 */
static bool reachable(const char *path, uid_t uid, const gid_t *gids, int ngids,
		      struct sbuf *where)
{
	struct sbuf p = SBUF_INIT;
	bool ok = true;
	for (const char *c = path; ok && *c;) {
		const char *slash = strchr(c + 1, '/');
		size_t n = slash ? (size_t)(slash - path) : strlen(path);
		sbuf_reset(&p);
		sbuf_add(&p, path, n ? n : 1);
		struct stat sb;
		if (stat(p.buf, &sb) < 0)
			break; /* the start itself says what is missing */
		mode_t bit = 0001;
		if (sb.st_uid == uid) {
			bit = 0100;
		} else {
			for (int i = 0; i < ngids; i++)
				if (gids[i] == sb.st_gid)
					bit = 0010;
		}
		if (!(sb.st_mode & bit)) {
			ok = false;
			sbuf_adds(where, p.buf);
		}
		c = slash ? slash : path + strlen(path);
	}
	sbuf_release(&p);
	return ok;
}

/*
 * The job's spec in a sealed memfd at offset 0 (*fd, the caller's): the
 * supervisor's stdin, read whole before anything else (cmd_supervise).
 * Not a pipe, whose writer would block on a spec over the pipe's buffer
 * until the supervisor reads it; not a file, so no path the account could
 * swap while root writes it.
 */
static int spec_memfd(const char *spec, int *fd, struct tc_err *err)
{
	*fd = memfd_create("trainctl-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0)
		return tc_error_errno(err, TC_ESYS, "cannot make the spec's memfd");
	if (write_all(*fd, spec, strlen(spec)) < 0 || lseek(*fd, 0, SEEK_SET) != 0 ||
	    fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		int rc = tc_error_errno(err, TC_ESYS, "cannot write the spec's memfd");
		close(*fd);
		*fd = -1;
		return rc;
	}
	return 0;
}

/*
 * The uid a supervisor of user's job ran as, to read the journal it left:
 * what srv_job_account decided when it started, without the refusals of
 * now (a server restarted without --allow-root-jobs still reads what a job
 * of root left).  false: none could have run.
 */
static bool ran_as(const char *user, uid_t *uid)
{
	if (getuid() != 0) {
		*uid = getuid();
		return true;
	}
	struct passwd pw, *res = NULL;
	long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
	size_t n = sz > 0 ? (size_t)sz : 16384;
	char *buf = xmalloc(n);
	bool ok = user && *user && getpwnam_r(user, &pw, buf, n, &res) == 0 && res &&
		  (res->pw_uid != 0 || !strcmp(user, "root"));
	if (ok)
		*uid = res->pw_uid;
	free(buf);
	return ok;
}

int srv_supervisor_proc(struct srv *s, const struct sjob *j, const char *devices,
			struct proc *p, gid_t **groups, struct tc_err *err)
{
	struct passwd pw;
	char *pwbuf = NULL;
	char *secret = NULL;
	struct job_row r = { 0 };
	struct sbuf sb = SBUF_INIT, only = SBUF_INIT;
	*groups = NULL;
	/* admission's account decision again: no job starts as one it would refuse now */
	int rc = srv_job_account(s, j->user, &pw, &pwbuf, err);
	if (!rc)
		rc = store_job_get(s->st, j->id, &r, err);
	if (!rc)
		rc = hub_key(s, err);
	if (!rc && !(secret = job_secret(s, j->id)))
		rc = tc_error(err, TC_ESYS, "cannot derive the secret of job %s", j->id);
	if (!rc) {
		struct sbuf url = SBUF_INIT;
		sbuf_addf(&url, "unix:%s", s->hub_sock ? s->hub_sock : "");
		hub_secret_hash(secret, &sb);
		rc = store_hub_job_set(s->st, j->id, sb.buf, url.buf, err);
		sbuf_reset(&sb);
		sbuf_release(&url);
	}
	if (!rc && pw.pw_uid != getuid())
		rc = hand_run_folder(s, j->id, pw.pw_uid, pw.pw_gid, err);
	if (rc)
		goto out;

	strvec_push(&p->args, s->exe);
	strvec_push(&p->args, "supervise");
	strvec_push(&p->args, j->id);
	strvec_push(&p->args, "--devices");
	strvec_push(&p->args, devices);
	if (j->ran)
		strvec_push(&p->args, "--resume");

	/* an allowlist of ours, never our credentials (jobenv.c), and never TRAINCTL_HOME */
	srv_supervisor_env(environ, s->o.pass_env, s->o.notify, s->o.nnotify, &p->env);
	const char *prev = env_get(&p->env, "TRAINCTL_SUPERVISOR_ONLY");
	if (prev)
		sbuf_adds(&only, prev);
	env_set(&p->env, "HOME", pw.pw_dir);
	env_set(&p->env, "USER", pw.pw_name);
	env_set(&p->env, "LOGNAME", pw.pw_name);
	/* what it reports through and runs; its workers get none of it (env_drop_supervisor_only) */
	static const char *const hubvars[] = {
		"TRAINCTL_HUB_URL", "TRAINCTL_HUB_SOCKET", "TRAINCTL_HUB_SECRET", "TRAINCTL_HUB_JOURNAL",
		"TRAINCTL_RUN_DIR", "TRAINCTL_JOB_SPEC", "TRAINCTL_HUB_SECRET_FILE", "TRAINCTL_HUB_WAIT",
	};
	env_set(&p->env, "TRAINCTL_HUB_URL", "http://localhost");
	env_set(&p->env, "TRAINCTL_HUB_SOCKET", s->hub_sock);
	env_set(&p->env, "TRAINCTL_HUB_SECRET", secret);
	sbuf_addf(&sb, "%s/journal", r.run_dir);
	env_set(&p->env, "TRAINCTL_HUB_JOURNAL", sb.buf);
	env_set(&p->env, "TRAINCTL_RUN_DIR", r.run_dir);
	while (env_get(&p->env, "TRAINCTL_JOB_SPEC"))
		env_unset(&p->env, "TRAINCTL_JOB_SPEC");
	/*
	 * At its end a supervisor waits a little for this server to take its
	 * journal (hub.h note 5); a server that comes back later reads what is
	 * left from the run folder (srv_ingest_journals), so nobody waits long.
	 */
	if (!env_get(&p->env, "TRAINCTL_HUB_WAIT"))
		env_set(&p->env, "TRAINCTL_HUB_WAIT", SRV_SUPERVISOR_WAIT);
	while (env_get(&p->env, "TRAINCTL_HUB_SECRET_FILE"))
		env_unset(&p->env, "TRAINCTL_HUB_SECRET_FILE");
	for (size_t i = 0; i < sizeof(hubvars) / sizeof(hubvars[0]); i++)
		sbuf_addf(&only, "%s%s", only.len ? "," : "", hubvars[i]);
	env_set(&p->env, "TRAINCTL_SUPERVISOR_ONLY", only.buf);

	if (pw.pw_uid != getuid()) {
		int ng = 64;
		gid_t *g = xcalloc((size_t)ng, sizeof(gid_t));
		if (getgrouplist(pw.pw_name, pw.pw_gid, g, &ng) < 0) {
			g = xrealloc(g, (size_t)ng * sizeof(gid_t));
			if (getgrouplist(pw.pw_name, pw.pw_gid, g, &ng) < 0)
				ng = 0;
		}
		if (ng <= 0) {
			g[0] = pw.pw_gid;
			ng = 1;
		}
		*groups = g;
		struct sbuf in_way = SBUF_INIT;
		if (!reachable(r.run_dir, pw.pw_uid, g, ng, &in_way))
			rc = tc_error(err, TC_EUSAGE, "user %s cannot pass through %s to its run folder %s:"
				      " a root server's state folder must lie in folders every job's"
				      " account may pass through (docs/security.md)", pw.pw_name,
				      in_way.buf, r.run_dir);
		sbuf_release(&in_way);
		if (rc)
			goto out;
		p->set_groups = p->set_gid = p->set_uid = true;
		p->groups = g;
		p->ngroups = (size_t)ng;
		p->gid = pw.pw_gid;
		p->uid = pw.pw_uid;
	}
	/* the spec on its stdin: no size cap (an environment string has one), no path */
	if ((rc = spec_memfd(r.spec_json ? r.spec_json : "{}", &p->in.fd, err)))
		goto out;
	p->in.how = PROC_IO_FD;
	/* a binary the account cannot run fails the job at once, naming why (start_job) */
	p->wait_exec = true;
	/* a folder it may enter as its account; its own output goes to logs/supervisor.out */
	p->cwd = "/";
	p->default_sigs = PROC_SIGS_CLASSIC;
	p->out.how = PROC_IO_NULL;
	p->err.how = PROC_IO_NULL;
out:
	if (secret) {
		memset(secret, 0, strlen(secret));
		free(secret);
	}
	job_row_release(&r);
	sbuf_release(&sb);
	sbuf_release(&only);
	free(pwbuf);
	return rc;
}

#define INGEST_MAX_DEFAULT (256L << 20)

int srv_ingest_journals(struct srv *s, const struct sjob *j, struct hub_ingest_result *res,
			struct tc_err *err)
{
	memset(res, 0, sizeof(*res));
	uid_t uid;
	/* none: no supervisor of it ever ran */
	if (!ran_as(j->user, &uid))
		return 0;
	int rc;
	long max = INGEST_MAX_DEFAULT;
	const char *m = getenv("TRAINCTL_HUB_INGEST_MAX");
	if (m && *m && !parse_long(m, 1, 1L << 40, &max))
		max = INGEST_MAX_DEFAULT;
	struct hub *h = srv_hub(s, err);
	if (!h)
		return err->code ? err->code : TC_ESYS;
	struct sbuf runs = SBUF_INIT;
	run_runs(&runs, s->home);
	int dfd = open(runs.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot open %s", runs.buf);
	else
		rc = hub_ingest_journals(h, dfd, j->id, uid, max, res, err);
	if (dfd >= 0)
		close(dfd);
	sbuf_release(&runs);
	return rc;
}

void srv_privsep_end(struct srv *s)
{
	if (s->hub_key) {
		memset(s->hub_key, 0, strlen(s->hub_key));
		free(s->hub_key);
		s->hub_key = NULL;
	}
}

/* ---- the hub of the server's jobs (hub/hub.h): made on first use ---- */

static struct hub *hub_once; /* its own store connection, made on first use */
static pthread_mutex_t hub_once_mu = PTHREAD_MUTEX_INITIALIZER;

struct hub *srv_hub(struct srv *s, struct tc_err *err)
{
	pthread_mutex_lock(&hub_once_mu);
	if (!hub_once) {
		if (hub_new(s->home, &hub_once, err))
			hub_once = NULL;
		else
			hub_set_warn(hub_once, srv_say, s); /* an event passed over: the server's log */
	}
	struct hub *h = hub_once;
	pthread_mutex_unlock(&hub_once_mu);
	return h;
}

void srv_hub_end(void)
{
	pthread_mutex_lock(&hub_once_mu);
	hub_free(hub_once);
	hub_once = NULL;
	pthread_mutex_unlock(&hub_once_mu);
}
