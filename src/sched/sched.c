/* sched.c -- queue order, all-or-nothing allocation, preemption, quotas, backfill; see sched.h. */
#include "sched/sched.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sched_cmp(const struct sched_job *a, const struct sched_job *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->fairshare != b->fairshare)
		return a->fairshare > b->fairshare ? -1 : 1;
	if (a->created != b->created)
		return a->created < b->created ? -1 : 1;
	return strcmp(a->id, b->id);
}

static int cmp_idx(const void *x, const void *y, void *ctx)
{
	const struct sched_job *jobs = ctx;
	return sched_cmp(&jobs[*(const size_t *)x], &jobs[*(const size_t *)y]);
}

void sched_sort(const struct sched_job *jobs, size_t *idx, size_t n)
{
	if (n > 1) /* idx may be NULL when n is 0, which qsort_r does not allow */
		qsort_r(idx, n, sizeof(*idx), cmp_idx, (void *)jobs);
}

int sched_quota_of(const struct sched_in *in, const char *user)
{
	int any = -1;
	for (size_t i = 0; i < in->nquotas; i++) {
		if (!strcmp(in->quotas[i].user, user))
			return in->quotas[i].max_devices;
		if (!strcmp(in->quotas[i].user, "*"))
			any = in->quotas[i].max_devices;
	}
	return any;
}

void sched_decision_release(struct sched_decision *d)
{
	free(d->ids);
	free(d->victims);
	memset(d, 0, sizeof(*d));
}

/* Devices held by the user's running and stopping jobs. */
static int user_holds(const struct sched_in *in, const char *user)
{
	int n = 0;
	for (size_t i = 0; i < in->ndevs; i++) {
		int o = in->devs[i].owner;
		if (o >= 0 && !strcmp(in->jobs[o].user, user))
			n++;
	}
	return n;
}

/*
 * Does job j fit when the devices marked in avail[] (parallel to devs) are
 * available?  With ids non-NULL, the ids chosen are written there.
 */
static bool fits(const struct sched_in *in, const struct sched_job *j, const bool *avail, int *ids)
{
	if (j->want) {
		for (int k = 0; k < j->count; k++) {
			bool ok = false;
			for (size_t i = 0; i < in->ndevs && !ok; i++)
				ok = avail[i] && in->devs[i].id == j->want[k] && !strcmp(in->devs[i].type, j->type);
			if (!ok)
				return false;
			if (ids)
				ids[k] = j->want[k];
		}
		return true;
	}
	int got = 0;
	for (size_t i = 0; i < in->ndevs && got < j->count; i++)
		if (avail[i] && !strcmp(in->devs[i].type, j->type)) {
			if (ids)
				ids[got] = in->devs[i].id;
			got++;
		}
	return got >= j->count;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Victim order: lowest priority first, then newest first. */
static int cmp_victim(const void *x, const void *y, void *ctx)
{
	const struct sched_job *jobs = ctx;
	const struct sched_job *a = &jobs[*(const size_t *)x], *b = &jobs[*(const size_t *)y];
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->created != b->created)
		return a->created > b->created ? -1 : 1;
	return -strcmp(a->id, b->id);
}

/*
 * Take candidates cand[0..nc) (heap; taken over) in order until j fits in
 * avail plus their devices: true with out's victims (only those needed),
 * false when even all of them would not do.
 */
static bool victims_until_fit(const struct sched_in *in, const struct sched_job *j, bool *avail,
			      size_t *cand, size_t nc, struct sched_decision *out)
{
	bool ok = false;
	size_t used = 0;
	for (; used < nc && !ok; used++) {
		for (size_t i = 0; i < in->ndevs; i++)
			if (in->devs[i].owner == (int)cand[used])
				avail[i] = true;
		ok = fits(in, j, avail, NULL);
	}
	if (ok) {
		/* drop victims that turned out not to be needed (exact ids) */
		size_t keep = 0;
		for (size_t v = 0; v < used; v++) {
			bool needed = true;
			if (j->want) {
				needed = false;
				for (size_t i = 0; i < in->ndevs && !needed; i++)
					if (in->devs[i].owner == (int)cand[v])
						for (int w = 0; w < j->count && !needed; w++)
							needed = in->devs[i].id == j->want[w];
			}
			if (needed)
				cand[keep++] = cand[v];
		}
		out->victims = cand;
		out->nvictims = keep;
		return true;
	}
	free(cand);
	return false;
}

/* Devices of jobs already stopping are coming: mark them available. */
static void mark_stopping(const struct sched_in *in, bool *avail)
{
	for (size_t i = 0; i < in->ndevs; i++) {
		int o = in->devs[i].owner;
		if (o >= 0 && in->jobs[o].state == SJ_STOPPING)
			avail[i] = true;
	}
}

/* Rule (4): victims for job j, or false when preempting cannot help. */
static bool choose_victims(const struct sched_in *in, const struct sched_job *j, bool *avail,
			   struct sched_decision *out)
{
	mark_stopping(in, avail); /* their devices are coming: wait for them */
	if (fits(in, j, avail, NULL))
		return false;
	size_t *cand = NULL, nc = 0, alloc = 0;
	for (size_t k = 0; k < in->njobs; k++) {
		const struct sched_job *v = &in->jobs[k];
		if (v->state == SJ_RUNNING && v->preemptible && v->priority < j->priority &&
		    !strcmp(v->type, j->type)) {
			XGROW(cand, nc + 1, alloc);
			cand[nc++] = k;
		}
	}
	if (nc > 1)
		qsort_r(cand, nc, sizeof(*cand), cmp_victim, (void *)in->jobs);
	return victims_until_fit(in, j, avail, cand, nc, out);
}

/* ---- teams: rules (9) to (11) ---- */

static bool same_team(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

const struct sched_team_limit *sched_team_row(const struct sched_in *in, const char *team,
					      const char *type)
{
	for (size_t i = 0; team && i < in->nteams; i++)
		if (!strcmp(in->teams[i].team, team) && !strcmp(in->teams[i].type, type))
			return &in->teams[i];
	return NULL;
}

/* Is a older than b (rule 9's order)? */
static bool older(const struct sched_job *a, const struct sched_job *b)
{
	if (a->created != b->created)
		return a->created < b->created;
	return strcmp(a->id, b->id) < 0;
}

bool sched_borrowing(const struct sched_in *in, size_t k)
{
	const struct sched_job *j = &in->jobs[k];
	const struct sched_team_limit *row = sched_team_row(in, j->team, j->type);
	int before = 0;
	for (size_t i = 0; i < in->njobs; i++) {
		const struct sched_job *o = &in->jobs[i];
		if (i != k && (o->state == SJ_RUNNING || o->state == SJ_STOPPING) &&
		    same_team(o->team, j->team) && !strcmp(o->type, j->type) && older(o, j))
			before += o->count;
	}
	return before + j->count > (row ? row->guarantee : 0);
}

/* One decision's view of the teams: devices each (team, type) holds, and who waits
 * inside its guarantee. */
struct tuse {
	const char *team, *type;
	int holds;
	bool waits; /* a queued job of it fits inside its guarantee (rule 9) */
};
struct teamview {
	struct tuse *u;
	size_t n, alloc;
};

static struct tuse *tuse_of(struct teamview *tv, const char *team, const char *type)
{
	for (size_t i = 0; i < tv->n; i++)
		if (same_team(tv->u[i].team, team) && !strcmp(tv->u[i].type, type))
			return &tv->u[i];
	XGROW(tv->u, tv->n + 1, tv->alloc);
	tv->u[tv->n] = (struct tuse){ team, type, 0, false };
	return &tv->u[tv->n++];
}

static bool over_quota(const struct sched_in *in, const struct sched_job *j)
{
	int quota = sched_quota_of(in, j->user);
	return quota >= 0 && user_holds(in, j->user) + j->count > quota;
}

static void team_view(const struct sched_in *in, struct teamview *tv)
{
	if (!in->nteams)
		return;
	for (size_t i = 0; i < in->ndevs; i++) {
		int o = in->devs[i].owner;
		if (o >= 0)
			tuse_of(tv, in->jobs[o].team, in->jobs[o].type)->holds++;
	}
	for (size_t q = 0; q < in->nqueue; q++) {
		const struct sched_job *j = &in->jobs[in->queue[q]];
		const struct sched_team_limit *row = sched_team_row(in, j->team, j->type);
		if (j->state != SJ_QUEUED || !row)
			continue;
		struct tuse *u = tuse_of(tv, j->team, j->type);
		if (!u->waits && u->holds + j->count <= row->guarantee && !over_quota(in, j))
			u->waits = true;
	}
}

/* Rules (9) and (10): is queued job j skipped for its team's limit, or to leave the
 * devices to a guarantee? */
static bool team_skips(const struct sched_in *in, struct teamview *tv, const struct sched_job *j)
{
	if (!in->nteams)
		return false;
	const struct sched_team_limit *row = sched_team_row(in, j->team, j->type);
	int holds = tuse_of(tv, j->team, j->type)->holds;
	if (row && holds + j->count > row->guarantee + row->borrow)
		return true;
	if (holds + j->count <= (row ? row->guarantee : 0))
		return false;
	for (size_t i = 0; i < tv->n; i++)
		if (tv->u[i].waits && !strcmp(tv->u[i].type, j->type) && !same_team(tv->u[i].team, j->team))
			return true;
	return false;
}

enum sched_wait sched_why(const struct sched_in *in, size_t k)
{
	const struct sched_job *j = &in->jobs[k];
	if (over_quota(in, j))
		return SCHED_WAIT_QUOTA;
	struct teamview tv = { NULL, 0, 0 };
	team_view(in, &tv);
	enum sched_wait w = SCHED_WAIT_DEVICES;
	if (team_skips(in, &tv, j)) {
		const struct sched_team_limit *row = sched_team_row(in, j->team, j->type);
		int holds = tuse_of(&tv, j->team, j->type)->holds;
		w = row && holds + j->count > row->guarantee + row->borrow ? SCHED_WAIT_TEAM_LIMIT
									   : SCHED_WAIT_RECLAIM;
	}
	free(tv.u);
	return w;
}

const char *sched_wait_name(enum sched_wait w)
{
	switch (w) {
	case SCHED_WAIT_QUOTA: return "quota";
	case SCHED_WAIT_TEAM_LIMIT: return "team limit";
	case SCHED_WAIT_RECLAIM: return "guarantee of another team";
	case SCHED_WAIT_DEVICES: break;
	}
	return "devices";
}

/* Rule (11) order: newest first. */
static int cmp_newest(const void *x, const void *y, void *ctx)
{
	const struct sched_job *jobs = ctx;
	const struct sched_job *a = &jobs[*(const size_t *)x], *b = &jobs[*(const size_t *)y];
	return older(a, b) ? 1 : older(b, a) ? -1 : 0;
}

/* Rule (11): borrowing jobs of other teams to stop for j, or false. */
static bool reclaim(const struct sched_in *in, struct teamview *tv, const struct sched_job *j,
		    bool *avail, struct sched_decision *out)
{
	const struct sched_team_limit *row = in->nteams ? sched_team_row(in, j->team, j->type) : NULL;
	if (!row || tuse_of(tv, j->team, j->type)->holds + j->count > row->guarantee)
		return false;
	mark_stopping(in, avail);
	if (fits(in, j, avail, NULL))
		return false;
	size_t *cand = NULL, nc = 0, alloc = 0;
	for (size_t k = 0; k < in->njobs; k++) {
		const struct sched_job *v = &in->jobs[k];
		if (v->state == SJ_RUNNING && !strcmp(v->type, j->type) && !same_team(v->team, j->team) &&
		    sched_borrowing(in, k)) {
			XGROW(cand, nc + 1, alloc);
			cand[nc++] = k;
		}
	}
	if (nc > 1)
		qsort_r(cand, nc, sizeof(*cand), cmp_newest, (void *)in->jobs);
	return victims_until_fit(in, j, avail, cand, nc, out);
}

/* ---- backfill, rule (8): the reservations of blocked types ---- */

/* The reservation of one blocked type, for its first blocked job. */
struct resv {
	size_t top;  /* the job it is for */
	bool ok;     /* computed; else nothing backfills in the type */
	double at;   /* when the top job is expected to start */
	bool *need;  /* parallel to devs: the devices it gets then; heap */
	int nfree;   /* free devices of the type now */
	int nspare;  /* ... of which the reservation needs none */
};

/* The blocked types of one decision (at most 16, as in sched_decide). */
struct backfill {
	struct resv r[16];
	size_t n;
	size_t open; /* how many have a reservation: the scan goes on while any has */
};

/* When device i is expected free: now, a running job's started + max_runtime, or never. */
static double free_time(const struct sched_in *in, size_t i)
{
	int o = in->devs[i].owner;
	if (o == SCHED_FREE)
		return in->now;
	if (o < 0)
		return INFINITY; /* leased or unhealthy: rules (6) and (7) */
	const struct sched_job *h = &in->jobs[o];
	if (h->state == SJ_STOPPING)
		return in->now;
	if (h->max_runtime <= 0)
		return INFINITY; /* no limit: it never ends in this view */
	double e = h->started + h->max_runtime;
	return e > in->now ? e : in->now; /* past its limit: being stopped */
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Job k's reservation into r (r->need allocated when ok). */
static void reserve(const struct sched_in *in, size_t k, struct resv *r)
{
	const struct sched_job *j = &in->jobs[k];
	memset(r, 0, sizeof(*r));
	r->top = k;
	size_t nd = in->ndevs ? in->ndevs : 1;
	double *ft = xcalloc(nd, sizeof(double)), *sorted = xcalloc(nd, sizeof(double));
	size_t ns = 0;
	for (size_t i = 0; i < in->ndevs; i++) {
		if (strcmp(in->devs[i].type, j->type))
			continue;
		ft[i] = free_time(in, i);
		r->nfree += in->devs[i].owner == SCHED_FREE;
		sorted[ns++] = ft[i];
	}
	if (j->want) {
		/* exact ids: when the last of them is free */
		r->at = in->now;
		for (int w = 0; w < j->count; w++) {
			double t = INFINITY;
			for (size_t i = 0; i < in->ndevs; i++)
				if (in->devs[i].id == j->want[w] && !strcmp(in->devs[i].type, j->type))
					t = ft[i];
			r->at = t > r->at ? t : r->at;
		}
	} else if (j->count > 0 && (size_t)j->count <= ns) {
		qsort(sorted, ns, sizeof(double), cmp_double);
		r->at = sorted[j->count - 1]; /* when count of them are free */
	} else {
		r->at = j->count > 0 ? INFINITY : in->now;
	}
	r->ok = isfinite(r->at);
	if (r->ok) {
		/* the devices it gets then: those fits() picks among the free ones at r->at */
		bool *avail = xcalloc(nd, sizeof(bool));
		int *ids = xcalloc((size_t)(j->count > 0 ? j->count : 1), sizeof(int));
		for (size_t i = 0; i < in->ndevs; i++)
			avail[i] = !strcmp(in->devs[i].type, j->type) && ft[i] <= r->at;
		r->need = xcalloc(nd, sizeof(bool));
		if (fits(in, j, avail, ids))
			for (size_t i = 0; i < in->ndevs; i++)
				for (int w = 0; w < j->count && avail[i] && !r->need[i]; w++)
					r->need[i] = in->devs[i].id == ids[w];
		for (size_t i = 0; i < in->ndevs; i++)
			r->nspare += in->devs[i].owner == SCHED_FREE && !r->need[i] &&
				     !strcmp(in->devs[i].type, j->type);
		free(ids);
		free(avail);
	}
	free(ft);
	free(sorted);
}

bool sched_reservation(const struct sched_in *in, size_t k, double *at)
{
	struct resv r;
	reserve(in, k, &r);
	*at = r.at;
	free(r.need);
	return r.ok;
}

/* Job k blocks its type (rule 3): its reservation becomes bf->r[bf->n]. */
static void backfill_block(const struct sched_in *in, struct backfill *bf, size_t k)
{
	if (bf->n >= 16)
		return;
	reserve(in, k, &bf->r[bf->n]);
	bf->open += bf->r[bf->n].ok;
	bf->n++;
}

/* A quick no for most jobs behind a reservation (no limit, too big): O(1). */
static bool backfill_may(const struct sched_in *in, const struct sched_job *j, const struct resv *r)
{
	if (!r || !r->ok || j->max_runtime <= 0)
		return false;
	if (j->want)
		return true; /* backfill_fits looks at the ids */
	return j->count <= r->nspare || (in->now + j->max_runtime <= r->at && j->count <= r->nfree);
}

/* Rule (8): may j start now past r's job?  ids: those chosen. */
static bool backfill_fits(const struct sched_in *in, const struct sched_job *j, const struct resv *r,
			  const bool *free_now, bool *scratch, int *ids)
{
	if (in->now + j->max_runtime <= r->at && fits(in, j, free_now, ids))
		return true; /* it ends before the reserved job starts */
	for (size_t i = 0; i < in->ndevs; i++)
		scratch[i] = free_now[i] && !r->need[i];
	return fits(in, j, scratch, ids);
}

static void backfill_release(struct backfill *bf)
{
	for (size_t b = 0; b < bf->n; b++)
		free(bf->r[b].need);
}

void sched_decide(const struct sched_in *in, struct sched_decision *out)
{
	memset(out, 0, sizeof(*out));
	out->action = SCHED_NONE;
	bool *free_now = xcalloc(in->ndevs ? in->ndevs : 1, sizeof(bool));
	bool *scratch = xcalloc(in->ndevs ? in->ndevs : 1, sizeof(bool));
	struct teamview tv = { NULL, 0, 0 };
	team_view(in, &tv);
	/*
	 * types: the device types this node has; blocked: those a waiting job
	 * holds up (rule 3).  The scan ends once every type is blocked; a job
	 * of a type the node lacks blocks its own type only and does not count.
	 */
	const char *types[16];
	size_t ntypes = 0, nblocked = 0, nblocked_known = 0;
	const char *blocked[16];
	struct backfill bf = { .n = 0 }; /* rule (8): bf.r[b] is blocked[b]'s reservation */
	for (size_t i = 0; i < in->ndevs; i++) {
		free_now[i] = in->devs[i].owner == SCHED_FREE;
		bool seen = false;
		for (size_t t = 0; t < ntypes && !seen; t++)
			seen = !strcmp(types[t], in->devs[i].type);
		if (!seen && ntypes < 16)
			types[ntypes++] = in->devs[i].type;
	}
	for (size_t q = 0; q < in->nqueue && (ntypes == 0 || nblocked_known < ntypes || bf.open); q++) {
		size_t k = in->queue[q];
		const struct sched_job *j = &in->jobs[k];
		if (j->state != SJ_QUEUED)
			continue;
		bool is_blocked = false;
		const struct resv *behind = NULL; /* rule (8): the reservation it may start past */
		for (size_t b = 0; b < nblocked && !is_blocked; b++)
			if ((is_blocked = !strcmp(blocked[b], j->type)))
				behind = b < bf.n ? &bf.r[b] : NULL;
		if (is_blocked && !backfill_may(in, j, behind))
			continue;
		int quota = sched_quota_of(in, j->user);
		if (quota >= 0 && user_holds(in, j->user) + j->count > quota)
			continue; /* rule (5): skipped, blocks nobody */
		if (team_skips(in, &tv, j))
			continue; /* rules (9), (10): skipped, blocks nobody */
		int *ids = xcalloc((size_t)(j->count > 0 ? j->count : 1), sizeof(int));
		if (behind ? backfill_fits(in, j, behind, free_now, scratch, ids)
			   : fits(in, j, free_now, ids)) {
			if (j->count > 1)
				qsort(ids, (size_t)j->count, sizeof(int), cmp_int);
			out->action = SCHED_START;
			out->job = k;
			out->ids = ids;
			if (behind) {
				out->backfill = true;
				out->ahead = behind->top;
				out->reserved = behind->at;
			}
			break;
		}
		free(ids);
		if (behind)
			continue; /* it would delay the reservation: it waits, blocking nobody more */
		memcpy(scratch, free_now, in->ndevs * sizeof(bool));
		if (reclaim(in, &tv, j, scratch, out)) {
			out->action = SCHED_PREEMPT; /* rule (11) */
			out->job = k;
			out->reclaim = true;
			break;
		}
		if (!j->preemptible) {
			memcpy(scratch, free_now, in->ndevs * sizeof(bool));
			if (choose_victims(in, j, scratch, out)) {
				out->action = SCHED_PREEMPT;
				out->job = k;
				break;
			}
		}
		if (nblocked < 16) {
			backfill_block(in, &bf, k);
			blocked[nblocked++] = j->type;
			for (size_t t = 0; t < ntypes; t++)
				if (!strcmp(types[t], j->type)) {
					nblocked_known++;
					break;
				}
		}
	}
	backfill_release(&bf);
	free(free_now);
	free(scratch);
	free(tv.u);
}
