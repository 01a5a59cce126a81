/*
 * container_hook.c -- a job with image: (supervisor_int.h): the runtime
 * and the image are checked before any worker starts, each worker's
 * process, and each endpoint's (endpoint_hook.c), becomes the runtime's
 * client running it in its own container (container/container.h), and
 * containers whose client was killed, or whose supervisor was, are
 * removed.
 */
#include "launch/supervisor_int.h"
#include "container/container.h"
#include "core/proc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "jobs/runpath.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct sup_ctr {
	struct container_runtime rt;
	struct strvec dirs; /* mounted at their own paths */
	bool rootless;
	int reaper_fd;      /* the write end of the reaper's stdin, or -1 */
	pid_t reaper_pid;
	struct pyxis_node *pyxis; /* runtime: pyxis: each worker a Slurm step (below); else NULL */
};

struct pyxis_node;
static int pyxis_begin(struct sup *sp, struct sup_ctr *c, struct tc_err *err);
static int pyxis_wrap(struct sup *sp, struct worker *w, struct proc *p, const struct strvec *dirs,
		      struct tc_err *err);
static void pyxis_end(struct sup_ctr *c);

/*
 * The reaper, a guard (proc.h): a shell whose stdin is a pipe from us.  EOF
 * without "done" means we are gone (SIGKILL too): it execs the removal of
 * every container labelled with the job.
 */
static int reaper_start(struct sup *sp, struct sup_ctr *c, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, (const char *const[]){ "/bin/sh", "-c",
		     "read -r x; [ \"$x\" = done ] && exit 0; exec \"$@\"", "trainctl-reaper", NULL });
	container_reap_argv(&c->rt, sp->job_id, &p.args);
	container_client_env(&p.env);
	int rc = proc_start_guard(&p, &c->reaper_fd, err);
	if (!rc)
		c->reaper_pid = p.pid;
	proc_clear(&p);
	return rc;
}

static bool path_exists_cb(const char *path)
{
	return path_exists(path);
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

static void add_dir(struct sup_ctr *c, const char *dir)
{
	if (!dir || dir[0] != '/')
		return;
	for (size_t i = 0; i < c->dirs.nr; i++)
		if (under(dir, c->dirs.v[i]))
			return;
	strvec_push(&c->dirs, dir);
}

/*
 * We are the job's account (a server starts its supervisors as the job's
 * user, server/privsep.c): a folder we cannot read is not mounted.
 */
static int user_can_read(const char *what, const char *path, struct tc_err *err)
{
	if (access(path, R_OK) == 0)
		return 0;
	return tc_error(err, TC_ESPEC, "%s '%s': the job's user cannot read it, so it is not "
			"mounted into the job's containers", what, path);
}

int sup_container_begin(struct sup *sp, struct tc_err *err)
{
	const struct spec *s = sp->s;
	if (!s->container.image)
		return 0;
	struct sup_ctr *c = xcalloc(1, sizeof(*c));
	c->dirs = (struct strvec)STRVEC_INIT;
	c->reaper_fd = -1;
	c->reaper_pid = -1;
	sp->ctr = c;
	bool pyxis = container_is_pyxis(s);
	int rc = pyxis ? pyxis_begin(sp, c, err) : container_runtime_find(s->container.runtime, &c->rt, err);
	if (!rc && !pyxis) {
		sup_say(sp, "image %s: checking it with %s (pull: %s)", s->container.image, c->rt.name,
			s->container.pull ? s->container.pull : "missing");
		rc = container_image_ready(&c->rt, s->container.image, s->container.pull, err);
	}
	if (rc)
		return rc;
	if ((rc = user_can_read("workdir", s->workdir, err)))
		return rc;
	for (size_t i = 0; i < s->container.nmounts; i++)
		if ((rc = user_can_read("container.mounts", s->container.mounts[i].src, err)))
			return rc;
	/* root's own `trainctl run` runs its containers as root (--user=0:0) */
	c->rootless = getuid() != 0;
	/* pyxis: Slurm ends the step of a killed srun client, no container is left to reap */
	if (!pyxis && (rc = reaper_start(sp, c, err)))
		return rc;
	add_dir(c, sp->run_dir);
	add_dir(c, sp->data_dir);
	add_dir(c, sp->output_dir);
	add_dir(c, sp->ckpt_dir);
	add_dir(c, sp->log_dir);
	add_dir(c, sp->tb_dir);
	return 0;
}

void sup_container_end(struct sup *sp)
{
	struct sup_ctr *c = sp->ctr;
	if (!c)
		return;
	/* every attempt removed its containers: the reaper ends without a removal */
	if (proc_guard_end(&c->reaper_fd, c->reaper_pid, "done\n", 5) < 0)
		sup_say(sp, "warning: the container reaper ended early");
	container_runtime_release(&c->rt);
	pyxis_end(c);
	strvec_clear(&c->dirs);
	free(c);
	sp->ctr = NULL;
}

/*
 * p (argv, env) becomes the runtime's client running it in cw's container
 * (a rank's or an endpoint's; the job's part of cw is filled here).  Its
 * environment goes in through envname, a private file in the run folder,
 * never on argv (ps shows argv); the variables it cannot hold in dropped.
 */
static int wrap_in(struct sup *sp, struct container_worker *cw, const char *envname,
		   struct proc *p, struct strvec *dropped, struct tc_err *err)
{
	struct sup_ctr *c = sp->ctr;
	const struct spec *s = sp->s;
	cw->s = s;
	cw->rt = &c->rt;
	cw->job_id = sp->job_id;
	cw->uid = getuid();
	cw->gid = getgid();
	cw->rootless = c->rootless;
	cw->device_ids = s->device_ids;
	cw->ndevices = s->per_node;
	cw->exists = path_exists_cb;
	/* rootless podman binds the host's /dev/mqueue for --ipc=host: none, no host IPC */
	cw->private_ipc = c->rootless && !is_dir("/dev/mqueue");
	struct sbuf ef = SBUF_INIT;
	sbuf_addf(&ef, "%s/%s", sp->run_dir, envname);
	cw->env_file = ef.buf;
	char *text = container_env_file(cw, &p->env, dropped);
	int rc = sup_write_private(sp->run_dir, envname, text, err);
	free(text);
	if (!rc)
		rc = container_wrapper(cw, &p->wrapper, err);
	if (!rc) {
		/* the client runs with its own environment, never the job's */
		strvec_clear(&p->env);
		container_client_env(&p->env);
	}
	cw->env_file = NULL;
	sbuf_release(&ef);
	return rc;
}

int sup_container_wrap(struct sup *sp, struct worker *w, struct proc *p, struct tc_err *err)
{
	struct sup_ctr *c = sp->ctr;
	struct strvec dirs = STRVEC_INIT, dropped = STRVEC_INIT;
	strvec_pushv(&dirs, (const char *const *)c->dirs.v);
	/* a checkpoint to resume from may live outside the job's folders */
	const char *resume = env_get(&p->env, "TRAINCTL_RESUME_FROM");
	if (resume && resume[0] == '/') {
		char *d = path_dirname(resume);
		bool have = false;
		for (size_t i = 0; i < dirs.nr; i++)
			have = have || under(d, dirs.v[i]);
		if (!have && is_dir(d))
			strvec_push(&dirs, d);
		free(d);
	}
	if (c->pyxis) {
		int prc = pyxis_wrap(sp, w, p, &dirs, err);
		strvec_clear(&dirs);
		return prc;
	}
	struct container_worker cw = { .attempt = sp->attempt, .rank = w->rank,
				       .dirs = (const char *const *)dirs.v };
	struct sbuf name = SBUF_INIT;
	run_leaf(&name, RUN_CONTAINER_ENV, w->rank);
	int rc = wrap_in(sp, &cw, name.buf, p, &dropped, err);
	if (!rc && dropped.nr && w->local_rank == 0 && sp->attempt == 0)
		sup_say(sp, "warning: %zu environment variable%s with a newline in %s value cannot "
			"reach the container (%s%s)", dropped.nr, dropped.nr == 1 ? "" : "s",
			dropped.nr == 1 ? "its" : "their", dropped.v[0], dropped.nr > 1 ? ", ..." : "");
	sbuf_release(&name);
	strvec_clear(&dirs);
	strvec_clear(&dropped);
	return rc;
}

bool sup_container_endpoints_in_image(const struct sup *sp)
{
	return sp->ctr && !sp->ctr->pyxis;
}

/* <run folder>/container-ep-NAME.env: an endpoint's environment (its token too). */
static void endpoint_env_name(struct sbuf *sb, const char *endpoint)
{
	sbuf_reset(sb);
	sbuf_addf(sb, "container-ep-%s.env", endpoint);
}

int sup_container_wrap_endpoint(struct sup *sp, const char *endpoint, struct proc *p,
				struct tc_err *err)
{
	struct strvec dropped = STRVEC_INIT;
	struct container_worker cw = { .endpoint = endpoint,
				       .dirs = (const char *const *)sp->ctr->dirs.v };
	struct sbuf name = SBUF_INIT;
	endpoint_env_name(&name, endpoint);
	/* a variable the env file cannot hold was said for the workers already */
	int rc = wrap_in(sp, &cw, name.buf, p, &dropped, err);
	sbuf_release(&name);
	strvec_clear(&dropped);
	return rc;
}

void sup_container_endpoint_gone(struct sup *sp, const char *endpoint, bool killed)
{
	struct sup_ctr *c = sp->ctr;
	struct sbuf nm = SBUF_INIT;
	endpoint_env_name(&nm, endpoint);
	char *path = sup_join(sp->run_dir, nm.buf);
	if (unlink(path) < 0 && errno != ENOENT)
		sup_say(sp, "warning: cannot remove %s: %s", path, strerror(errno));
	free(path);
	if (killed && c) {
		/* its monitor keeps the container of a killed client running */
		struct strvec argv = STRVEC_INIT;
		struct tc_err e = TC_ERR_INIT;
		container_endpoint_name(&nm, sp->job_id, endpoint);
		const char *names[] = { nm.buf };
		container_rm_argv(&c->rt, names, 1, &argv);
		if (container_run(&argv, 60000, &e))
			sup_say(sp, "warning: %s", e.msg);
		tc_err_release(&e);
		strvec_clear(&argv);
	}
	sbuf_release(&nm);
}

void sup_container_attempt_end(struct sup *sp)
{
	struct sup_ctr *c = sp->ctr;
	if (!c || c->pyxis)
		return; /* pyxis: Slurm ends the step of a killed srun client */
	/*
	 * A client killed by a signal (SIGKILL after the grace period) leaves
	 * its container running: the runtime's monitor holds it.  One rm for
	 * all of them.
	 */
	struct strvec names = STRVEC_INIT, argv = STRVEC_INIT;
	struct sbuf nm = SBUF_INIT;
	/* the env files hold the workers' values (secrets too): read by now, kept no longer */
	for (int i = 0; i < sp->n; i++) {
		sbuf_reset(&nm);
		run_path(&nm, sp->run_dir, NULL, RUN_CONTAINER_ENV, sp->w[i].rank);
		if (unlink(nm.buf) < 0 && errno != ENOENT)
			sup_say(sp, "warning: cannot remove %s: %s", nm.buf, strerror(errno));
	}
	for (int i = 0; i < sp->n; i++)
		if (WIFSIGNALED(sp->w[i].status) || !sp->w[i].reaped) {
			container_name(&nm, sp->job_id, sp->attempt, sp->w[i].rank);
			strvec_push(&names, nm.buf);
		}
	if (names.nr) {
		struct tc_err e = TC_ERR_INIT;
		container_rm_argv(&c->rt, (const char *const *)names.v, names.nr, &argv);
		if (container_run(&argv, 60000, &e))
			sup_say(sp, "warning: %s", e.msg);
		tc_err_release(&e);
	}
	sbuf_release(&nm);
	strvec_clear(&names);
	strvec_clear(&argv);
}

/* ---- runtime: pyxis (container.h: each worker a Slurm step in the image) ---- */

struct pyxis_node {
	char *srun, *slurm_job, *node;
	int cpus;
};

static int pyxis_begin(struct sup *sp, struct sup_ctr *c, struct tc_err *err)
{
	(void)sp;
	const char *job = getenv("SLURM_JOB_ID"), *node = getenv("SLURMD_NODENAME");
	if (!job || !node)
		return tc_error(err, TC_EBACKEND, "container.runtime pyxis: this supervisor is not in a "
				"Slurm job (no SLURM_JOB_ID or SLURMD_NODENAME)");
	char *srun = which("srun");
	if (!srun)
		return tc_error(err, TC_EBACKEND, "container.runtime pyxis: srun is not on this node's PATH");
	struct pyxis_node *px = xcalloc(1, sizeof(*px));
	px->srun = srun;
	px->slurm_job = xstrdup(job);
	px->node = xstrdup(node);
	long cpus = 0;
	/* the workers' steps may use all the node's CPUs of the job, as host workers do */
	const char *v = getenv("SLURM_CPUS_ON_NODE");
	if (v && parse_long(v, 1, 1 << 20, &cpus))
		px->cpus = (int)cpus;
	c->pyxis = px;
	return 0;
}

static int pyxis_wrap(struct sup *sp, struct worker *w, struct proc *p, const struct strvec *dirs,
		      struct tc_err *err)
{
	struct pyxis_node *n = sp->ctr->pyxis;
	struct container_pyxis px = {
		.s = sp->s, .srun = n->srun, .job_id = sp->job_id, .slurm_job = n->slurm_job,
		.node = n->node, .attempt = sp->attempt, .rank = w->rank, .cpus = n->cpus,
		.dirs = (const char *const *)dirs->v,
	};
	int rc = container_pyxis_wrapper(&px, &p->wrapper, err);
	if (!rc) {
		/* the worker's environment reaches the task through srun --export=ALL */
		struct strvec env = STRVEC_INIT;
		container_pyxis_env(&p->env, &env);
		strvec_clear(&p->env);
		p->env = env;
		/* srun runs as the job's user (as the worker would): its step is the user's */
	}
	return rc;
}

static void pyxis_end(struct sup_ctr *c)
{
	if (!c->pyxis)
		return;
	free(c->pyxis->srun);
	free(c->pyxis->slurm_job);
	free(c->pyxis->node);
	free(c->pyxis);
	c->pyxis = NULL;
}
