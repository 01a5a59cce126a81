/*
 * queue.c -- the jobs in memory: the server's queue that the loop
 * (server.c) schedules and the API's handlers add to, find and take from,
 * with the devices each holds.  Callers hold s->mu.
 */
#include "server/server_int.h"
#include "backend/backend.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "sched/fairshare.h"
#include "server/srvlog.h"
#include "spec/spec.h"
#include "store/store_usage.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct sjob *srv_find(struct srv *s, const char *id)
{
	for (size_t i = 0; i < s->njobs; i++)
		if (!strcmp(s->jobs[i].id, id))
			return &s->jobs[i];
	return NULL;
}

void srv_wake(struct srv *s)
{
	s->woken = true;
	pthread_cond_signal(&s->wake);
}

void sjob_release(struct sjob *j)
{
	free(j->id);
	free(j->user);
	free(j->team);
	free(j->type);
	free(j->name);
	free(j->run_dir);
	free(j->want);
	free(j->ids);
	backend_pull_free(j->pulling);
}

/* Devices of j go back to the pool, and so do its leases (store.h). */
void release_devices(struct srv *s, struct sjob *j)
{
	int idx = (int)(j - s->jobs);
	for (size_t i = 0; i < s->ndevs; i++)
		if (s->devs[i].owner == idx) {
			s->devs[i].owner = SCHED_FREE;
			s->devs_moved = true;
		}
	if (j->ids && strcmp(j->type, "cpu") != 0) {
		struct tc_err err = TC_ERR_INIT;
		if (store_lease_drop(s->st, j->id, &err))
			srvlog_act(s->o.quiet, "warning: %s", err.msg); /* left behind, it ends with its holder */
		tc_err_release(&err);
	}
	free(j->ids);
	j->ids = NULL;
}

void srv_forget(struct srv *s, const char *id)
{
	struct sjob *j = srv_find(s, id);
	if (!j)
		return;
	release_devices(s, j);
	size_t idx = (size_t)(j - s->jobs), last = s->njobs - 1;
	sjob_release(j);
	if (idx != last) {
		s->jobs[idx] = s->jobs[last];
		/* the moved job's devices follow its new index */
		for (size_t i = 0; i < s->ndevs; i++)
			if (s->devs[i].owner == (int)last)
				s->devs[i].owner = (int)idx;
	}
	s->njobs--;
	s->dirty = true;
}

static struct sjob *add_job(struct srv *s)
{
	XGROW(s->jobs, s->njobs + 1, s->alloc);
	struct sjob *j = &s->jobs[s->njobs++];
	memset(j, 0, sizeof(*j));
	s->dirty = true;
	return j;
}

bool srv_external(const struct sjob *j)
{
	return j->be->submit != NULL;
}

void srv_add_queued(struct srv *s, const char *id, const char *user, const char *name,
		    const char *type, int count, const int *want, int priority, bool preemptible,
		    double created, int max_restarts, const char *run_dir,
		    const struct backend_ops *be)
{
	struct sjob *j = add_job(s);
	j->id = xstrdup(id);
	j->user = xstrdup(user);
	j->name = xstrdup(name);
	j->type = xstrdup(type);
	j->state = JOB_QUEUED;
	j->run_dir = xstrdup(run_dir);
	j->be = be;
	j->count = count;
	if (want) {
		j->want = xcalloc((size_t)count, sizeof(int));
		memcpy(j->want, want, (size_t)count * sizeof(int));
	}
	j->priority = priority;
	j->preemptible = preemptible;
	j->created = created;
	j->queued_at = created;
	j->max_restarts = max_restarts;
	j->st = SJ_QUEUED;
}

struct sched_job *srv_sched_view(struct srv *s)
{
	struct sched_job *sj = xcalloc(s->njobs ? s->njobs : 1, sizeof(*sj));
	for (size_t i = 0; i < s->njobs; i++) {
		struct sjob *j = &s->jobs[i];
		struct fs_factor f = { 0, 0, 0, 0, 0 };
		if (s->fs && j->st == SJ_QUEUED) /* only the queue's order uses it */
			fs_factor(s->fs, j->team, j->user, j->type, &f);
		sj[i] = (struct sched_job){ j->id, j->user, j->type, j->priority, j->preemptible,
					    j->created, j->count, j->want, srv_external(j) ? SJ_IDLE : j->st,
					    j->started_at, (double)j->max_runtime, j->team, f.factor };
	}
	return sj;
}

#define FS_HALF_LIFE_DEFAULT (7 * 86400.0) /* Slurm's PriorityDecayHalfLife */
#define FS_HORIZON 20 /* half-lives of usage read: older weighs under 1e-6 */

bool srv_fairshare_on(const struct srv *s, double *half_life)
{
	*half_life = s->o.fair_share_half_life > 0 ? s->o.fair_share_half_life
		     : s->teams.fs_half_life > 0   ? s->teams.fs_half_life
						   : FS_HALF_LIFE_DEFAULT;
	if (s->o.fair_share >= 0)
		return s->o.fair_share > 0;
	if (s->teams.fs_enabled_set)
		return s->teams.fs_enabled;
	return s->teams.n > 0;
}

void srv_fairshare_refresh(struct srv *s)
{
	double h, now = now_wall();
	if (!srv_fairshare_on(s, &h)) {
		if (s->fs) {
			fs_free(s->fs);
			s->fs = NULL;
			s->dirty = true; /* back to priority, then submission */
		}
		return;
	}
	if (now < s->fs_next)
		return; /* 0 at start and after a reload: read now */
	/* usage changes slowly against the half-life: read it again every h/16, 1 s to 60 s */
	double every = h / 16;
	s->fs_next = now + (every < 1 ? 1 : every > 60 ? 60 : every);
	struct usage_interval *u;
	size_t n;
	struct tc_err err = TC_ERR_INIT;
	if (store_usage_intervals(s->st, now - FS_HORIZON * h, now, &u, &n, &err)) {
		/* the old factors stay until the next try */
		srvlog_act(s->o.quiet, "warning: fair share: %s", err.msg);
		tc_err_release(&err);
		return;
	}
	struct fs_interval *iv = xcalloc(n ? n : 1, sizeof(*iv));
	for (size_t i = 0; i < n; i++)
		iv[i] = (struct fs_interval){ u[i].team, u[i].user, u[i].device_type, u[i].device_count,
					      u[i].opened, u[i].stop };
	fs_free(s->fs);
	s->fs = fs_build(iv, n, s->team_limits, s->nteam_limits, s->devs, s->ndevs, now, h);
	free(iv);
	usage_intervals_free(u, n);
	s->dirty = true; /* the queue's order follows the new factors */
}

void srv_fairshare_end(struct srv *s)
{
	fs_free(s->fs);
	s->fs = NULL;
}

/* Rule (5) of sched.h: would job k go over its user's quota? */
static bool over_quota(const struct sched_in *in, size_t k)
{
	const struct sched_job *j = &in->jobs[k];
	int quota = sched_quota_of(in, j->user), held = 0;
	for (size_t i = 0; quota >= 0 && i < in->ndevs; i++)
		held += in->devs[i].owner >= 0 && !strcmp(in->jobs[in->devs[i].owner].user, j->user);
	return quota >= 0 && held + j->count > quota;
}

/* Why j waits, by rules (3), (5) and (8), into why; the job it waits behind, or NULL. */
static const char *waiting_why(const struct sched_in *in, size_t k, size_t top, bool ok, double at,
			       struct sbuf *why)
{
	const struct sched_job *j = &in->jobs[k];
	struct sbuf when = SBUF_INIT;
	if (ok)
		format_time_utc(&when, at);
	if (over_quota(in, k)) {
		sbuf_addf(why, "over its user's quota of %d devices", sched_quota_of(in, j->user));
	} else if (top == k) {
		if (ok)
			sbuf_addf(why, "first in line for %s: its devices are expected free from %s "
				       "(the running jobs' limits.max_runtime)", j->type, when.buf);
		else
			sbuf_addf(why, "first in line for %s: no start time can be reserved (a running "
				       "job it waits on has no limits.max_runtime)", j->type);
	} else {
		sbuf_addf(why, "held behind the reservation of job %s", in->jobs[top].id);
		if (!ok)
			sbuf_adds(why, " (no start time can be reserved for it: a running job it waits on "
				       "has no limits.max_runtime, so nothing backfills)");
		else if (j->max_runtime <= 0)
			sbuf_addf(why, " from %s; without limits.max_runtime this job cannot backfill",
				  when.buf);
		else if (in->now + j->max_runtime > at)
			sbuf_addf(why, " from %s; this job's limits.max_runtime would end after that, and "
				       "the free devices outside the reservation are too few", when.buf);
		else
			sbuf_addf(why, " from %s; it would end by then, but too few devices are free",
				  when.buf);
	}
	sbuf_release(&when);
	return top == k ? NULL : in->jobs[top].id;
}

/*
 * One device type's line (rule 3), computed once and shared by every job of
 * that type a listing explains: the queue in order, the first job in it that
 * blocks the type, and that job's reservation (rule 8).  Building it is
 * O(n log n); srv_queue_json builds one per type rather than one per job.
 */
struct type_line {
	const char *type;
	size_t *q, nq;
	struct sched_in in;
	size_t top; /* the blocking job, or SIZE_MAX: none blocks */
	bool ok;    /* top has a reservation, from at */
	double at;
};

static void type_line_build(struct srv *s, const struct sched_job *sj, double now, const char *type,
			    struct type_line *t)
{
	t->type = type;
	t->q = xcalloc(s->njobs ? s->njobs : 1, sizeof(size_t));
	t->nq = 0;
	for (size_t i = 0; i < s->njobs; i++)
		if (sj[i].state == SJ_QUEUED && !strcmp(sj[i].type, type))
			t->q[t->nq++] = i;
	sched_sort(sj, t->q, t->nq);
	t->in = (struct sched_in){ sj, s->njobs, t->q, t->nq, s->devs, s->ndevs, s->quotas,
				   s->nquotas, now, s->team_limits, s->nteam_limits };
	/* the first in line that blocks its type (rule 3): not one over its quota (rule 5) nor
	 * one its team's rules hold (9, 10): those are skipped and block nobody */
	t->top = SIZE_MAX;
	for (size_t i = 0; i < t->nq; i++)
		if (sched_why(&t->in, t->q[i]) == SCHED_WAIT_DEVICES) {
			t->top = t->q[i];
			break;
		}
	t->at = 0;
	t->ok = t->top != SIZE_MAX && sched_reservation(&t->in, t->top, &t->at);
}

/* Why queued job k (an index into s->jobs) waits, on its type's line t. */
static json_t *waiting_json_on(struct srv *s, const struct type_line *t, size_t k)
{
	const struct sjob *j = &s->jobs[k];
	size_t top = t->top == SIZE_MAX ? k : t->top;
	double at = t->at;
	bool ok = t->ok;
	if (t->top == SIZE_MAX) /* nobody blocks: k is its own first in line */
		ok = sched_reservation(&t->in, k, &at);
	struct sbuf why = SBUF_INIT;
	const char *behind = NULL;
	enum sched_wait tw = sched_why(&t->in, k);
	if (tw == SCHED_WAIT_TEAM_LIMIT || tw == SCHED_WAIT_RECLAIM) {
		/* rules (9), (10): its team's, before any reservation */
		const struct sched_team_limit *row = sched_team_row(&t->in, j->team, j->type);
		if (tw == SCHED_WAIT_TEAM_LIMIT)
			sbuf_addf(&why, "its team %s would hold more than its guarantee plus what it "
				  "may borrow (%d + %d %s)", j->team, row ? row->guarantee : 0,
				  row ? row->borrow : 0, j->type);
		else
			sbuf_addf(&why, "it would borrow %s while another team waits for its "
				  "guarantee", j->type);
		ok = false;
	} else {
		behind = waiting_why(&t->in, k, top, ok, at, &why);
	}
	json_t *o = json_pack("{s:s, s:s?, s:o}", "why", why.buf, "behind", behind, "reserved_from",
			      ok ? json_real(at) : json_null());
	sbuf_release(&why);
	return o;
}

struct json_t *srv_waiting_json(struct srv *s, const char *id)
{
	struct sjob *j = srv_find(s, id);
	if (!j || j->st != SJ_QUEUED || srv_external(j))
		return NULL;
	struct sched_job *sj = srv_sched_view(s);
	struct type_line t;
	type_line_build(s, sj, now_wall(), j->type, &t);
	json_t *o = waiting_json_on(s, &t, (size_t)(j - s->jobs));
	free(t.q);
	free(sj);
	return o;
}

/* What the scheduler needs of a stored spec: its restart budget and time limit. */
static void spec_sched_fields(const char *spec_json, int *max_restarts, long *max_runtime)
{
	struct spec *sp = NULL;
	struct tc_err err = TC_ERR_INIT;
	bool ok = spec_from_json(spec_json, &sp, &err) == 0;
	*max_restarts = ok ? sp->max_restarts : 0;
	*max_runtime = ok ? sp->max_runtime : 0;
	spec_free(sp);
	tc_err_release(&err);
}

/* An active job read from the store into memory. */
struct sjob *srv_load_job(struct srv *s, const struct job_row *r)
{
	int nwant = 0, nids = 0, *want, *ids, max_restarts;
	long max_runtime;
	(void)device_ids_parse(r->device_want, &want, &nwant, NULL); /* unreadable: any ids */
	spec_sched_fields(r->spec_json, &max_restarts, &max_runtime);
	srv_add_queued(s, r->id, r->user, r->name, r->device_type, r->device_count,
		       nwant == r->device_count ? want : NULL, r->priority, r->preemptible, r->created,
		       max_restarts, r->run_dir, backend_of(r));
	free(want);
	struct sjob *j = &s->jobs[s->njobs - 1];
	j->max_runtime = max_runtime;
	struct tc_err terr = TC_ERR_INIT;
	if (store_job_team(s->st, r->id, &j->team, &terr)) /* unreadable: no team, it only borrows */
		srvlog_act(s->o.quiet, "warning: job %s: %s", r->id, terr.msg);
	tc_err_release(&terr);
	j->state = r->state;
	j->stop_reason = r->stop_reason;
	j->restarts = r->restarts;
	j->pid = r->sup_pid;
	j->ticks = r->sup_ticks;
	j->ran = r->restarts > 0 || r->state != JOB_QUEUED;
	j->started_at = job_state_active(r->state) ? r->started : 0;
	bool asked = r->stop_reason != JOB_STOP_NONE;
	(void)device_ids_parse(r->devices, &ids, &nids, NULL);
	if (r->state == JOB_PAUSED) {
		j->st = SJ_IDLE;
	} else if (r->state == JOB_QUEUED || r->state == JOB_PREEMPTED) {
		j->st = SJ_QUEUED;
	} else {
		j->st = asked ? SJ_STOPPING : SJ_RUNNING;
		j->term_sent = asked;
		/* it holds what it held before the restart */
		for (int k = 0; k < nids; k++)
			for (size_t i = 0; i < s->ndevs; i++)
				if (s->devs[i].id == ids[k] && !strcmp(s->devs[i].type, j->type))
					s->devs[i].owner = (int)(j - s->jobs);
		j->ids = ids;
		ids = NULL;
	}
	free(ids);
	if (srv_external(j)) {
		/* its backend's: submitted (Slurm has it) or still to submit */
		release_devices(s, j);
		j->st = r->slurm_job ? (asked ? SJ_STOPPING : SJ_RUNNING) : SJ_QUEUED;
		j->term_sent = asked;
	}
	return j;
}

/* Rule (1)'s factor of queued job j and its parts (sched/fairshare.h); null while off. */
static json_t *fairshare_json(const struct srv *s, const struct sjob *j)
{
	if (!s->fs)
		return json_null();
	struct fs_factor f;
	fs_factor(s->fs, j->team, j->user, j->type, &f);
	return json_pack("{s:f, s:f, s:f, s:f, s:f}", "factor", f.factor, "team_usage", f.team_usage,
			 "team_share", f.team_share, "user_usage", f.user_usage, "user_share",
			 f.user_share);
}

#define QUEUE_LIST_MAX 1000 /* jobs listed, first in queue order */

json_t *srv_queue_json(struct srv *s, const char *viewer, bool all)
{
	struct sched_job *sj = srv_sched_view(s); /* a Slurm job is SJ_IDLE here: not ours */
	size_t *q = xcalloc(s->njobs ? s->njobs : 1, sizeof(size_t)), nq = 0;
	for (size_t i = 0; i < s->njobs; i++)
		if (sj[i].state == SJ_QUEUED)
			q[nq++] = i;
	sched_sort(sj, q, nq);
	json_t *a = json_array();
	double now = now_wall();
	struct type_line *lines = NULL; /* one per device type listed, built on first use */
	size_t nlines = 0, alloc = 0;
	for (size_t p = 0; p < nq && p < QUEUE_LIST_MAX; p++) {
		const struct sjob *j = &s->jobs[q[p]];
		/* as on a team's page: who waits and why; a job's name only to its owner */
		bool mine = all || (viewer && j->user && !strcmp(viewer, j->user));
		double since = j->queued_at > 0 ? j->queued_at : j->created;
		json_t *o = json_pack("{s:I, s:s, s:s?, s:s?, s:s?, s:s, s:i, s:i, s:f}", "position",
				      (json_int_t)(p + 1), "id", j->id, "name", mine ? j->name : NULL,
				      "user", j->user, "team", j->team, "type", j->type, "count",
				      j->count, "priority", j->priority, "waited_seconds",
				      since > 0 && now > since ? now - since : 0.0);
		size_t l = 0;
		while (l < nlines && strcmp(lines[l].type, j->type))
			l++;
		if (l == nlines) {
			XGROW(lines, nlines + 1, alloc);
			type_line_build(s, sj, now, j->type, &lines[nlines++]);
		}
		json_object_update_new(o, waiting_json_on(s, &lines[l], q[p]));
		json_object_set_new(o, "fair_share", fairshare_json(s, j));
		json_array_append_new(a, o);
	}
	for (size_t l = 0; l < nlines; l++)
		free(lines[l].q);
	free(lines);
	free(q);
	free(sj);
	double h;
	bool on = srv_fairshare_on(s, &h);
	return json_pack("{s:o, s:I, s:{s:b, s:f}}", "jobs", a, "total", (json_int_t)nq, "fair_share",
			 "enabled", on, "half_life", h);
}
