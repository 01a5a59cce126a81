/*
 * queue.c -- the jobs in memory: the server's queue that the loop
 * (server.c) schedules and the API's handlers add to, find and take from,
 * with the devices each holds.  Callers hold s->mu.
 */
#include "server/server_int.h"
#include "backend/backend.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "server/srvlog.h"
#include "spec/spec.h"

#include <errno.h>
#include <pthread.h>
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

static int spec_max_restarts(const char *spec_json)
{
	struct spec *sp = NULL;
	struct tc_err err = TC_ERR_INIT;
	int n = spec_from_json(spec_json, &sp, &err) == 0 ? sp->max_restarts : 0;
	spec_free(sp);
	tc_err_release(&err);
	return n;
}

/* An active job read from the store into memory. */
struct sjob *srv_load_job(struct srv *s, const struct job_row *r)
{
	int nwant = 0, nids = 0, *want, *ids;
	(void)device_ids_parse(r->device_want, &want, &nwant, NULL); /* unreadable: any ids */
	srv_add_queued(s, r->id, r->user, r->name, r->device_type, r->device_count,
		       nwant == r->device_count ? want : NULL, r->priority, r->preemptible, r->created,
		       spec_max_restarts(r->spec_json), r->run_dir, backend_of(r));
	free(want);
	struct sjob *j = &s->jobs[s->njobs - 1];
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
