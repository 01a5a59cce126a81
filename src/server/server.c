/*
 * server.c -- the main loop of `trainctl server`: lock the state folder,
 * rebuild the active jobs from the store, then every tick apply the events
 * supervisors wrote, find supervisors that died, run the scheduler (around
 * the devices others lease) and start supervisors, and sample telemetry.
 * See server.h for the invariants.
 */
#include "server/server_int.h"
#include "hub/hub.h"
#include "backend/backend.h"
#include "core/proc.h"
#include "core/util.h"
#include "jobs/jobs.h"
#include "jobs/usage.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "launch/attempt.h"
#include "launch/launch.h"
#include "spec/spec.h"
#include "server/srvlog.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;


static void logf_(struct srv *s, const char *fmt, ...) TC_PRINTF(2, 3);

static void logf_(struct srv *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	srvlog_act_v(s->o.quiet, fmt, ap);
	va_end(ap);
}

/* ---- supervisors ---- */

/*
 * Start `trainctl supervise JOB --devices IDS` detached (proc.h:
 * proc_start_detached), so the supervisor is nobody's child here
 * (invariant 2), as the job's account and reporting to our hub
 * (privsep.c); it sends its own output to logs/supervisor.out.
 */
static pid_t spawn_supervisor(struct srv *s, struct sjob *j, const char *devices,
			      struct tc_err *err)
{
	struct proc p = PROC_INIT;
	gid_t *groups = NULL;
	pid_t result = -1;
	/* the job's {secret:} values, from its user's store: the supervisor takes them out at once */
	int rc = srv_supervisor_proc(s, j, devices, &p, &groups, err);
	if (!rc)
		rc = srv_secrets_handover(s, j->id, &p.env, err);
	if (!rc)
		rc = proc_start_detached(&p, err);
	if (rc)
		tc_error_prefix(err, "cannot start the supervisor of %s", j->id);
	else
		result = p.pid;
	if (p.in.how == PROC_IO_FD && p.in.fd >= 0)
		close(p.in.fd); /* the spec's memfd: the supervisor has its own */
	proc_clear(&p);
	free(groups);
	return result;
}

/* Device (type, id) as the scheduler knows it, or NULL. */
static struct sched_dev *find_dev(struct srv *s, const char *type, int id)
{
	for (size_t i = 0; i < s->ndevs; i++)
		if (s->devs[i].id == id && !strcmp(s->devs[i].type, type))
			return &s->devs[i];
	return NULL;
}

/* Device d is held by a lease of job (rule 6 of sched.h). */
static void mark_leased(struct srv *s, struct sched_dev *d, const char *job)
{
	size_t i = (size_t)(d - s->devs);
	d->owner = SCHED_LEASED;
	free(s->lease_job[i]);
	s->lease_job[i] = xstrdup(job);
}

/*
 * Leases of jobs the server does not run (`trainctl run`) take their
 * devices out of the pool until they end; read again every round.
 */
static void refresh_leases(struct srv *s)
{
	for (size_t i = 0; i < s->ndevs; i++)
		if (s->devs[i].owner == SCHED_LEASED) {
			s->devs[i].owner = SCHED_FREE;
			free(s->lease_job[i]);
			s->lease_job[i] = NULL;
		}
	struct store_lease *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	if (store_leases_held(s->st, &v, &n, &err)) {
		logf_(s, "warning: %s", err.msg);
		tc_err_release(&err);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		struct sched_dev *d = find_dev(s, v[k].type, v[k].id);
		if (d && d->owner == SCHED_FREE && !srv_find(s, v[k].job_id))
			mark_leased(s, d, v[k].job_id);
	}
	store_leases_free(v, n);
}

/*
 * Lease the devices the scheduler chose for j, held by the server until
 * the supervisor takes them over (store_job_launch).  TC_EBUSY when a `run`
 * took one since the last round: j waits, and the device is marked leased.
 */
static int lease_for(struct srv *s, struct sjob *j, const int *ids)
{
	if (!strcmp(j->type, "cpu"))
		return 0;
	int *got = xcalloc((size_t)j->count, sizeof(int));
	struct store_lease busy;
	struct tc_err err = TC_ERR_INIT;
	int rc = store_lease_take(s->st, j->id, j->type, ids, j->count, j->count, getpid(),
				  s->self_ticks, got, &busy, &err);
	free(got);
	if (rc == TC_EBUSY && busy.job_id) {
		struct sched_dev *d = find_dev(s, busy.type, busy.id);
		if (d && d->owner == SCHED_FREE)
			mark_leased(s, d, busy.job_id);
		logf_(s, "job %s waits: %s", j->id, err.msg);
	} else if (rc) {
		logf_(s, "warning: job %s: %s", j->id, err.msg);
	}
	store_lease_release(&busy);
	tc_err_release(&err);
	return rc;
}

/* 0: j started (or failed and is forgotten); else lease_for's error, j still queued. */
static int start_job(struct srv *s, struct sjob *j, const int *ids)
{
	int rc = lease_for(s, j, ids);
	if (rc)
		return rc;
	struct tc_err err = TC_ERR_INIT;
	char *devs = device_ids_text(ids, j->count);
	pid_t pid = spawn_supervisor(s, j, devs, &err);
	if (pid > 0) {
		j->pid = pid;
		j->ticks = proc_start_ticks(pid);
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "scheduled on %s %s", j->type, devs);
		if (jobs_launch(s->st, j->id, devs, j->pid, j->ticks, why.buf, &err)) {
			logf_(s, "warning: %s", err.msg);
		}
		sbuf_release(&why);
		j->st = SJ_RUNNING;
		j->state = JOB_STARTING;
		j->term_sent = false;
		j->started_at = now_wall(); /* its limit counts from here (sched.h rule 8) */
		j->ids = xcalloc((size_t)j->count, sizeof(int));
		memcpy(j->ids, ids, (size_t)j->count * sizeof(int));
		int idx = (int)(j - s->jobs);
		for (int k = 0; k < j->count; k++)
			for (size_t i = 0; i < s->ndevs; i++)
				if (s->devs[i].id == ids[k] && !strcmp(s->devs[i].type, j->type))
					s->devs[i].owner = idx;
		logf_(s, "job %s started on %s %s (supervisor pid %ld)", j->id, j->type, devs, (long)pid);
	} else {
		struct tc_err e2 = TC_ERR_INIT;
		if (jobs_finish(s->st, j->id, JOB_FAILED, 3, err.msg, err.msg, &e2))
			logf_(s, "warning: %s", e2.msg);
		if (strcmp(j->type, "cpu") != 0 && store_lease_drop(s->st, j->id, &e2))
			logf_(s, "warning: %s", e2.msg);
		tc_err_release(&e2);
		logf_(s, "job %s: %s", j->id, err.msg);
		srv_forget(s, j->id);
	}
	free(devs);
	tc_err_release(&err);
	return 0;
}

int srv_stop_job(struct srv *s, struct sjob *j, enum job_stop why, struct tc_err *err)
{
	bool waiting = j->st == SJ_QUEUED || j->st == SJ_IDLE;
	if (waiting && why == JOB_STOP_PAUSED && j->st == SJ_IDLE)
		return 0;
	if (!waiting && j->term_sent)
		return 0;
	if (!waiting && srv_external(j) && why != JOB_STOP_PAUSED)
		return tc_error(err, TC_EUSAGE, "job %s is stopped through its backend (%s)", j->id,
				backend_name(j->be));
	/* scancel as the job's account (backend.h), like its sbatch */
	struct strvec jenv = STRVEC_INIT;
	srv_job_env(environ, s->o.pass_env, &jenv);
	struct backend_env env = { .home = s->home, .say = srv_say, .say_arg = s, .env = &jenv,
				   .user = j->user };
	struct job_row r = { 0 };
	int rc = store_job_get(s->st, j->id, &r, err);
	if (!rc)
		rc = why == JOB_STOP_PAUSED ? jobs_pause(&env, s->st, &r, err)
					    : jobs_stop(&env, s->st, &r, why, err);
	job_row_release(&r);
	strvec_clear(&jenv);
	if (waiting) {
		/* nothing ran: jobs.h recorded the end (stop) or the hold (pause) itself */
		if (rc)
			return rc;
		if (why == JOB_STOP_PAUSED) {
			j->st = SJ_IDLE;
			j->state = JOB_PAUSED;
			s->dirty = true;
		} else if (why == JOB_STOP_STOPPED) {
			srv_forget(s, j->id);
		}
		return 0;
	}
	if (rc == TC_ESYS) {
		/* the stop is recorded; a supervisor we cannot signal is found gone later */
		logf_(s, "warning: %s", err->msg);
		tc_err_release(err);
		rc = 0;
	}
	if (rc)
		return rc;
	j->stop_reason = why;
	j->st = SJ_STOPPING;
	j->term_sent = true;
	return 0;
}

int srv_resume_job(struct srv *s, struct sjob *j, struct tc_err *err)
{
	struct backend_env env = { .home = s->home, .say = srv_say, .say_arg = s };
	struct job_row r = { 0 };
	int rc = store_job_get(s->st, j->id, &r, err);
	if (!rc)
		rc = jobs_resume(&env, s->st, &r, err);
	job_row_release(&r);
	if (!rc) {
		j->st = SJ_QUEUED;
		j->ran = true;
		j->state = JOB_QUEUED;
		j->stop_reason = JOB_STOP_NONE;
		s->dirty = true;
	}
	return rc;
}

/* ---- what the supervisors did ---- */

/* A lost job is an attempt's outcome like any other: attempt.h decides what follows. */
static void lost_outcome(const struct sjob *j, struct attempt_outcome *o)
{
	*o = (struct attempt_outcome){ .end = ATTEMPT_LOST, .asked = j->stop_reason,
				       .restarts = j->restarts, .max_restarts = j->max_restarts };
}

bool srv_lost_requeues(const struct sjob *j)
{
	struct attempt_outcome o;
	lost_outcome(j, &o);
	return attempt_again(&o);
}

/* The supervisor of j is gone: requeue, hold or end it by what was asked. */
static void requeue_or_end(struct srv *s, struct sjob *j, enum job_state state)
{
	struct tc_err err = TC_ERR_INIT;
	int rc = 0;
	if (state == JOB_PREEMPTED) {
		rc = jobs_requeue(s->st, j->id, JOB_QUEUED, false, "requeued after preemption", &err);
		if (!rc) {
			release_devices(s, j);
			j->st = SJ_QUEUED;
			j->ran = true;
			j->state = JOB_QUEUED;
			j->stop_reason = JOB_STOP_NONE;
			s->dirty = true;
		}
	} else if (state == JOB_PAUSED) {
		release_devices(s, j);
		j->st = SJ_IDLE;
		j->ran = true;
		j->state = JOB_PAUSED;
		s->dirty = true;
	} else if (state == JOB_LOST && srv_lost_requeues(j)) {
		struct attempt_outcome o;
		struct attempt_verdict v;
		lost_outcome(j, &o);
		attempt_decide(&o, &v);
		/* the server is the hub: its verdicts go to the store (attempt.h note 1) */
		rc = jobs_requeue(s->st, j->id, v.state, true, v.why.buf, &err);
		if (!rc) {
			release_devices(s, j);
			j->restarts = v.restarts;
			j->st = SJ_QUEUED;
			j->ran = true;
			j->state = v.state;
			s->dirty = true;
		}
		attempt_verdict_release(&v);
	} else if (job_state_terminal(state)) {
		logf_(s, "job %s %s", j->id, job_state_name(state));
		srv_forget(s, j->id);
	}
	if (rc)
		logf_(s, "warning: %s", err.msg);
	tc_err_release(&err);
}

static void apply_events(struct srv *s)
{
	struct store_event *ev = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	for (int rounds = 0; rounds < 50; rounds++) {
		if (store_events_after(s->st, s->last_event, 1000, &ev, &n, &err)) {
			logf_(s, "warning: %s", err.msg);
			break;
		}
		for (size_t i = 0; i < n; i++) {
			s->last_event = ev[i].id;
			struct sjob *j = srv_find(s, ev[i].job_id);
			srv_prom_event(s, &ev[i], j);
			if (!j)
				continue;
			enum job_state st = ev[i].state;
			if (srv_external(j) && j->st != SJ_QUEUED) {
				/* its backend requeues and suspends it; only its end matters here */
				if (job_state_terminal(st)) {
					logf_(s, "job %s %s", j->id, job_state_name(st));
					srv_settle_add(s, j);
					srv_forget(s, j->id);
				} else {
					j->state = st;
				}
			} else if (job_state_active(st)) {
				if (j->st == SJ_RUNNING || j->st == SJ_STOPPING)
					j->state = st;
			} else if (st == JOB_PREEMPTED || st == JOB_PAUSED || job_state_terminal(st)) {
				if (j->st == SJ_RUNNING || j->st == SJ_STOPPING || job_state_terminal(st))
					requeue_or_end(s, j, st);
			}
		}
		store_events_free(ev, n);
		if (n < 1000)
			break;
	}
	tc_err_release(&err);
}

void srv_catch_up(struct srv *s)
{
	apply_events(s);
}

/*
 * The journals j's gone supervisor left (it waits only a short while for a
 * server that is down, privsep.c): read before the job is called lost.
 * true when any was read.
 */
static bool took_journals(struct srv *s, const struct sjob *j)
{
	struct hub_ingest_result res;
	struct tc_err err = TC_ERR_INIT;
	if (srv_ingest_journals(s, j, &res, &err))
		logf_(s, "warning: job %s: its supervisor's journal: %s", j->id, err.msg);
	if (res.taken)
		logf_(s, "job %s: took %d journal(s) its supervisor left", j->id, res.taken);
	if (res.refused)
		logf_(s, "job %s: refused %d journal(s) its supervisor left (see its events)", j->id,
		      res.refused);
	tc_err_release(&err);
	return res.taken || res.refused;
}

/* Supervisors that vanished without recording an end (invariant 1). */
static void check_alive(struct srv *s)
{
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = &s->jobs[i];
		if ((j->st != SJ_RUNNING && j->st != SJ_STOPPING) || srv_external(j) ||
		    proc_alive(j->pid, j->ticks))
			continue;
		struct job_row r = { 0 };
		struct tc_err err = TC_ERR_INIT;
		if (store_job_get(s->st, j->id, &r, &err)) {
			tc_err_release(&err);
			continue;
		}
		if (!job_state_terminal(r.state) && r.state != JOB_PREEMPTED && r.state != JOB_PAUSED &&
		    took_journals(s, j)) {
			/* what it left in its journal may hold its end */
			job_row_release(&r);
			if (store_job_get(s->st, j->id, &r, &err)) {
				tc_err_release(&err);
				continue;
			}
		}
		if (job_state_terminal(r.state) || r.state == JOB_PREEMPTED || r.state == JOB_PAUSED) {
			/* it recorded its end (or hold); the event is on its way */
			job_row_release(&r);
			continue;
		}
		int rc;
		struct sbuf why = SBUF_INIT;
		if (j->stop_reason == JOB_STOP_PREEMPTED || j->stop_reason == JOB_STOP_PAUSED) {
			/* died before it could record what it was asked */
			rc = jobs_mark_held(s->st, j->id, j->stop_reason, "supervisor ended while stopping",
					    &err);
		} else {
			sbuf_addf(&why, "supervisor (pid %ld) is gone without recording an end", (long)j->pid);
			rc = j->stop_reason != JOB_STOP_NONE
				     ? jobs_finish(s->st, j->id, JOB_KILLED, 3, why.buf, why.buf, &err)
				     : jobs_mark_lost(s->st, j->id, why.buf, &err);
		}
		if (rc)
			logf_(s, "warning: %s", err.msg);
		sbuf_release(&why);
		tc_err_release(&err);
		job_row_release(&r);
		/* the event it wrote updates memory on the next tick */
	}
}

/* ---- scheduling ---- */

/* sched.h rule (8): j starts out of order; say past whom, and why that is safe. */
static void log_backfill(struct srv *s, const struct sjob *j, const struct sjob *ahead, double at)
{
	struct sbuf when = SBUF_INIT, lim = SBUF_INIT;
	format_time_utc(&when, at);
	format_duration(&lim, j->max_runtime);
	logf_(s, "job %s (max_runtime %s) backfills past %s, whose devices are reserved from %s",
	      j->id, lim.buf, ahead->id, when.buf);
	sbuf_release(&when);
	sbuf_release(&lim);
}

static void schedule(struct srv *s)
{
	refresh_leases(s);
	srv_health_apply(s);
	/* backends with a queue (slurm) allocate the nodes; nothing local is held */
	for (size_t i = 0; i < s->njobs;) {
		struct sjob *j = &s->jobs[i];
		size_t before = s->njobs;
		if (srv_external(j) && j->st == SJ_QUEUED)
			srv_submit_external(s, j);
		if (s->njobs == before)
			i++;
	}
	srv_fairshare_refresh(s); /* rule (1)'s factors: may set dirty */
	struct sched_job *sj = srv_sched_view(s);
	if (s->dirty) {
		s->nqueue = 0;
		for (size_t i = 0; i < s->njobs; i++)
			if (s->jobs[i].st == SJ_QUEUED && !srv_external(&s->jobs[i])) {
				XGROW(s->queue, s->nqueue + 1, s->queue_alloc);
				s->queue[s->nqueue++] = i;
			}
		sched_sort(sj, s->queue, s->nqueue);
		s->dirty = false;
	}
	for (int round = 0; round < 64; round++) {
		struct sched_in in = { sj, s->njobs, s->queue, s->nqueue, s->devs, s->ndevs,
				       s->quotas, s->nquotas, now_wall(), s->team_limits, s->nteam_limits };
		struct sched_decision d;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		sched_decide(&in, &d);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		s->sched_ns_total += (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
		s->sched_calls++;
		if (d.action == SCHED_NONE) {
			sched_decision_release(&d);
			break;
		}
		size_t k = d.job;
		struct sjob *j = &s->jobs[k];
		if (d.action == SCHED_START) {
			if (d.backfill)
				log_backfill(s, j, &s->jobs[d.ahead], d.reserved);
			size_t before = s->njobs;
			int waits = start_job(s, j, d.ids);
			sched_decision_release(&d);
			if (waits && waits != TC_EBUSY)
				break; /* the store failed: try again next round */
			if (s->njobs != before) {
				s->dirty = true; /* forgotten: indices changed */
				break;
			}
			sj[k].state = j->st;
			continue;
		}
		for (size_t v = 0; v < d.nvictims; v++) {
			struct sjob *victim = &s->jobs[d.victims[v]];
			struct tc_err err = TC_ERR_INIT;
			if (!d.reclaim)
				logf_(s, "preempting %s (priority %d) for %s (priority %d)", victim->id,
				      victim->priority, j->id, j->priority);
			else /* sched.h rule 10: what it borrowed goes back */
				logf_(s, "preempting %s (team %s, borrowing) to reclaim %s's guarantee for %s",
				      victim->id, victim->team ? victim->team : "none",
				      j->team ? j->team : "?", j->id);
			if (srv_stop_job(s, victim, JOB_STOP_PREEMPTED, &err))
				logf_(s, "warning: %s", err.msg);
			tc_err_release(&err);
			sj[d.victims[v]].state = victim->st;
		}
		sched_decision_release(&d);
	}
	/* started jobs leave the queue */
	size_t kept = 0;
	for (size_t q = 0; q < s->nqueue; q++)
		if (s->queue[q] < s->njobs && s->jobs[s->queue[q]].st == SJ_QUEUED)
			s->queue[kept++] = s->queue[q];
	s->nqueue = kept;
	free(sj);
}

/* ---- retention (--retention, a team's retention:): old finished jobs removed, at start and
 * hourly ---- */

struct keep_ctx {
	struct srv *s;
	double now;
};

/* The time before which job r must have ended to go: its team's retention, else the server's. */
static double retention_before(void *ctx, const struct job_row *r)
{
	struct keep_ctx *k = ctx;
	char *team = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (store_job_team(k->s->st, r->id, &team, &err)) {
		tc_err_release(&err);
		return -1; /* not known: kept */
	}
	double keep = srv_team_retention(k->s, team);
	free(team);
	return keep > 0 ? k->now - keep : -1;
}

static void retention(struct srv *s)
{
	double now = now_wall();
	if (now < s->next_retention)
		return;
	s->next_retention = now + 3600;
	/* the shortest retention of any rule: the jobs that may go */
	double shortest = s->o.retention;
	for (size_t t = 0; t < s->teams.n; t++)
		if (s->teams.t[t].retention > 0 && (shortest <= 0 || s->teams.t[t].retention < shortest))
			shortest = s->teams.t[t].retention;
	if (shortest <= 0)
		return;
	json_t *gone = NULL, *j;
	size_t i;
	struct tc_err err = TC_ERR_INIT;
	struct keep_ctx k = { s, now };
	struct jobs_gc_rule rule = { retention_before, &k };
	int rc = jobs_gc(s->st, now - shortest, false, &rule, &gone, &err);
	json_array_foreach(gone, i, j) {
		const char *ended = json_string_value(json_object_get(j, "ended"));
		logf_(s, "retention: removed %s (%s, ended %s)",
		      json_string_value(json_object_get(j, "id")),
		      json_string_value(json_object_get(j, "state")), ended ? ended : "?");
	}
	if (rc)
		logf_(s, "warning: retention: %s", err.msg);
	json_decref(gone);
	tc_err_release(&err);
}

/* ---- the loop's round ---- */

void srv_round(struct srv *s, double period)
{
	apply_events(s);
	check_alive(s);
	srv_poll_external(s);
	srv_sweeps(s);
	schedule(s);
	retention(s);
	if (now_wall() >= s->next_sample) {
		srv_health_refresh(s);
		telemetry_sample(s);
		s->next_sample = now_wall() + period;
		s->devs_moved = false;
	} else if (s->devs_moved) {
		/* the devices page (telemetry.c) names no holder a job has let go */
		telemetry_sample(s);
		s->devs_moved = false;
	}
}
