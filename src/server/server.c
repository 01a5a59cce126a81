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
#include "core/xalloc.h"
#include "devices/devices.h"
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

#define TICK_MS 200
/*
 * Rounds woken by requests (a submission, a stop) come at most this often:
 * a burst of submissions is scheduled in batches instead of one round each,
 * which with 10,000 jobs queued would take the lock for a sort per request.
 */
#define MIN_ROUND_MS 20

static void logf_(struct srv *s, const char *fmt, ...) TC_PRINTF(2, 3);

static void logf_(struct srv *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	srvlog_act_v(s->o.quiet, fmt, ap);
	va_end(ap);
}

char *ids_text(const int *ids, int n)
{
	struct sbuf sb = SBUF_INIT;
	for (int i = 0; i < n; i++)
		sbuf_addf(&sb, "%s%d", i ? "," : "", ids[i]);
	return sbuf_detach(&sb);
}

int *ids_parse(const char *text, int *n)
{
	*n = 0;
	if (!text || !*text)
		return NULL;
	int *v = NULL;
	size_t alloc = 0;
	const char *p = text;
	while (*p) {
		char *end;
		errno = 0;
		long x = strtol(p, &end, 10);
		if (end == p || errno || x < 0 || x > 65535 || (*end && *end != ',')) {
			free(v);
			*n = 0;
			return NULL;
		}
		XGROW(v, (size_t)*n + 1, alloc);
		v[(*n)++] = (int)x;
		p = *end ? end + 1 : end;
	}
	return v;
}

void srv_say(void *arg, const char *line)
{
	logf_(arg, "%s", line);
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
	char *devs = ids_text(ids, j->count);
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

bool srv_lost_requeues(const struct sjob *j)
{
	return j->stop_reason == JOB_STOP_NONE && j->restarts < j->max_restarts;
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
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "requeued after its supervisor was lost (restart %d of %d)",
			  j->restarts + 1, j->max_restarts);
		rc = jobs_requeue(s->st, j->id, JOB_QUEUED, true, why.buf, &err);
		sbuf_release(&why);
		if (!rc) {
			release_devices(s, j);
			j->restarts++;
			j->st = SJ_QUEUED;
			j->ran = true;
			j->state = JOB_QUEUED;
			s->dirty = true;
		}
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
	struct sched_job *sj = xcalloc(s->njobs ? s->njobs : 1, sizeof(*sj));
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = &s->jobs[i];
		sj[i] = (struct sched_job){ j->id, j->user, j->type, j->priority, j->preemptible,
					    j->created, j->count, j->want, srv_external(j) ? SJ_IDLE : j->st };
	}
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
				       s->quotas, s->nquotas };
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
			logf_(s, "preempting %s (priority %d) for %s (priority %d)", victim->id,
			      victim->priority, j->id, j->priority);
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

/* ---- set-up ---- */

static int load_devices(struct srv *s)
{
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	size_t alloc = 0;
	int cpus = s->o.cpu_slots > 0 ? s->o.cpu_slots : devices_count(&l, "cpu");
	for (int i = 0; i < cpus; i++) {
		XGROW(s->devs, s->ndevs + 1, alloc);
		s->devs[s->ndevs++] = (struct sched_dev){ "cpu", i, SCHED_FREE };
	}
	for (size_t i = 0; i < l.nr; i++) {
		if (!strcmp(l.v[i].type, "cpu"))
			continue;
		const struct device_kind *k = device_kind_find(l.v[i].type);
		if (!k)
			continue;
		XGROW(s->devs, s->ndevs + 1, alloc);
		s->devs[s->ndevs++] = (struct sched_dev){ k->name, l.v[i].id, SCHED_FREE };
	}
	device_list_release(&l);
	s->lease_job = xcalloc(s->ndevs ? s->ndevs : 1, sizeof(char *));
	return 0;
}

static int load_jobs(struct srv *s, struct tc_err *err)
{
	struct job_row *v = NULL;
	size_t n = 0;
	int rc = store_events_last(s->st, &s->last_event, err);
	if (!rc)
		rc = store_job_active_managed(s->st, &v, &n, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct sjob *j = srv_load_job(s, &v[i]);
		if (srv_external(j) && j->st != SJ_QUEUED) {
			logf_(s, "job %s: %s, followed through %s", j->id, job_state_name(j->state),
			      backend_name(j->be));
			j->pull = true; /* its supervisors may have given up on us meanwhile */
		}
		else if (j->st == SJ_RUNNING || j->st == SJ_STOPPING)
			logf_(s, "job %s: %s, supervisor pid %ld %s", j->id, job_state_name(j->state),
			      (long)j->pid, proc_alive(j->pid, j->ticks) ? "still running" : "is gone");
	}
	job_rows_free(v, n);
	return 0;
}

/*
 * One server per state folder: an exclusive flock on $home/server.lock,
 * which holds "PID ADDRESS" for the next one to name.  The kernel drops the
 * lock when the process dies, however it dies; the fd is close-on-exec and
 * proc_start closes every fd above 2 in children, so a supervisor that
 * outlives the server never keeps it.
 */
static int lock_state(struct srv *s, struct tc_err *err)
{
	struct sbuf path = SBUF_INIT, who = SBUF_INIT;
	int rc = mkdir_p(s->home, err), fd = -1;
	sbuf_addf(&path, "%s/server.lock", s->home);
	if (!rc && (fd = open(path.buf, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		rc = tc_error_errno(err, TC_ESYS, "server: cannot open %s", path.buf);
	if (rc)
		goto out;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		sbuf_addf(&who, "%ld %s\n", (long)getpid(), s->o.listen);
		if (ftruncate(fd, 0) < 0 || pwrite(fd, who.buf, who.len, 0) != (ssize_t)who.len) {
			rc = tc_error_errno(err, TC_ESYS, "server: cannot write %s", path.buf);
			goto out;
		}
		s->lock_fd = fd;
		fd = -1;
		goto out;
	}
	if (errno != EWOULDBLOCK) {
		rc = tc_error_errno(err, TC_ESYS, "server: cannot lock %s", path.buf);
		goto out;
	}
	/* the holder writes its line right after locking: give it a moment */
	for (int i = 0; i < 100; i++) {
		sbuf_reset(&who);
		if (read_file(path.buf, &who, NULL) == 0 && who.len && who.buf[who.len - 1] == '\n')
			break;
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	long pid = 0;
	char *end = NULL;
	if (who.len)
		pid = strtol(who.buf, &end, 10);
	if (pid > 0 && end && *end == ' ') {
		sbuf_rtrim(&who);
		rc = tc_error(err, TC_EUSAGE,
			      "server: another server (pid %ld, listening on %s) already uses the state"
			      " folder %s: stop it first, or give this one its own --state",
			      pid, end + 1, s->home);
	} else {
		rc = tc_error(err, TC_EUSAGE,
			      "server: another server already uses the state folder %s (%s is locked)",
			      s->home, path.buf);
	}
out:
	if (fd >= 0)
		close(fd);
	sbuf_release(&path);
	sbuf_release(&who);
	return rc;
}

static bool is_loopback(const char *listen)
{
	return !strncmp(listen, "127.", 4) || !strncmp(listen, "localhost:", 10) ||
	       !strncmp(listen, "[::1]:", 6);
}

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

/*
 * The server is the hub of its Slurm jobs (backend_set_hub): nodes reach it
 * at TRAINCTL_HUB_ADVERTISE (http://ADDR:PORT), else at its --listen
 * address (this host's address for 0.0.0.0).
 */
static void server_hub_url(struct srv *s)
{
	const char *adv = getenv("TRAINCTL_HUB_ADVERTISE");
	struct sbuf url = SBUF_INIT;
	if (adv && *adv) {
		sbuf_adds(&url, adv);
	} else {
		const char *colon = strrchr(s->o.listen, ':');
		char *host = xstrndup(s->o.listen, colon ? (size_t)(colon - s->o.listen) : 0);
		if (!strcmp(host, "0.0.0.0") || !*host) {
			free(host);
			host = host_ipv4();
		} else if (!strcmp(host, "localhost")) {
			free(host);
			host = xstrdup("127.0.0.1");
		}
		sbuf_addf(&url, "http://%s%s", host ? host : "127.0.0.1", colon ? colon : ":8470");
		free(host);
	}
	backend_set_hub(url.buf);
	sbuf_release(&url);
}

int server_run(const struct server_opts *o, struct tc_err *err)
{
	struct srv *s = xcalloc(1, sizeof(*s));
	int rc = 0;
	s->o = *o;
	s->lock_fd = -1;
	s->unix_fd = -1;
	s->self_ticks = proc_start_ticks(getpid());
	s->home = path_absolute(o->home, NULL);
	s->exe = xstrdup(o->exe);
	s->loopback = is_loopback(o->listen);
	struct passwd *pw = getpwuid(getuid());
	s->os_user = xstrdup(pw && pw->pw_name ? pw->pw_name : "local");
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->list_mu, NULL);
	pthread_cond_init(&s->wake, NULL);
	s->quotas = xcalloc((size_t)o->nquotas + 1, sizeof(*s->quotas));
	for (int i = 0; i < o->nquotas; i++)
		s->quotas[s->nquotas++] = (struct sched_quota){ o->quotas[i].user, o->quotas[i].max_devices };
	if ((rc = lock_state(s, err)) || (rc = store_open(s->home, &s->st, err)) ||
	    (rc = store_runs_private(s->home, err)) ||
	    (rc = store_keep_pages(s->st, 64, err)) ||
	    (rc = store_open_unlocked(s->home, &s->list_st, err)) ||
	    (rc = store_keep_pages(s->list_st, 64, err)))
		goto out;
	load_devices(s);
	if ((rc = load_jobs(s, err)))
		goto out;
	srv_health_refresh(s); /* before the first round hands any device out */
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { 0 };
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	srv_notify_start(s);
	char *login = NULL;
	if ((rc = api_start(s, &login, err))) {
		api_stop(s);
		goto out;
	}
	server_hub_url(s);
	logf_(s, "listening on http://%s/ and %s (state %s, %zu device%s, %zu active job%s)",
	      o->listen, s->socket_path, s->home, s->ndevs, plural_s((long long)s->ndevs), s->njobs,
	      plural_s((long long)s->njobs));
	/* like Jupyter's token URL: one use, for the operator who reads this log */
	srvlog(SRVLOG_NOTICE, "open the web UI (one use): http://%s%s", o->listen, login);
	free(login);
	double period = o->sample_seconds > 0 ? o->sample_seconds : 5;
	pthread_mutex_lock(&s->mu);
	while (!got_signal) {
		apply_events(s);
		check_alive(s);
		srv_poll_external(s);
		srv_sweeps(s);
		schedule(s);
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
		struct timespec ts, gap;
		clock_gettime(CLOCK_REALTIME, &ts);
		gap = ts;
		ts.tv_nsec += TICK_MS * 1000000L;
		gap.tv_nsec += MIN_ROUND_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (gap.tv_nsec >= 1000000000L) {
			gap.tv_sec++;
			gap.tv_nsec -= 1000000000L;
		}
		/* wake-ups in the first MIN_ROUND_MS wait for its end (woken keeps them) */
		while (!got_signal && pthread_cond_timedwait(&s->wake, &s->mu, &gap) != ETIMEDOUT)
			;
		while (!got_signal && !s->woken && pthread_cond_timedwait(&s->wake, &s->mu, &ts) != ETIMEDOUT)
			;
		s->woken = false;
	}
	s->stopping = 1;
	pthread_mutex_unlock(&s->mu);
	if (!s->o.quiet)
		srvlog(SRVLOG_NOTICE, "%s: stopping (jobs keep running)", strsignal(got_signal));
	api_stop(s);
out:
	srv_privsep_end(s);
	srv_notify_end(s);
	srv_health_end(s);
	store_close(s->st);
	store_close(s->list_st);
	for (size_t i = 0; i < s->njobs; i++)
		sjob_release(&s->jobs[i]);
	free(s->jobs);
	for (size_t i = 0; i < s->nsettling; i++) {
		free(s->settling[i].id);
		backend_pull_free(s->settling[i].pulling);
	}
	free(s->settling);
	free(s->queue);
	for (size_t i = 0; s->lease_job && i < s->ndevs; i++)
		free(s->lease_job[i]);
	free(s->lease_job);
	free(s->devs);
	free(s->quotas);
	free(s->devices_json);
	free(s->home);
	free(s->exe);
	free(s->os_user);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->list_mu);
	pthread_cond_destroy(&s->wake);
	if (s->lock_fd >= 0)
		close(s->lock_fd); /* the next server may start */
	free(s);
	return rc;
}
