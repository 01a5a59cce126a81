/*
 * backend.h -- where a job's supervisors run (DESIGN.md, "Backends"):
 *
 *   local   this machine: `trainctl run` is the supervisor (launch.h);
 *   slurm   sbatch + srun: the batch script runs the job-level driver
 *           (launch_multinode) on the first node, and srun starts one
 *           `trainctl supervise-node` per node for every attempt.
 *
 * Each backend is an ops struct (STYLE.md); the CLI, the server and the
 * job service (jobs/jobs.h) pick one by the spec's backend: key
 * (backend_find) or, for a stored job, by its backend column (backend_of),
 * and never reach into its internals.  Backend code prints nothing: what a
 * person should see while an action runs goes to backend_env.say.
 *
 * Slurm needs a filesystem shared by the submit host and every node for
 * $TRAINCTL_HOME (the database and the run folders), the trainctl binary
 * and the job's workdir (docs/slurm.md).
 */
#ifndef TC_BACKEND_H
#define TC_BACKEND_H

#include <stdbool.h>

#include <jansson.h>

#include "backend/names.h"
#include "core/err.h"
#include "core/sbuf.h"
#include "jobs/state.h"
#include "launch/launch.h"
#include "spec/spec.h"
#include "store/store.h"

/*
 * What an action runs with: the state folder, and where it tells a person
 * what it is doing (the CLI prints each line, the server logs it; say NULL:
 * nobody is told).
 */
struct backend_env {
	const char *home;
	void (*say)(void *arg, const char *line);
	void *say_arg;
	/*
	 * A server's job (docs/security.md): the commands that submit and stop
	 * it (sbatch, scancel) get exactly env (the server's allowlist,
	 * server/jobenv.c) instead of our environment, and run as the job's
	 * account `user` (its uid, gid and groups) when we are root and it is
	 * another account.  NULL: ours, as we are (the CLI).
	 */
	const struct strvec *env;
	const char *user;
};
void backend_say(const struct backend_env *env, const char *fmt, ...) TC_PRINTF(2, 3);

struct backend_ops {
	enum backend_id id; /* its name is backend_names[id] */
	/*
	 * `trainctl run`: run a validated spec to its end in the foreground
	 * (launch_run's contract: 0 with *exit_status, or a negative TC_E*).
	 */
	int (*run)(const struct spec *s, const struct launch_opts *o, char **job_id,
		   int *exit_status, struct tc_err *err);
	/*
	 * Submit a job that exists in the store (state queued, run folder made)
	 * without waiting for it; NULL when the backend has no queue of its own.
	 */
	int (*submit)(const struct backend_env *env, struct store *st, const struct spec *s,
		      const char *job_id, struct tc_err *err);
	/*
	 * Ask a job that has not ended to stop; why is recorded first, so that
	 * its supervisor records the state it names (JOB_STOP_NONE: `trainctl
	 * stop` without a server, a plain SIGTERM).  A job nothing runs yet ends
	 * killed when why is JOB_STOP_STOPPED.  TC_EUSAGE when there is nothing
	 * to stop or the backend cannot stop for why.
	 */
	int (*stop)(const struct backend_env *env, struct store *st, const struct job_row *j,
		    enum job_stop why, struct tc_err *err);
	/*
	 * Hold a job until it is resumed (a running one is stopped for
	 * JOB_STOP_PAUSED, a queued one just held), and let it go again; NULL
	 * when the backend cannot pause its jobs.
	 */
	int (*pause)(const struct backend_env *env, struct store *st, const struct job_row *j,
		     struct tc_err *err);
	int (*resume)(const struct backend_env *env, struct store *st, const struct job_row *j,
		      struct tc_err *err);
	/* ps / show / logs, the server: bring the stored state of a job that has not ended up to date. */
	int (*reconcile)(struct store *st, struct job_row *j, struct tc_err *err);
	/*
	 * A job that ended: bring the backend's own record of it to its end
	 * (slurm: Slurm's final job state); *done when there is no more to
	 * learn.  NULL: the end is all there is.  The server asks for a while
	 * after each end; nothing else does, so that a finished job never
	 * needs its backend.
	 */
	int (*settle)(struct store *st, struct job_row *j, bool *done, struct tc_err *err);
	/* Add what the backend knows of j to its JSON form (show); NULL: nothing. */
	void (*to_json)(const struct job_row *j, json_t *o);
};

extern const struct backend_ops backend_local;
extern const struct backend_ops backend_slurm;

/*
 * What a backend decides about a spec on the submit host, before the job
 * is recorded: for slurm, the container runtime of an image: job
 * (container_slurm_runtime, written into s; TC_ESPEC when there is none).
 * Nothing for local.
 */
int backend_prepare(const struct backend_ops *be, struct spec *s, struct tc_err *err);

/* By name ("local", "slurm"); NULL for an unknown name. */
const struct backend_ops *backend_find(const char *name);
/* The backend of a stored job (its backend column). */
const struct backend_ops *backend_of(const struct job_row *j);
static inline const char *backend_name(const struct backend_ops *b)
{
	return backend_names[b->id];
}
/*
 * backend_of(j)->reconcile(j) for a job that has not ended: what ps, show
 * and logs call for each job.  An ended job is left as stored: it needs no
 * backend (Slurm may be gone).
 */
int backend_reconcile(struct store *st, struct job_row *j, struct tc_err *err);
/*
 * Would backend_reconcile record j lost?  A local job marked active whose
 * supervisor (pid and start time) no longer runs; a Slurm job's state is
 * Slurm's to tell (false).  A read: `trainctl doctor` reports it first.
 */
bool backend_supervisor_gone(const struct job_row *j);

/*
 * `trainctl server` is the hub of the jobs it submits (hub/hub.h): url is
 * where their supervisors reach its POST /api/v1/hub/{job}/events; NULL:
 * they write the database themselves (a shared state folder).
 */
void backend_set_hub(const char *url);
/*
 * The server's job that reported to it while it was down (docs/hub.md):
 * its supervisors gave up waiting (TRAINCTL_HUB_WAIT) and left what the
 * server never acknowledged in their journals on the job's nodes.  Once
 * its backend is done with it, backend_pull_start starts taking those
 * journals in the background (slurm: `srun --nodelist=<its nodes>
 * trainctl hub JOB --flush`, as env->user with exactly env->env, like its
 * sbatch and scancel, under a new secret of the job that h now expects),
 * and *out is that pull; *out NULL: nothing to take now, because the
 * backend still runs the job (*later) or the job never ran on a node.
 * backend_pull_done: has it ended (then *said: what it did, for the log)?
 * backend_pull_free: ends one still running (the server stops), frees.
 */
struct backend_pull;
struct hub;
int backend_pull_start(const struct backend_env *env, struct store *st, struct hub *h,
		       const char *job_id, bool *later, struct backend_pull **out,
		       struct tc_err *err);
bool backend_pull_done(struct backend_pull *p, struct sbuf *said);
void backend_pull_free(struct backend_pull *p);

/* ---- slurm (slurm.c, sbatch.c) ---- */

/* What job.sbatch is written from. */
struct slurm_script_in {
	const struct spec *spec;
	const char *job_id, *home, *run_dir;
	const char *exe; /* the trainctl binary every node runs (shared filesystem) */
};
/* The gres name of a device type ("gpu" for gpu and rocm), NULL for none (cpu). */
const char *slurm_gres_of(const char *device_type);
/* The batch script (heap text): #SBATCH lines, then exec trainctl slurm-batch. */
char *slurm_script(const struct slurm_script_in *in);
/*
 * A server's team mapping (docs/slurm.md, "Teams and Slurm accounts"):
 * s's Slurm job is charged to account, and to qos when not NULL; they
 * replace what the spec's slurm: named.  The words of what changed (none:
 * empty) go to said.
 */
void slurm_spec_charge(struct spec *s, const char *account, const char *qos, struct sbuf *said);

/*
 * trainctl's state for a Slurm job state (JOB_STATE names) into *out, and
 * whether it is final; false for a state the table does not have.
 */
bool slurm_state_map(const char *slurm_state, enum job_state *out, bool *final);

/*
 * `trainctl slurm-batch JOB` (the body of job.sbatch): launch_multinode with
 * one srun per attempt.  *exit_status is the batch script's exit status.
 */
int slurm_batch_main(const char *home, const char *job_id, int *exit_status, struct tc_err *err);

/* `trainctl supervise-node JOB` (under srun): one node's attempt. */
struct slurm_node_args {
	const char *home, *job_id;
	int attempt;
	const char *master;      /* ADDR:PORT */
	const char *resume_from; /* or NULL */
};
int slurm_node_main(const struct slurm_node_args *a, int *exit_status, struct tc_err *err);

/*
 * `trainctl hub JOB` (started by ps/show/logs on the submit host when the
 * job's hub is gone): take the supervisors' events until the job has ended
 * and Slurm is done with it.
 */
int slurm_hub_main(const char *home, const char *job_id, struct tc_err *err);

/*
 * Run a program and collect its output: argv[0] is looked up on PATH,
 * input (or NULL) is its stdin.  *status is the wait status; a program
 * that cannot be started gives TC_EBACKEND naming it.
 */
int slurm_command(const char *const *argv, const char *input, struct sbuf *out,
		  struct sbuf *errout, int *status, struct tc_err *err);

#endif
