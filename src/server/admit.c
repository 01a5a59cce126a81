/*
 * admit.c -- the one door every job of the server comes in by (admit.h).
 *
 * Before it, each way in had its own copy of the checks, and the copies
 * drifted: a sweep's trials skipped the non-admin checks and read their
 * spec as root, and an admin's clone of a user's job ran it as the admin.
 * Here is the only place a job row is made for the server's queue.
 */
#include "server/admit.h"
#include "server/server_int.h"
#include "api/api_int.h"
#include "backend/backend.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "spec/spec.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <unistd.h>

int srv_job_account(struct srv *s, const char *user, struct passwd *out, char **buf,
		    struct tc_err *err)
{
	struct passwd *pw = NULL;
	long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
	size_t n = sz > 0 ? (size_t)sz : 16384;
	*buf = xmalloc(n);
	if (getuid() != 0) {
		/* every job runs as the server's account (docs/server.md) */
		if (getpwuid_r(getuid(), out, *buf, n, &pw) != 0 || !pw)
			return tc_error(err, TC_ESYS, "the server's account (uid %u) has no name",
					(unsigned)getuid());
		return 0;
	}
	if (!user || !*user || getpwnam_r(user, out, *buf, n, &pw) != 0 || !pw)
		return tc_error(err, TC_EUSAGE,
				"job's user '%s' has no account on this machine, and a server running as "
				"root runs each job as its user's account",
				user ? user : "");
	if (pw->pw_uid != 0)
		return 0;
	/* another name of uid 0 is never root's job: the API refuses such tokens (finding 2) */
	if (strcmp(user, "root") != 0)
		return tc_error(err, TC_EUSAGE, "job's user '%s' maps to root", user);
	if (!s->o.allow_root_jobs)
		return tc_error(err, TC_EUSAGE,
				"the job would run as root (uid 0): this server runs no job as root unless "
				"it is started with --allow-root-jobs; submit as your own account (its "
				"token, or trainctl as that user) instead");
	return 0;
}

/*
 * While a root server reads the files a non-admin names (a spec's
 * parallel.cluster, a sweep's spec:), this thread's file ids are the
 * caller's account, so a root-only file reads as "permission denied"
 * rather than giving away whether it exists or what it holds.
 */
bool srv_fs_as_caller(const struct who *w, struct fs_ids *save)
{
	memset(save, 0, sizeof(*save));
	if (geteuid() != 0 || w->admin || w->local)
		return true;
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwnam_r(w->user, &pw, buf, sizeof(buf), &res) != 0 || !res || res->pw_uid == 0)
		return false;
	return proc_fs_as(res->pw_uid, res->pw_gid, save);
}

/* The run folder, its job.yaml and the row; the job joins the queue in memory. */
static int queue_job(struct srv *s, const struct admit_req *a, const struct spec *sp,
		     const struct backend_ops *be, const char *team, char **id_out, json_t **brief,
		     struct tc_err *err)
{
	char *id = store_new_job_id();
	struct sbuf run_dir = SBUF_INIT, path = SBUF_INIT;
	run_path(&run_dir, s->home, id, RUN_DIR, 0);
	run_path(&path, s->home, id, RUN_SPEC, 0);
	char *yaml = spec_to_yaml(sp);
	char *json = spec_to_json(sp);
	/* ids the spec named are a requirement; otherwise any free ones */
	char *want = sp->device_ids_given ? device_ids_text(sp->device_ids, sp->per_node) : NULL;
	int rc = mkdir_p(run_dir.buf, err);
	if (!rc)
		rc = write_file_atomic(path.buf, yaml, strlen(yaml), err);
	struct job_row jr = { .id = id, .name = sp->name, .state = JOB_QUEUED, .run_dir = run_dir.buf,
			      .spec_json = json, .created = now_wall(),
			      .world_size = sp->per_node * sp->nodes, .exit_code = -1,
			      .user = (char *)a->owner, .priority = sp->priority,
			      .preemptible = sp->preemptible, .device_type = sp->device_type,
			      .device_count = sp->per_node, .device_want = want, .managed = true,
			      .backend = sp->backend, .team = team };
	if (!rc) {
		if (!a->locked)
			pthread_mutex_lock(&s->mu);
		rc = store_job_submit(s->st, &jr, err);
		if (!rc) {
			srv_add_queued(s, id, a->owner, sp->name, sp->device_type, sp->per_node,
				       want ? sp->device_ids : NULL, sp->priority, sp->preemptible,
				       jr.created, sp->max_restarts, run_dir.buf, be);
			s->jobs[s->njobs - 1].max_runtime = sp->max_runtime;
			s->jobs[s->njobs - 1].team = team ? xstrdup(team) : NULL;
			s->submitted++;
			srv_wake(s);
		}
		if (!a->locked)
			pthread_mutex_unlock(&s->mu);
	}
	if (!rc) {
		srv_notify_queued(s, sp, id, a->owner);
		if (brief)
			*brief = job_to_json(&jr, JOB_JSON_BRIEF);
		if (id_out) {
			*id_out = id;
			id = NULL;
		}
	}
	free(want);
	free(yaml);
	free(json);
	free(id);
	sbuf_release(&run_dir);
	sbuf_release(&path);
	return rc;
}

unsigned srv_admit(struct srv *s, const struct admit_req *a, char **id, json_t **brief,
		   struct tc_err *err)
{
	if (id)
		*id = NULL;
	if (brief)
		*brief = NULL;
	struct passwd pw;
	char *pwbuf = NULL;
	struct spec *sp = NULL;
	char *team = NULL;
	long team_runtime = 0; /* the team's max_runtime: (0: the server's default) */
	unsigned st = 0;
	/* the account first: nothing of a job that may not run is read */
	if (srv_job_account(s, a->owner, &pw, &pwbuf, err)) {
		st = 403;
		goto out;
	}
	/* then its team: one the owner is not in is refused (docs/server.md, "Teams") */
	if (srv_team_pick(s, a->owner, a->team, a->locked, &team, &team_runtime, err)) {
		st = 403;
		goto out;
	}
	/* the spec's files are read as the account that runs it; an admin's own job as the server */
	struct fs_ids ids = { 0 };
	if ((!a->admin || a->owner_reads) && !proc_fs_as(pw.pw_uid, pw.pw_gid, &ids)) {
		proc_fs_restore(&ids);
		tc_error(err, TC_EUSAGE, "cannot read the spec's files as user '%s'", a->owner);
		st = 403;
		goto out;
	}
	int prc = spec_parse_set(a->text, strlen(a->text), a->file ? a->file : "spec",
				 a->base ? a->base : "/", s->o.backend, a->sets, &sp, err);
	proc_fs_restore(&ids);
	if (prc) {
		st = api_status_of(err->code);
		goto out;
	}
	if (a->name) {
		free(sp->name);
		sp->name = xstrdup(a->name);
	}
	if (a->priority)
		sp->priority = a->priority;
	if (a->preemptible >= 0)
		sp->preemptible = a->preemptible;
	/* the team's default time limit, else the server's, is the spec's from here on
	 * (job.yaml, backfill) */
	if (!sp->max_runtime)
		sp->max_runtime = team_runtime ? team_runtime : s->o.default_max_runtime;
	/* ... and its idle limit, for a job with a jupyter or ssh endpoint */
	spec_idle_default(sp, s->o.default_idle_minutes);
	/* the spec's own hooks: no secret from the server's environment (notify_srv.c) */
	if (srv_notify_check(sp, err)) {
		st = api_status_of(err->code);
		goto out;
	}
	/* a backend with a queue of its own (slurm) allocates its nodes, not this pool */
	const struct backend_ops *be = backend_find(sp->backend);
	if (!be)
		be = &backend_local;
	bool own_queue = be->submit != NULL;
	/* sbatch options that name paths or accounts are an admin's (docs/slurm.md) */
	const char *extra = a->admin ? NULL : spec_slurm_extra_refused(sp);
	if (extra) {
		tc_error(err, TC_EUSAGE,
			 "slurm.extra '%s': only an admin may give this sbatch option (see the allowlist "
			 "in docs/slurm.md)",
			 extra);
		st = 403;
		goto out;
	}
	/* runtime options that give privileges, devices or mounts are an admin's (docs/containers.md) */
	extra = a->admin ? NULL : spec_container_extra_refused(sp);
	if (extra) {
		tc_error(err, TC_EUSAGE,
			 "container.extra '%s': only an admin may give this runtime option (see the "
			 "allowlist in docs/containers.md)",
			 extra);
		st = 403;
		goto out;
	}
	/* the owner's secrets: its supervisor gets them from the owner's store (api_secrets.c) */
	if (backend_prepare(be, sp, err) || srv_secrets_check(s, a->owner, sp, own_queue, err) ||
	    (!own_queue && spec_check_command(sp, err))) {
		st = api_status_of(err->code);
		goto out;
	}
	/* the pool must be able to hold the job at all, or it would wait forever */
	size_t have = 0;
	for (size_t i = 0; i < s->ndevs; i++)
		if (!strcmp(s->devs[i].type, sp->device_type))
			have++;
	if (!own_queue && (size_t)sp->per_node > have) {
		tc_error(err, TC_EUSAGE, "devices: %d %s device%s requested but this server has %zu",
			 sp->per_node, sp->device_type, sp->per_node == 1 ? "" : "s", have);
		st = 400;
		goto out;
	}
	if (!a->dry && queue_job(s, a, sp, be, team, id, brief, err))
		st = api_status_of(err->code);
out:
	free(team);
	spec_free(sp);
	free(pwbuf);
	return st;
}
