/*
 * slurm_int.h -- private to backend/: what the parts of backend: slurm
 * share.  slurm.c runs Slurm's commands, keeps the stored job in step with
 * Slurm's view of it, submits and stops (the ops table, backend_slurm);
 * slurm_run.c is `trainctl run` in the foreground; slurm_batch.c runs
 * inside the allocation (slurm-batch, supervise-node).  Design notes and
 * the processes of one job: slurm.c.
 */
#ifndef TC_BACKEND_SLURM_INT_H
#define TC_BACKEND_SLURM_INT_H

#include "backend/backend.h"

#include <stdbool.h>
#include <sys/types.h>

/*
 * A Slurm command p of be's job (backend.h: a server's job gets exactly
 * be->env and runs as be->user when we are root), else with our own
 * environment (be NULL); *gids holds the account's groups until p has run.
 */
struct proc;
int slurm_as_job_user(const struct backend_env *be, struct proc *p, gid_t **gids,
		      struct tc_err *err);

/* A wait status of a Slurm command: exited 0? */
bool slurm_exited_ok(int status);

/* What `scontrol show job` says of one Slurm job; strings on the heap. */
struct slurm_jobinfo {
	char *state;   /* JobState, e.g. RUNNING; NULL: Slurm does not know the job */
	char *reason;  /* Reason */
	char *nodes;   /* NodeList */
	int restarts;  /* Restarts (requeues) */
	char *exit;    /* ExitCode "0:0" */
};
void slurm_jobinfo_release(struct slurm_jobinfo *j);
/* Ask Slurm about job id; out->state NULL when Slurm does not know it. */
int slurm_jobinfo_query(const char *id, struct slurm_jobinfo *out, struct tc_err *err);
/*
 * Bring the stored job up to date with Slurm's view (design note 2).
 * *final: Slurm is done with the job and its stored state is terminal.
 */
int slurm_sync_state(struct store *st, const char *job_id, const char *slurm_id,
		     const struct slurm_jobinfo *sj, bool *final, struct tc_err *err);

/* HOME/runs/JOB (heap). */
char *slurm_run_dir_of(const char *home, const char *job_id);
/* sbatch --test-only: refused requests get Slurm's words and nothing is recorded. */
int slurm_test_only(const char *script, struct tc_err *err);
/* backend_slurm.submit: write job.sbatch, sbatch it, record its id and queued. */
int slurm_submit(const struct backend_env *env, struct store *st, const struct spec *s,
		 const char *job_id, struct tc_err *err);
/* Where a hub's job has Slurm write its batch output on the first node (slurm_submit_env). */
#define SLURM_HUB_OUTPUT_DIR "/tmp"
/*
 * The same, with "K=V" (NULL-terminated) added to sbatch's environment
 * only; with env_add, Slurm's output goes to SLURM_HUB_OUTPUT_DIR.
 */
int slurm_submit_env(const struct backend_env *env, const char *const *env_add,
		     struct store *st, const struct spec *s, const char *job_id,
		     struct tc_err *err);
/* ---- slurm_hub.c: the hub of a job run without a server ---- */
struct slurm_hub;
struct strvec;
/* Does this run want a hub (TRAINCTL_HUB is not "off")? */
bool slurm_hub_wanted(void);
/*
 * Listen for job_id's supervisors (TRAINCTL_HUB_LISTEN=ADDR[:PORT], default
 * this host's address, any port), record the hub's URL and the secret's
 * hash, and push "K=V" for sbatch's environment onto env_add.
 */
int slurm_hub_start(struct store *st, const char *home, const char *job_id,
		    const struct spec *s, struct slurm_hub **out, struct strvec *env_add,
		    struct tc_err *err);
const char *slurm_hub_url(const struct slurm_hub *sh);
/* A new secret for job_id, its hash and url recorded, "K=V" for sbatch pushed onto env_add. */
int slurm_hub_register(struct store *st, const char *job_id, const struct spec *s,
		       const char *url, struct strvec *env_add, struct tc_err *err);
/* The URL backend_set_hub gave (the server's), unless TRAINCTL_HUB=off; else NULL. */
const char *slurm_server_hub(void);
void slurm_hub_stop(struct slurm_hub *sh);
/* j has not ended and its hub does not answer: start `trainctl hub JOB` detached. */
void slurm_hub_revive(struct store *st, const struct job_row *j);
/* Does a `trainctl hub` of this host hold job_id (it follows the job's Slurm state itself)? */
bool slurm_hub_held(const char *home, const char *job_id);

/* scancel [--signal=signal_name] id */
int slurm_scancel(const char *id, const char *signal_name, struct tc_err *err);
/* The same for a job of be (backend.h: a server's job, as its account). */
int slurm_scancel_as(const struct backend_env *be, const char *id, const char *signal_name,
		     struct tc_err *err);

/* slurm_run.c: backend_slurm.run */
int slurm_run(const struct spec *s, const struct launch_opts *o, char **job_id,
	      int *exit_status, struct tc_err *err);

#endif
