/*
 * slurm_run.c -- `trainctl run` of a backend: slurm job in the foreground
 * (backend_slurm.run): submit, wait while streaming the rank logs, map
 * Slurm's states, and pass a Ctrl-C on as a stop (design notes in slurm.c).
 */
#include "backend/backend.h"
#include "backend/slurm_int.h"
#include "jobs/jobs.h"
#include "jobs/runpath.h"
#include "report/report.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_MS 200
#define QUERY_MS 500

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
			sbuf_addf(&p, "%s/", log_dir); /* the logs folder: the rank log's own name */
			run_leaf(&p, RUN_RANK_LOG, r);
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
	struct slurm_hub *hub; /* the job's one writer while we wait (slurm_hub.c), or NULL */
	struct strvec env_add; /* for sbatch: the hub's URL and the job's secret */
};

/* Design note 1: ask Slurm before anything is recorded. */
static int fg_check(struct fg *g, struct tc_err *err)
{
	struct slurm_script_in in = { g->s, g->id, g->home_abs, g->run_dir,
				      g->exe ? g->exe : "trainctl" };
	char *script = slurm_script(&in);
	int rc = slurm_test_only(script, err);
	free(script);
	return rc;
}

/* The run folder, job.yaml and the job's row (queued, backend slurm). */
static int fg_record(struct fg *g, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	int rc = 0;
	const enum run_what sub[] = { RUN_LOGS, RUN_OUTPUT, RUN_DATA };
	for (size_t i = 0; !rc && i < sizeof(sub) / sizeof(sub[0]); i++) {
		sbuf_reset(&p);
		run_path(&p, g->run_dir, NULL, sub[i], 0);
		rc = mkdir_p(p.buf, err);
	}
	if (!rc) {
		char *yaml = spec_to_yaml(g->s);
		sbuf_reset(&p);
		run_path(&p, g->run_dir, NULL, RUN_SPEC, 0);
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
	struct backend_env env = { .home = g->o->home, .say = NULL, .say_arg = NULL }; /* run says it itself */
	int rc = 0;
	if (slurm_hub_wanted())
		rc = slurm_hub_start(g->st, g->o->home, g->id, g->s, &g->hub, &g->env_add, err);
	if (!rc)
		rc = slurm_submit_env(&env, (const char *const *)g->env_add.v, g->st, g->s, g->id, err);
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
		launch_say("warning: %s", e->msg);
}

/* SIGINT or SIGTERM: the first stops the job within its grace time, another cancels it. */
static void fg_on_signals(struct fg *g, int64_t now)
{
	struct tc_err e = TC_ERR_INIT;
	if (fg_signals > g->handled) {
		g->handled = fg_signals;
		if (g->handled == 1) {
			launch_say("stopping Slurm job %s (SIGTERM to its supervisors, %d s grace)",
			    g->slurm_job, g->s->grace_seconds);
			warn_if(store_job_set_stop_reason(g->st, g->id, JOB_STOP_STOPPED, &e) ||
					slurm_scancel(g->slurm_job, "TERM", &e),
				&e);
			g->hard_at = now + (int64_t)g->s->grace_seconds * 1000 + 10000;
		} else {
			launch_say("cancelling Slurm job %s now", g->slurm_job);
			warn_if(slurm_scancel(g->slurm_job, NULL, &e), &e);
			g->hard_at = 0;
		}
	}
	if (g->hard_at && now >= g->hard_at) {
		warn_if(slurm_scancel(g->slurm_job, NULL, &e), &e);
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
			warn_if(slurm_jobinfo_query(g->slurm_job, &sj, &e) ||
					slurm_sync_state(g->st, g->id, g->slurm_job, &sj, &final, &e),
				&e);
			tc_err_release(&e);
			slurm_jobinfo_release(&sj);
			next_query = now + QUERY_MS;
		}
		if (!final)
			usleep(POLL_MS * 1000);
	}
	follow_logs(g->f, g->world, g->log_dir.buf, g->o->quiet, true);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
}

static void report_warn(void *ctx, const char *msg)
{
	(void)ctx;
	launch_say("%s", msg);
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
		launch_say("job %s %s%s%s", g->id, job_state_name(j.state),
		    j.root_cause ? ": " : "", j.root_cause ? j.root_cause : "");
	else
		launch_say("job %s %s", g->id, job_state_name(j.state));
	job_row_release(&j);
	return 0;
}

int slurm_run(const struct spec *s, const struct launch_opts *o, char **job_id,
	      int *exit_status, struct tc_err *err)
{
	struct fg g = { .s = s, .o = o, .world = s->nodes * s->per_node, .log_dir = SBUF_INIT,
			.env_add = STRVEC_INIT };
	*exit_status = 1;
	*job_id = NULL;
	g.exe = path_self_exe();
	g.home_abs = path_absolute(o->home, NULL);
	g.id = store_new_job_id();
	g.run_dir = slurm_run_dir_of(g.home_abs, g.id);
	int rc = fg_check(&g, err);
	if (rc) {
		free(g.id);
		goto out;
	}
	*job_id = g.id; /* the caller's from here on */
	if ((rc = store_open(o->home, &g.st, err)) || (rc = fg_record(&g, err)) ||
	    (rc = fg_submit(&g, err)))
		goto out;
	launch_say("job %s (%s): %d node%s x %d %s worker%s, Slurm job %s, run folder %s", g.id,
	    s->name, s->nodes, plural_s(s->nodes), s->per_node, s->device_type, plural_s(s->per_node),
	    g.slurm_job, g.run_dir);
	/* the runtime chosen at submission (backend_prepare) */
	if (s->container.image && s->container.runtime && !strcmp(s->container.runtime, "pyxis"))
		launch_say("image %s: pyxis (each worker a Slurm step, srun --container-image)",
			   s->container.image);
	else if (s->container.image && s->container.runtime)
		launch_say("image %s: %s under srun on each node", s->container.image,
			   s->container.runtime);
	g.f = xcalloc((size_t)g.world, sizeof(*g.f));
	for (int r = 0; r < g.world; r++) {
		g.f[r].fd = -1;
		sbuf_init(&g.f[r].partial, 0);
	}
	run_path(&g.log_dir, g.run_dir, NULL, RUN_LOGS, 0);
	fg_follow(&g);
	/* report.json: the driver of a job with a hub has no database to write it from */
	if (g.hub)
		report_job_end(g.st, g.id, NULL, report_warn, NULL);
	rc = fg_outcome(&g, exit_status, err);
out:
	for (int r = 0; g.f && r < g.world; r++) {
		if (g.f[r].fd >= 0)
			close(g.f[r].fd);
		sbuf_release(&g.f[r].partial);
	}
	free(g.f);
	slurm_hub_stop(g.hub);
	for (size_t i = 0; i < g.env_add.nr; i++) /* the secret leaves memory */
		memset(g.env_add.v[i], 0, strlen(g.env_add.v[i]));
	strvec_clear(&g.env_add);
	store_close(g.st);
	free(g.run_dir);
	free(g.exe);
	free(g.home_abs);
	free(g.slurm_job);
	sbuf_release(&g.log_dir);
	return rc;
}
