/*
 * server_int.h -- private to src/server/: the server's state shared by the
 * main loop (server.c), the HTTP API (api.c, stream.c) and telemetry.
 *
 * Locking: srv->mu guards everything below it in struct srv, the main
 * store connection included.  Request threads take it for short work;
 * streams (SSE) open their own store connection and never hold it while
 * they wait.
 */
#ifndef TC_SERVER_INT_H
#define TC_SERVER_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/proc.h"
#include "jobs/state.h"
#include "sched/sched.h"
#include "server/server.h"
#include "server/teams.h"
#include "store/store.h"

struct MHD_Daemon;

struct backend_ops;

struct sjob {
	char *id, *user, *type, *name, *run_dir;
	char *team;          /* its team (teams_srv.c), or NULL */
	enum job_state state;
	enum job_stop stop_reason;
	int priority, count, restarts, max_restarts;
	long max_runtime; /* limits.max_runtime, seconds; 0: none (sched.h rule 8) */
	bool preemptible;
	double created;
	int *want;           /* count ids or NULL */
	enum sched_state st;
	int *ids;            /* held devices (count) or NULL */
	pid_t pid;
	unsigned long long ticks;
	bool ran;            /* ran before: resume from the newest checkpoint */
	bool term_sent;
	/*
	 * Its backend.  One with a queue of its own (be->submit: slurm) gets
	 * the job when queued, and is then followed by polling it (reconcile).
	 */
	const struct backend_ops *be;
	double next_poll;
	/*
	 * Found running when this server started: its supervisors may have
	 * given up on us meanwhile, so what its nodes kept is pulled once
	 * its backend is done with it (backend_pull_start), before its end.
	 */
	bool pull;
	struct backend_pull *pulling;
	/* telemetry */
	unsigned long long cpu_ticks;
	double cpu_time;
	/* /metrics (prom.c): when it was queued last and when it started (0: not) */
	double queued_at, started_at;
};

/*
 * The counters and histograms of /metrics that the server keeps as it
 * learns of events (prom.c): since this server started, so they begin at
 * 0 again after a restart (Prometheus's rate() and increase() take that as
 * a counter reset).  Guarded by mu.
 */
#define SRV_HIST_MAX 12
struct srv_hist {
	long long count[SRV_HIST_MAX + 1]; /* per bucket (not cumulative); the last: +Inf */
	double sum;
};
struct srv_prom {
	long long ends[JOB_NSTATES]; /* jobs that ended, by their final state */
	long long hangs;             /* hang notes of the watchdog */
	long long restarts;          /* attempts restarted (restarting events) */
	struct srv_hist wait, run;   /* queue wait per start; run time per end */
};

/* An ended job whose backend's record of it is not final yet (backend_ops.settle). */
struct settle {
	char *id;
	const struct backend_ops *be;
	double next, until;
	bool pull; /* sjob.pull and .pulling, taken over from the job */
	struct backend_pull *pulling;
};

struct srv {
	struct server_opts o;
	char *home, *exe, *os_user;
	int lock_fd;                /* flock'ed $home/server.lock: one server per state folder */
	unsigned long long self_ticks; /* with getpid(): holds leases while starting a job */
	bool loopback;
	volatile sig_atomic_t stopping;
	struct MHD_Daemon *mhd;
	struct MHD_Daemon *mhd_unix;    /* the Unix socket's daemon: local accounts (SO_PEERCRED) */
	struct api_listener { struct srv *s; bool unix_; } lis_tcp, lis_unix;
	int unix_fd;
	bool unix_made;                 /* we made socket_path: unlinked at the end */
	char *socket_path;
	/*
	 * The hub of the supervisors it starts (hub/hub.h): hub routes only,
	 * on $home/hub.sock, which any account may connect to (each request
	 * carries its job's secret); NULL when it could not start.
	 */
	struct hub_daemon *hub_unix;
	char *hub_sock;
	char *hub_key;              /* hex key the jobs' secrets are derived from (privsep.c) */
	long port;                      /* of --listen: the Host check's */
	struct sessions *sessions;      /* cookies and one-time login tickets (auth.c) */
	struct guard *guard;            /* connection limits, header deadline (guard.c) */
	struct eporigin *eporigin;      /* one origin per endpoint (eporigin.c), or NULL */
	/* listings (api_jobs.c) read through their own connection, opened without
	 * SQLite's per-call lock, so one listing at a time under list_mu, and
	 * without mu: the scheduler and other requests do not wait for them */
	pthread_mutex_t list_mu;
	struct store *list_st;

	pthread_mutex_t mu;
	pthread_cond_t wake;
	bool woken;                 /* srv_wake since the last round */
	struct store *st;
	struct sjob *jobs;
	size_t njobs, alloc;
	struct settle *settling;
	size_t nsettling, settling_alloc;
	bool dirty;                 /* the queue order must be rebuilt */
	bool devs_moved;            /* a device changed hands: the devices page is redone now */
	size_t *queue;              /* queued job indices in order */
	size_t nqueue, queue_alloc;
	struct sched_dev *devs;     /* the node's devices (owner = index into jobs) */
	size_t ndevs;
	char **lease_job;           /* per device: the job whose lease holds it, or NULL */
	struct sched_quota *quotas;
	size_t nquotas;
	struct teams teams;         /* the settings file's teams: (teams_srv.c) */
	struct sched_team_limit *team_limits; /* the scheduler's rows of them */
	size_t nteam_limits;
	/* fair share (sched/fairshare.h; queue.c): the table of decayed usage, read from
	 * the store at most every few seconds; NULL while fair share is off */
	struct fs_table *fs;
	double fs_next;             /* when it is read again; 0: at the next round */
	long long last_event;
	double next_sample;
	double next_retention;      /* the next removal of old finished jobs (--retention) */
	double next_sweeps;         /* the next round of the running sweeps (sweeps.c) */
	char *devices_json;         /* the latest telemetry of every device */
	long long submitted, requests;
	double sched_ns_total;      /* time spent deciding, for /metrics */
	long long sched_calls;
	struct notifier *nf;        /* the queued event's webhooks (notify_srv.c) */
	struct srv_health *health;  /* device health (health_srv.c) */
	struct srv_prom prom;       /* /metrics' counters (prom.c) */
};

/* ---- prom.c: /metrics ---- */
/* One event the server read from the store (mu held); j is its job in memory, or NULL. */
void srv_prom_event(struct srv *s, const struct store_event *ev, struct sjob *j);

/* ---- health_srv.c: device health (caller holds mu) ---- */
/* Check every device of a checked type; record what changed. */
void srv_health_refresh(struct srv *s);
/* Unhealthy free devices out of the pool (SCHED_UNHEALTHY), healthy ones back in. */
void srv_health_apply(struct srv *s);
/* Why scheduler device dev is unhealthy, or NULL. */
const char *srv_health_of(const struct srv *s, size_t dev);
void srv_health_end(struct srv *s);

/* ---- notify_srv.c: webhooks ---- */
struct spec;
void srv_notify_start(struct srv *s);
void srv_notify_end(struct srv *s);
/*
 * A spec's hooks as a job of this server may have them: TC_EUSAGE for a
 * secret_env (a server's environment is not the user's; secret_file is
 * read as the job's account).  The server's own hooks are never written
 * into a spec: they stay the server's (notify_srv.c).
 */
int srv_notify_check(const struct spec *sp, struct tc_err *err);
/* The queued event of a job just submitted (never blocks). */
void srv_notify_queued(struct srv *s, const struct spec *sp, const char *id, const char *user);

/* ---- teams_srv.c: teams (server/teams.h); caller holds mu unless said ---- */
/* (Re)read the teams of o.config; on an error the old ones stay. */
int srv_teams_load(struct srv *s, struct tc_err *err);
/* srv_teams_load for a reload (SIGHUP, the API): logs what it did or why it kept the old. */
int srv_teams_reload(struct srv *s, struct tc_err *err);
void srv_teams_end(struct srv *s);
/*
 * The team of user's new job (*team heap or NULL: no teams) and the team's
 * default time limit (*max_runtime seconds, 0: the server's); locked: caller holds mu.
 */
int srv_team_pick(struct srv *s, const char *user, const char *asked, bool locked, char **team,
		  long *max_runtime, struct tc_err *err);
/* How long finished jobs of team (NULL: none) are kept: the team's retention:, else --retention. */
double srv_team_retention(const struct srv *s, const char *team);
/* Team name's JSON (-1: no such team), or every team's ({"teams": [...]}) for NULL. */
int srv_teams_json(struct srv *s, const char *name, struct sbuf *out);
/*
 * A team's devices per type (its rows, then the types its jobs use beyond
 * them), held and waited for, and its waiting jobs: for the teams API and
 * the Prometheus series (mu held).
 */
#define TEAM_TYPES 16
struct team_counts {
	const char *types[TEAM_TYPES];
	int guarantee[TEAM_TYPES], borrow[TEAM_TYPES]; /* [0, nshare): the team's rows */
	int in_use[TEAM_TYPES], borrowed[TEAM_TYPES], waiting[TEAM_TYPES];
	size_t ntypes, nshare;
	int running, queued;
	double oldest_wait; /* seconds its longest-waiting job has waited; 0: none */
};
void srv_team_counts(const struct srv *s, const struct team *t, struct team_counts *c);

/* queue.c: the jobs in memory, called with mu held */
struct sjob *srv_find(struct srv *s, const char *id);
void srv_wake(struct srv *s);
/* Devices of j go back to the pool, and so do its leases (store.h). */
void release_devices(struct srv *s, struct sjob *j);
/* What j holds, freed (j itself is an element of s->jobs). */
void sjob_release(struct sjob *j);
/* An active job read from the store into memory (a restart's). */
struct job_row;
struct sjob *srv_load_job(struct srv *s, const struct job_row *r);
/* The scheduler's view of the jobs in memory, parallel to s->jobs (sched.h), each
 * with its fair-share factor from s->fs; heap. */
struct sched_job *srv_sched_view(struct srv *s);
/*
 * Fair share (sched/fairshare.h): whether it is on and its half-life, from
 * the command line, else the settings file, else the defaults (on when there
 * are teams; 7 days); and the table of usage read again when it is due (at
 * most every few seconds: one query), the queue re-sorted by the new factors.
 */
bool srv_fairshare_on(const struct srv *s, double *half_life);
void srv_fairshare_refresh(struct srv *s);
void srv_fairshare_end(struct srv *s);
/*
 * Why the queued job id waits (`show`, the API): {"why": TEXT, "behind":
 * the job whose reservation holds it or null, "reserved_from": the
 * reservation's time or null} by sched.h rules (3), (5) and (8) to (10); NULL
 * when it is not queued here.
 */
struct json_t *srv_waiting_json(struct srv *s, const char *id);
/*
 * The local queue in order: {"jobs": [{position, id, name (the viewer's
 * own jobs, or all), user, team, type, count, priority, waited_seconds,
 * why, behind, reserved_from}, ...], "total": N}, for GET /api/v1/queue
 * and `trainctl queue` (mu held).
 */
struct json_t *srv_queue_json(struct srv *s, const char *viewer, bool all);
/*
 * server.c: one round of the loop (mu held): what the supervisors did, the
 * jobs of other backends, the sweeps, scheduling, and the telemetry every
 * period seconds.
 */
void srv_round(struct srv *s, double period);
/* server.c: called with mu held */
/*
 * Apply the state changes supervisors wrote since the last round (caller
 * holds s->mu): an action right after a job paused or ended must see it,
 * not the view of up to one round ago.
 */
void srv_catch_up(struct srv *s);
/*
 * Stop, pause or preempt a job (why) through jobs.h and its backend, and
 * bring memory in step.  Never waits: a backend that waits out a grace
 * time (slurm) is stopped by the caller outside the lock.
 */
int srv_stop_job(struct srv *s, struct sjob *j, enum job_stop why, struct tc_err *err);
/*
 * srvlog.c: what backends and jobs.h say while the server acts
 * (backend_env.say; arg: the srv): its log.
 */
void srv_say(void *arg, const char *line);
/* queue.c: does j's backend queue and run it itself (it is submitted, then followed)? */
bool srv_external(const struct sjob *j);
/*
 * external.c: a backend with a queue of its own (slurm) gets the queued job
 * j; a refused submission ends the job failed and forgets it.
 */
void srv_submit_external(struct srv *s, struct sjob *j);
/* external.c: the jobs such backends have, followed (backend_reconcile) and settled. */
void srv_poll_external(struct srv *s);
/* external.c: follow an ended job's backend record for a while (backend_ops.settle). */
void srv_settle_add(struct srv *s, struct sjob *j);
/* Is j, lost by its supervisor and not asked to stop, queued again (within its restarts)? */
bool srv_lost_requeues(const struct sjob *j);
/* queue.c: add a job just created in the store to memory (queued). */
void srv_add_queued(struct srv *s, const char *id, const char *user, const char *name,
		    const char *type, int count, const int *want, int priority, bool preemptible,
		    double created, int max_restarts, const char *run_dir,
		    const struct backend_ops *be);
/* queue.c: the job left memory (terminal or deleted): devices freed. */
void srv_forget(struct srv *s, const char *id);
/* Put a paused job back in the queue. */
int srv_resume_job(struct srv *s, struct sjob *j, struct tc_err *err);

/* sweeps.c: a round of every running sweep of the server (mu held) */
void srv_sweeps(struct srv *s);
/*
 * A sweep's admission as the stored sweep says it: its owner, and whether
 * an admin submitted it (the admin-only options its trials may give were
 * checked against that, as a submit's are).
 */
#define SWEEP_ADMIN_KEY "admitted_by_admin"
/*
 * One trial of sweep d (its overrides params_json, its job named name or
 * the spec's) through the admission door as owner: queued (id, heap), or
 * only checked when dry.  locked: the caller holds s->mu.
 */
struct sweep_def;
unsigned srv_admit_trial(struct srv *s, const char *owner, bool admin, const struct sweep_def *d,
			 const char *params_json, const char *name, bool locked, bool dry, char **id,
			 struct tc_err *err);

/*
 * jobenv.c: the server environment a job inherits (docs/security.md):
 * PATH, LANG, LC_*, TZ, accelerator runtimes' variables, trainctl's own
 * knobs and the names in extra (--pass-env); never credentials.
 */
bool srv_env_passes(const char *entry, const char *const *extra);
/* The entries of environ_ that pass, appended to out. */
void srv_job_env(char *const *environ_, const char *const *extra, struct strvec *out);
struct notify_hook;
/*
 * NOTIFY_SERVER_ENV (notify/notify.h) into out: which events the server's
 * own hooks want, which the job's supervisors relay to the hub (never the
 * hooks' secrets).  srv_supervisor_env does it; a Slurm job's sbatch
 * environment gets it too.
 */
void srv_notify_env(const struct notify_hook *hooks, size_t nhooks, struct strvec *out);
/*
 * srv_job_env plus srv_notify_env, named in TRAINCTL_SUPERVISOR_ONLY so
 * that the workers do not get it.  Never a secret of the server's: not its
 * webhooks' either (issue 23, M3).
 */
void srv_supervisor_env(char *const *environ_, const char *const *extra,
			const struct notify_hook *hooks, size_t nhooks, struct strvec *out);

/*
 * api_secrets.c: a spec's {secret:} values at submit (each must be in
 * user's store; TC_EINPUT naming the missing) and their handover to the
 * supervisor of job_id when it starts (SECRET_ENV_VAR in env; TC_ESTORAGE
 * when one is gone since).
 */
struct spec;
int srv_secrets_check(struct srv *s, const char *user, const struct spec *sp, bool own_queue,
		      struct tc_err *err);
int srv_secrets_handover(struct srv *s, const char *job_id, struct strvec *env, struct tc_err *err);

/* api/listen.c: both listeners; *login (heap) is the one-time login URL's path and query */
/*
 * privsep.c: fill p (PROC_INIT) to start the supervisor of j on devices as
 * j's account, reporting to this server's hub; *groups (heap, the caller
 * frees it after the start) backs p->groups, and p->in.fd (the spec, a
 * memfd; -1 on failure) is the caller's to close after the start.  Refused:
 * the job's user has no account or maps to root on a root server; its run
 * folder is not ours.
 */
int srv_supervisor_proc(struct srv *s, const struct sjob *j, const char *devices,
			struct proc *p, gid_t **groups, struct tc_err *err);
void srv_privsep_end(struct srv *s);
/*
 * privsep.c: the journals j's gone supervisor left in its run folder, read
 * by the hub as untrusted input (hub.h: hub_ingest_journals), at most
 * TRAINCTL_HUB_INGEST_MAX bytes each (server's environment; default 256 MiB).
 */
struct hub_ingest_result;
int srv_ingest_journals(struct srv *s, const struct sjob *j, struct hub_ingest_result *res,
			struct tc_err *err);
/* api/api.c: the hub of this server's supervisors (its own store connection); NULL: err says why */
struct hub *srv_hub(struct srv *s, struct tc_err *err);
/* privsep.c: that hub freed, after every listener stopped (a request would make a new one). */
void srv_hub_end(void);
/* Seconds a supervisor waits at its end for the hub (TRAINCTL_HUB_WAIT unless the server's env sets it). */
#define SRV_SUPERVISOR_WAIT "60"

int api_start(struct srv *s, char **login, struct tc_err *err);
void api_stop(struct srv *s);

/* telemetry.c: sample every running job and device (mu held) */
void telemetry_sample(struct srv *s);

#endif
