/* test_sched.c -- src/sched/: queue order, all-or-nothing allocation, blocked
 * types, quotas, the preemption choice, backfill, as the rules in sched.h state them */
#include "test.h"

#include "sched/sched.h"

#include <math.h>
#include <stdbool.h>

/* A small world: jobs, devices, quotas; queue() builds the queue in order. */
struct world {
	struct sched_job jobs[64];
	size_t njobs;
	struct sched_dev devs[64];
	size_t ndevs;
	struct sched_quota quotas[8];
	size_t nquotas;
	size_t queue[64];
	size_t nqueue;
	double now; /* the decision's time (rule 8) */
	struct sched_team_limit teams[8];
	size_t nteams;
};

static void devs(struct world *w, const char *type, int n)
{
	for (int i = 0; i < n; i++)
		w->devs[w->ndevs++] = (struct sched_dev){ type, i, -1 };
}

/* A job; returns its index.  Queued unless state says otherwise. */
static size_t job(struct world *w, const char *id, const char *user, const char *type, int count,
		  int priority, bool preemptible, double created)
{
	w->jobs[w->njobs] = (struct sched_job){ id, user, type, priority, preemptible, created, count,
						NULL, SJ_QUEUED, 0, 0, NULL, 0 };
	return w->njobs++;
}

/* Job k holds device (type, id) and runs. */
static void hold(struct world *w, size_t k, int id)
{
	for (size_t i = 0; i < w->ndevs; i++)
		if (w->devs[i].id == id && !strcmp(w->devs[i].type, w->jobs[k].type)) {
			CHECK(w->devs[i].owner < 0);
			w->devs[i].owner = (int)k;
		}
	if (w->jobs[k].state == SJ_QUEUED)
		w->jobs[k].state = SJ_RUNNING;
}

static void queue(struct world *w)
{
	w->nqueue = 0;
	for (size_t k = 0; k < w->njobs; k++)
		if (w->jobs[k].state == SJ_QUEUED)
			w->queue[w->nqueue++] = k;
	sched_sort(w->jobs, w->queue, w->nqueue);
}

static struct sched_in input(struct world *w)
{
	queue(w);
	return (struct sched_in){ w->jobs, w->njobs, w->queue, w->nqueue, w->devs, w->ndevs,
				  w->quotas, w->nquotas, w->now, w->teams, w->nteams };
}

static void decide(struct world *w, struct sched_decision *d)
{
	struct sched_in in = input(w);
	sched_decide(&in, d);
}

/* Apply a START: the job runs on the ids chosen. */
static void apply_start(struct world *w, const struct sched_decision *d)
{
	CHECK_INT(d->action, SCHED_START);
	for (int k = 0; k < w->jobs[d->job].count; k++)
		hold(w, d->job, d->ids[k]);
}

/* ---- (1) queue order ---- */

TEST(queue_order_is_priority_then_submission_then_id)
{
	struct world w = { 0 };
	job(&w, "e", "u", "gpu", 1, 100, false, 5.0);
	job(&w, "a", "u", "gpu", 1, 100, false, 1.0);
	job(&w, "hi", "u", "gpu", 1, 900, false, 9.0);
	job(&w, "c", "u", "gpu", 1, 100, false, 3.0);
	job(&w, "b", "u", "gpu", 1, 100, false, 3.0); /* same time as c: id decides */
	job(&w, "lo", "u", "gpu", 1, 1, false, 0.0);
	queue(&w);
	const char *want[] = { "hi", "a", "b", "c", "e", "lo" };
	CHECK_INT(w.nqueue, 6);
	for (size_t i = 0; i < 6; i++)
		CHECK_STR(w.jobs[w.queue[i]].id, want[i]);
	CHECK(sched_cmp(&w.jobs[2], &w.jobs[1]) < 0);
	CHECK(sched_cmp(&w.jobs[1], &w.jobs[1]) == 0);
}

TEST(empty_queue_and_no_devices_decide_nothing)
{
	struct world w = { 0 };
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	job(&w, "a", "u", "gpu", 1, 100, false, 1);
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(higher_priority_starts_first_though_submitted_later)
{
	struct world w = { 0 };
	devs(&w, "gpu", 1);
	job(&w, "early", "u", "gpu", 1, 100, false, 1);
	size_t late = job(&w, "late", "u", "gpu", 1, 500, false, 2);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, late);
	apply_start(&w, &d);
	sched_decision_release(&d);
	decide(&w, &d); /* the only gpu is taken: early waits */
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

/* ---- (2) all or nothing, by type and id ---- */

TEST(all_or_nothing_takes_the_lowest_free_ids_of_its_type)
{
	struct world w = { 0 };
	devs(&w, "cpu", 4);
	devs(&w, "gpu", 4);
	size_t other = job(&w, "other", "u", "gpu", 1, 100, false, 0);
	hold(&w, other, 1);
	size_t k = job(&w, "two", "u", "gpu", 2, 100, false, 1);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, k);
	CHECK_INT(d.ids[0], 0);
	CHECK_INT(d.ids[1], 2);
	sched_decision_release(&d);
	/* 4 gpus wanted, 3 free: nothing starts, not even part of it */
	w.jobs[k].count = 4;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(exact_ids_are_a_requirement)
{
	struct world w = { 0 };
	devs(&w, "cpu", 4);
	devs(&w, "gpu", 4);
	static const int want[] = { 3, 1 };
	size_t k = job(&w, "exact", "u", "gpu", 2, 100, false, 1);
	w.jobs[k].want = want;
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.ids[0], 1); /* sorted */
	CHECK_INT(d.ids[1], 3);
	sched_decision_release(&d);
	/* gpu 3 busy: it waits, though gpus 0 and 2 are free */
	size_t busy = job(&w, "busy", "u", "gpu", 1, 100, false, 0);
	hold(&w, busy, 3);
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(a_device_of_another_type_with_the_same_id_does_not_count)
{
	struct world w = { 0 };
	devs(&w, "cpu", 2);
	devs(&w, "gpu", 2);
	static const int want[] = { 0 };
	size_t busy = job(&w, "busy", "u", "gpu", 1, 100, false, 0);
	hold(&w, busy, 0);
	size_t k = job(&w, "g0", "u", "gpu", 1, 100, false, 1);
	w.jobs[k].want = want; /* cpu 0 is free, gpu 0 is not */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

/* Deterministic pseudo-random numbers for the property test. */
static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

TEST(never_double_booked_over_many_decisions)
{
	static const char *const types[] = { "cpu", "gpu", "npu" };
	static char names[64][8];
	for (unsigned seed = 1; seed <= 40; seed++) {
		struct world w = { 0 };
		unsigned s = seed;
		devs(&w, "cpu", 3);
		devs(&w, "gpu", 4);
		devs(&w, "npu", 8);
		for (int i = 0; i < 48; i++) {
			snprintf(names[i], sizeof(names[i]), "j%02d", i);
			const char *t = types[rnd(&s) % 3];
			int max = !strcmp(t, "cpu") ? 3 : !strcmp(t, "gpu") ? 4 : 8;
			job(&w, names[i], rnd(&s) % 2 ? "alice" : "bob", t, 1 + (int)(rnd(&s) % (unsigned)max),
			    1 + (int)(rnd(&s) % 5) * 100, rnd(&s) % 2, (double)i);
		}
		/* decide and apply until nothing more starts; finish a job now and then */
		for (int round = 0; round < 400; round++) {
			struct sched_decision d;
			decide(&w, &d);
			if (d.action == SCHED_START) {
				const struct sched_job *j = &w.jobs[d.job];
				for (int a = 0; a < j->count; a++)
					for (int b = a + 1; b < j->count; b++)
						CHECK(d.ids[a] != d.ids[b]);
				apply_start(&w, &d); /* hold() checks each device was free */
			} else if (d.action == SCHED_PREEMPT) {
				for (size_t v = 0; v < d.nvictims; v++)
					w.jobs[d.victims[v]].state = SJ_STOPPING;
			}
			sched_decision_release(&d);
			if (d.action == SCHED_NONE || round % 3 == 2) {
				/* the oldest running or stopping job ends: its devices come back */
				for (size_t k = 0; k < w.njobs; k++)
					if (w.jobs[k].state == SJ_RUNNING || w.jobs[k].state == SJ_STOPPING) {
						w.jobs[k].state = SJ_IDLE;
						for (size_t i = 0; i < w.ndevs; i++)
							if (w.devs[i].owner == (int)k)
								w.devs[i].owner = -1;
						break;
					}
			}
			/* every running job holds exactly its count, all of its type */
			for (size_t k = 0; k < w.njobs; k++) {
				int held = 0;
				for (size_t i = 0; i < w.ndevs; i++)
					if (w.devs[i].owner == (int)k) {
						CHECK_STR(w.devs[i].type, w.jobs[k].type);
						held++;
					}
				bool holds = w.jobs[k].state == SJ_RUNNING || w.jobs[k].state == SJ_STOPPING;
				CHECK_INT(held, holds ? w.jobs[k].count : 0);
			}
		}
	}
}

/* ---- (3) a waiting job blocks its type only ---- */

TEST(a_waiting_job_blocks_its_type_not_others)
{
	struct world w = { 0 };
	devs(&w, "cpu", 2);
	devs(&w, "gpu", 2);
	size_t busy = job(&w, "busy", "u", "gpu", 1, 100, false, 0);
	hold(&w, busy, 0);
	job(&w, "big", "u", "gpu", 2, 500, false, 1);      /* needs both gpus: waits */
	job(&w, "small", "u", "gpu", 1, 100, false, 2);    /* would fit, but no backfill */
	size_t c = job(&w, "cpu", "u", "cpu", 1, 100, false, 3);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, c);
	apply_start(&w, &d);
	sched_decision_release(&d);
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE); /* small stays behind big */
	sched_decision_release(&d);
}

TEST(a_job_of_a_type_the_node_lacks_does_not_stop_the_scan)
{
	struct world w = { 0 };
	devs(&w, "cpu", 1);
	devs(&w, "gpu", 1);
	size_t busy = job(&w, "busy", "u", "cpu", 1, 100, false, 0);
	hold(&w, busy, 0);
	job(&w, "cpuwait", "u", "cpu", 1, 900, false, 1); /* blocks cpu */
	job(&w, "npu", "u", "npu", 1, 800, false, 2);     /* no npu here */
	job(&w, "xpu", "u", "xpu", 1, 700, false, 3);     /* no xpu either */
	size_t g = job(&w, "gpu", "u", "gpu", 1, 100, false, 4);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, g);
	sched_decision_release(&d);
}

TEST(paused_and_running_jobs_in_the_queue_are_skipped)
{
	struct world w = { 0 };
	devs(&w, "gpu", 1);
	size_t p = job(&w, "paused", "u", "gpu", 1, 900, false, 0);
	size_t k = job(&w, "next", "u", "gpu", 1, 100, false, 1);
	queue(&w);
	w.jobs[p].state = SJ_IDLE; /* paused after the queue was built */
	struct sched_in in = { w.jobs, w.njobs, w.queue, w.nqueue, w.devs, w.ndevs, NULL, 0, 0, NULL, 0 };
	struct sched_decision d;
	sched_decide(&in, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, k);
	sched_decision_release(&d);
}

/* ---- (5) quotas ---- */

TEST(quota_lookup_own_row_then_star_then_none)
{
	struct world w = { 0 };
	struct sched_in in = { 0 };
	CHECK_INT(sched_quota_of(&in, "alice"), -1);
	w.quotas[w.nquotas++] = (struct sched_quota){ "*", 2 };
	w.quotas[w.nquotas++] = (struct sched_quota){ "alice", 5 };
	in.quotas = w.quotas;
	in.nquotas = w.nquotas;
	CHECK_INT(sched_quota_of(&in, "alice"), 5);
	CHECK_INT(sched_quota_of(&in, "bob"), 2);
}

TEST(a_job_over_quota_is_skipped_and_blocks_nobody)
{
	struct world w = { 0 };
	devs(&w, "gpu", 4);
	w.quotas[w.nquotas++] = (struct sched_quota){ "alice", 2 };
	size_t a1 = job(&w, "a1", "alice", "gpu", 1, 100, false, 0);
	hold(&w, a1, 0);
	size_t a2 = job(&w, "a2", "alice", "gpu", 2, 900, false, 1); /* 1 + 2 > 2 */
	size_t b = job(&w, "b", "bob", "gpu", 2, 100, false, 2);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, b);
	apply_start(&w, &d);
	sched_decision_release(&d);
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE); /* a free gpu remains, but a2 is over quota */
	sched_decision_release(&d);
	/* within the quota once a1 is gone */
	w.jobs[a1].state = SJ_IDLE;
	w.devs[0].owner = -1;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, a2);
	sched_decision_release(&d);
}

TEST(quota_counts_all_types_and_stopping_jobs)
{
	struct world w = { 0 };
	devs(&w, "cpu", 2);
	devs(&w, "gpu", 2);
	w.quotas[w.nquotas++] = (struct sched_quota){ "*", 2 };
	size_t c = job(&w, "c", "carol", "cpu", 1, 100, false, 0);
	hold(&w, c, 0);
	size_t s = job(&w, "s", "carol", "gpu", 1, 100, true, 1);
	hold(&w, s, 0);
	w.jobs[s].state = SJ_STOPPING;
	job(&w, "g", "carol", "gpu", 1, 100, false, 2); /* 2 held + 1 > 2 */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

/* ---- (4) preemption ---- */

/* gpus 0..n-1, and the running jobs given, each on one gpu in order. */
struct runner {
	const char *id;
	int priority;
	bool preemptible;
	double created;
};

static void running(struct world *w, const struct runner *r, size_t n)
{
	devs(w, "gpu", (int)n);
	for (size_t i = 0; i < n; i++) {
		size_t k = job(w, r[i].id, "u", "gpu", 1, r[i].priority, r[i].preemptible, r[i].created);
		hold(w, k, (int)i);
	}
}

static void check_victims(const struct world *w, const struct sched_decision *d,
			  const char *const *ids, size_t n)
{
	CHECK_INT(d->action, SCHED_PREEMPT);
	CHECK_INT(d->nvictims, n);
	for (size_t i = 0; i < n; i++)
		CHECK_STR(w->jobs[d->victims[i]].id, ids[i]);
}

TEST(preempts_only_lower_priority_preemptible_jobs_newest_first)
{
	struct world w = { 0 };
	static const struct runner r[] = {
		{ "old", 50, true, 1 }, { "new", 50, true, 2 }, { "fixed", 10, false, 3 },
		{ "higher", 200, true, 4 }, { "equal", 100, true, 5 },
	};
	running(&w, r, 5);
	size_t k = job(&w, "urgent", "u", "gpu", 1, 100, false, 9);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.job, k);
	check_victims(&w, &d, (const char *const[]){ "new" }, 1);
	sched_decision_release(&d);
	/* two devices: both lower-priority preemptible jobs, newest first */
	w.jobs[k].count = 2;
	decide(&w, &d);
	check_victims(&w, &d, (const char *const[]){ "new", "old" }, 2);
	sched_decision_release(&d);
}

TEST(lowest_priority_goes_first_whatever_its_age)
{
	struct world w = { 0 };
	static const struct runner r[] = { { "older-low", 20, true, 1 }, { "newer-mid", 50, true, 2 } };
	running(&w, r, 2);
	job(&w, "urgent", "u", "gpu", 1, 100, false, 9);
	struct sched_decision d;
	decide(&w, &d);
	check_victims(&w, &d, (const char *const[]){ "older-low" }, 1);
	sched_decision_release(&d);
}

TEST(nobody_is_preempted_when_it_would_not_make_the_job_fit)
{
	struct world w = { 0 };
	static const struct runner r[] = {
		{ "p1", 10, true, 1 }, { "p2", 10, true, 2 }, { "fixed", 10, false, 3 },
	};
	running(&w, r, 3);
	job(&w, "huge", "u", "gpu", 3, 900, false, 9); /* fixed's gpu can never be had */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(a_preemptible_or_equal_priority_job_preempts_nobody)
{
	struct world w = { 0 };
	static const struct runner r[] = { { "p", 100, true, 1 } };
	running(&w, r, 1);
	size_t k = job(&w, "soft", "u", "gpu", 1, 900, true, 9);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	w.jobs[k].preemptible = false;
	w.jobs[k].priority = 100; /* not strictly higher */
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(devices_of_stopping_jobs_count_as_coming)
{
	struct world w = { 0 };
	static const struct runner r[] = { { "a", 10, true, 1 }, { "b", 10, true, 2 } };
	running(&w, r, 2);
	w.jobs[1].state = SJ_STOPPING; /* b already asked to stop */
	job(&w, "urgent", "u", "gpu", 1, 900, false, 9);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE); /* waits for b, does not preempt a too */
	sched_decision_release(&d);
	w.jobs[0].state = SJ_RUNNING;
	/* needing two, it takes b's coming device plus a */
	w.jobs[2].count = 2;
	decide(&w, &d);
	check_victims(&w, &d, (const char *const[]){ "a" }, 1);
	sched_decision_release(&d);
}

TEST(exact_ids_preempt_only_the_holders_of_those_ids)
{
	struct world w = { 0 };
	static const struct runner r[] = { { "on0", 10, true, 1 }, { "on1", 10, true, 2 } };
	running(&w, r, 2);
	static const int want[] = { 0 };
	size_t k = job(&w, "wants0", "u", "gpu", 1, 900, false, 9);
	w.jobs[k].want = want;
	struct sched_decision d;
	decide(&w, &d);
	/* on1 is newer and tried first, but only on0 holds gpu 0 */
	check_victims(&w, &d, (const char *const[]){ "on0" }, 1);
	sched_decision_release(&d);
}

TEST(preemption_stays_within_the_device_type)
{
	struct world w = { 0 };
	devs(&w, "cpu", 1);
	devs(&w, "gpu", 1);
	size_t c = job(&w, "cpu-low", "u", "cpu", 1, 1, true, 1);
	hold(&w, c, 0);
	size_t g = job(&w, "gpu-fixed", "u", "gpu", 1, 500, false, 2);
	hold(&w, g, 0);
	job(&w, "urgent", "u", "gpu", 1, 900, false, 9);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

/* ---- (6) leased devices ---- */

TEST(leased_devices_are_neither_free_nor_preemptible)
{
	struct world w = { 0 };
	devs(&w, "gpu", 2);
	w.devs[0].owner = SCHED_LEASED; /* a `trainctl run` holds gpu 0 */
	size_t one = job(&w, "one", "u", "gpu", 1, 100, false, 1);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, one);
	CHECK_INT(d.ids[0], 1); /* the free one */
	sched_decision_release(&d);
	/* two wanted, one leased: it waits, and even the highest priority preempts nobody */
	w.jobs[one].count = 2;
	w.jobs[one].priority = 1000;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	/* exact ids on the leased one wait too */
	static const int want[] = { 0 };
	w.jobs[one].count = 1;
	w.jobs[one].want = want;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	/* nor does a lease count against anybody's quota */
	w.jobs[one].want = NULL;
	w.quotas[w.nquotas++] = (struct sched_quota){ "u", 1 };
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	sched_decision_release(&d);
}

/* ---- (7) unhealthy devices ---- */

TEST(unhealthy_devices_are_neither_free_nor_preemptible)
{
	struct world w = { 0 };
	devs(&w, "gpu", 3);
	w.devs[0].owner = SCHED_UNHEALTHY; /* failed its health check */
	size_t low = job(&w, "low", "u", "gpu", 1, 10, true, 1);
	hold(&w, low, 1);
	size_t one = job(&w, "one", "u", "gpu", 1, 100, false, 2);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, one);
	CHECK_INT(d.ids[0], 2); /* the healthy free one, not gpu 0 */
	sched_decision_release(&d);
	/* three wanted, one unhealthy: preempting "low" cannot help, so nobody is */
	w.jobs[one].count = 3;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}


/* ---- (9)-(11) teams ---- */

static void team(struct world *w, const char *name, const char *type, int guarantee, int borrow)
{
	w->teams[w->nteams++] = (struct sched_team_limit){ name, type, guarantee, borrow };
}

/* A job of team t; returns its index. */
static size_t tjob(struct world *w, const char *id, const char *t, int count, double created)
{
	size_t k = job(w, id, id, "gpu", count, 100, false, created);
	w->jobs[k].team = t;
	return k;
}

/* Job k runs on the next count free gpus. */
static void run_on_free(struct world *w, size_t k)
{
	int n = 0;
	for (size_t i = 0; i < w->ndevs && n < w->jobs[k].count; i++)
		if (w->devs[i].owner == SCHED_FREE) {
			hold(w, k, w->devs[i].id);
			n++;
		}
	CHECK_INT(n, w->jobs[k].count);
}

/* Two teams on 4 gpus: a guaranteed 2 and may borrow 2, b guaranteed 2. */
static void two_teams(struct world *w)
{
	devs(w, "gpu", 4);
	team(w, "a", "gpu", 2, 2);
	team(w, "b", "gpu", 2, 0);
}

TEST(a_team_holds_at_most_guarantee_plus_borrow)
{
	struct world w = { 0 };
	devs(&w, "gpu", 6);
	team(&w, "a", "gpu", 2, 1);
	run_on_free(&w, tjob(&w, "a1", "a", 3, 1));
	size_t a2 = tjob(&w, "a2", "a", 1, 2);
	size_t x = tjob(&w, "x", NULL, 1, 3); /* no team: no limit, only borrows */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, x); /* a2 is skipped (2 + 1 taken) and blocks nobody */
	sched_decision_release(&d);
	w.teams[0].borrow = 2;
	w.jobs[x].state = SJ_IDLE;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, a2);
	sched_decision_release(&d);
}

TEST(the_newest_jobs_past_the_guarantee_are_borrowing)
{
	struct world w = { 0 };
	two_teams(&w);
	size_t a1 = tjob(&w, "a1", "a", 2, 1), a2 = tjob(&w, "a2", "a", 1, 2);
	size_t b1 = tjob(&w, "b1", "b", 1, 3), x = tjob(&w, "x", NULL, 1, 4);
	run_on_free(&w, a2);
	run_on_free(&w, a1);
	run_on_free(&w, b1);
	w.jobs[x].state = SJ_RUNNING;
	struct sched_in in = { w.jobs, w.njobs, NULL, 0, w.devs, w.ndevs, NULL, 0, 0, w.teams, w.nteams };
	CHECK(!sched_borrowing(&in, a1)); /* oldest: inside the guarantee, whatever it started after */
	CHECK(sched_borrowing(&in, a2));
	CHECK(!sched_borrowing(&in, b1));
	CHECK(sched_borrowing(&in, x)); /* no team: guarantee 0 */
	CHECK(sched_team_row(&in, "a", "gpu") == &w.teams[0]);
	CHECK(sched_team_row(&in, "a", "cpu") == NULL);
	CHECK(sched_team_row(&in, NULL, "gpu") == NULL);
}

TEST(reclaim_stops_the_newest_borrowers_only_as_many_as_needed)
{
	struct world w = { 0 };
	two_teams(&w);
	static const char *const ids[] = { "a1", "a2", "a3", "a4" };
	size_t a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = tjob(&w, ids[i], "a", 1, 1 + i);
		run_on_free(&w, a[i]);
	}
	w.jobs[a[3]].priority = 1000; /* priority and preemptible do not matter: they borrow */
	size_t b1 = tjob(&w, "b1", "b", 1, 10);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_PREEMPT);
	CHECK_INT(d.job, b1);
	CHECK(d.reclaim);
	CHECK_INT(d.nvictims, 1);
	CHECK_INT(d.victims[0], a[3]);
	sched_decision_release(&d);
	w.jobs[b1].count = 2;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_PREEMPT);
	CHECK_INT(d.nvictims, 2);
	CHECK_INT(d.victims[0], a[3]);
	CHECK_INT(d.victims[1], a[2]);
	sched_decision_release(&d);
	/* while they stop, their devices are coming: nothing more is reclaimed */
	w.jobs[a[3]].state = SJ_STOPPING;
	w.jobs[a[2]].state = SJ_STOPPING;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(no_reclaim_past_the_guarantee_nor_of_jobs_inside_theirs)
{
	struct world w = { 0 };
	two_teams(&w);
	run_on_free(&w, tjob(&w, "a1", "a", 2, 1));
	run_on_free(&w, tjob(&w, "b1", "b", 2, 2));
	size_t b2 = tjob(&w, "b2", "b", 1, 3); /* b past its guarantee (borrow 0): skipped */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	/* a is inside its guarantee: nothing of it is reclaimed for a team with no row */
	w.jobs[b2].team = "c";
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

/* a runs a1 (2, its guarantee) and a2 (1, borrowing), 1 gpu free; a3 (older than
 * b1, but it would borrow) and b1 (2, inside b's guarantee) wait. */
static void lending(struct world *w, size_t *a2, size_t *a3, size_t *b1)
{
	two_teams(w);
	run_on_free(w, tjob(w, "a1", "a", 2, 1));
	*a2 = tjob(w, "a2", "a", 1, 2);
	run_on_free(w, *a2);
	*a3 = tjob(w, "a3", "a", 1, 3);
	*b1 = tjob(w, "b1", "b", 2, 4);
}

TEST(a_borrower_waits_while_a_guarantee_waits_then_the_guarantee_starts)
{
	struct world w = { 0 };
	size_t a2, a3, b1;
	lending(&w, &a2, &a3, &b1);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_PREEMPT); /* a3 is skipped; b1 reclaims a2 */
	CHECK_INT(d.job, b1);
	CHECK_INT(d.nvictims, 1);
	CHECK_INT(d.victims[0], a2);
	sched_decision_release(&d);
	w.jobs[a2].state = SJ_STOPPING;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE); /* a3 still may not take the free gpu */
	sched_decision_release(&d);
	for (size_t i = 0; i < w.ndevs; i++) /* a2 is gone, back in the queue */
		if (w.devs[i].owner == (int)a2)
			w.devs[i].owner = SCHED_FREE;
	w.jobs[a2].state = SJ_QUEUED;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, b1);
	apply_start(&w, &d);
	sched_decision_release(&d);
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE); /* no device left; a3 (a2) wait their turn */
	sched_decision_release(&d);
	(void)a3;
}

TEST(a_borrower_goes_on_when_the_waiting_guarantee_is_over_its_user_quota)
{
	struct world w = { 0 };
	two_teams(&w);
	run_on_free(&w, tjob(&w, "a1", "a", 2, 1));
	size_t a2 = tjob(&w, "a2", "a", 1, 2);
	tjob(&w, "b1", "b", 1, 3);
	w.quotas[w.nquotas++] = (struct sched_quota){ "b1", 0 };
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, a2);
	sched_decision_release(&d);
}

TEST(why_a_queued_job_waits)
{
	struct world w = { 0 };
	size_t a2, a3, b1;
	lending(&w, &a2, &a3, &b1);
	size_t b2 = tjob(&w, "b2", "b", 3, 5);
	queue(&w);
	struct sched_in in = { w.jobs, w.njobs, w.queue, w.nqueue, w.devs, w.ndevs,
			       w.quotas, w.nquotas, 0, w.teams, w.nteams };
	CHECK_INT(sched_why(&in, a3), SCHED_WAIT_RECLAIM); /* b1 waits inside its guarantee */
	CHECK_STR(sched_wait_name(SCHED_WAIT_RECLAIM), "guarantee of another team");
	CHECK_INT(sched_why(&in, b1), SCHED_WAIT_DEVICES);
	CHECK_INT(sched_why(&in, b2), SCHED_WAIT_TEAM_LIMIT); /* 3 > 2 + 0 */
	w.quotas[w.nquotas++] = (struct sched_quota){ "b1", 1 };
	in.nquotas = w.nquotas;
	CHECK_INT(sched_why(&in, b1), SCHED_WAIT_QUOTA);
	CHECK_STR(sched_wait_name(SCHED_WAIT_QUOTA), "quota");
}

/* ---- (8) backfill ---- */

#define NOW 1000.0

/* A queued 1-user gpu job of priority 100 with a limit (0: none). */
static size_t limited(struct world *w, const char *id, int count, double created, double limit)
{
	size_t k = job(w, id, "u", "gpu", count, 100, false, created);
	w->jobs[k].max_runtime = limit;
	return k;
}

/* Job k runs on gpu ids [from, from + its count) since started. */
static void runs(struct world *w, size_t k, int from, double started)
{
	for (int id = from; id < from + w->jobs[k].count; id++)
		hold(w, k, id);
	w->jobs[k].started = started;
}

static void nothing_starts(struct world *w)
{
	struct sched_decision d;
	decide(w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

/* The job the next decision starts (which must be a start). */
static size_t next_start(struct world *w)
{
	struct sched_decision d;
	decide(w, &d);
	CHECK_INT(d.action, SCHED_START);
	size_t k = d.job;
	sched_decision_release(&d);
	return k;
}

/* The next decision backfills job k onto gpu id0; the caller releases d. */
static void backfills(struct world *w, size_t k, int id0, struct sched_decision *d)
{
	decide(w, d);
	CHECK_INT(d->action, SCHED_START);
	CHECK_INT(d->job, k);
	CHECK(d->backfill);
	CHECK_INT(d->ids[0], id0);
}

/* The reservation of job k: its time, or -1 when none can be computed. */
static double reserved(struct world *w, size_t k)
{
	struct sched_in in = input(w);
	double at = 0;
	return sched_reservation(&in, k, &at) ? at : -1;
}

/*
 * 2 gpus; "long" (index 0) holds gpu 0 until NOW - 100 + long_limit; "big"
 * (index 1, 2 gpus) waits for it.
 */
static void picture(struct world *w, double long_limit)
{
	w->now = NOW;
	devs(w, "gpu", 2);
	runs(w, limited(w, "long", 1, 1, long_limit), 0, NOW - 100);
	limited(w, "big", 2, 2, 3600);
}

TEST(backfill_a_short_job_starts_when_it_ends_before_the_reservation)
{
	struct world w = { 0 };
	picture(&w, 600); /* big reserved from NOW + 500 */
	size_t sh = limited(&w, "short", 1, 3, 300);
	struct sched_decision d;
	backfills(&w, sh, 1, &d);
	CHECK_STR(w.jobs[d.ahead].id, "big");
	CHECK(fabs(d.reserved - (NOW + 500)) < 1e-9);
	sched_decision_release(&d);
	CHECK(fabs(reserved(&w, 1) - (NOW + 500)) < 1e-9);
}

TEST(backfill_not_for_a_job_ending_after_the_reservation_or_without_a_limit)
{
	struct world w = { 0 };
	picture(&w, 600);
	limited(&w, "long2", 1, 3, 501); /* would end at NOW + 501: it would delay big */
	limited(&w, "nolimit", 1, 4, 0);
	nothing_starts(&w);
}

TEST(backfill_nothing_past_a_running_job_without_a_limit)
{
	struct world w = { 0 };
	picture(&w, 0); /* long never ends in the scheduler's view */
	limited(&w, "short", 1, 3, 1);
	nothing_starts(&w);
	CHECK(reserved(&w, 1) < 0);
}

TEST(backfill_a_long_job_may_use_devices_the_reservation_does_not_need)
{
	struct world w = { 0 };
	w.now = NOW;
	devs(&w, "gpu", 4);
	runs(&w, limited(&w, "a", 2, 1, 600), 0, NOW);  /* gpus 0-1 until NOW + 600 */
	limited(&w, "big", 3, 2, 3600);                  /* then on gpus 0, 1, 2 */
	size_t lg = limited(&w, "long", 1, 3, 7200);
	struct sched_decision d;
	backfills(&w, lg, 3, &d); /* not gpu 2, which big gets at NOW + 600 */
	sched_decision_release(&d);
	/* big needs all 4: only a job that ends by NOW + 600 may start */
	w.jobs[1].count = 4;
	w.jobs[lg].max_runtime = 601;
	size_t ok = limited(&w, "fits", 2, 5, 600);
	CHECK_INT(next_start(&w), ok);
}

TEST(backfill_a_stopping_job_or_one_past_its_limit_ends_now)
{
	struct world w = { 0 };
	picture(&w, 0);
	w.jobs[0].state = SJ_STOPPING; /* no limit, but it is going */
	limited(&w, "short", 1, 3, 60);
	nothing_starts(&w); /* big starts as soon as it is gone: nothing ends before */
	CHECK(fabs(reserved(&w, 1) - NOW) < 1e-9);
	w.jobs[0].state = SJ_RUNNING;
	w.jobs[0].max_runtime = 50; /* started NOW - 100: past it, being stopped */
	nothing_starts(&w);
	CHECK(fabs(reserved(&w, 1) - NOW) < 1e-9);
}

TEST(backfill_respects_quotas)
{
	struct world w = { 0 };
	picture(&w, 600);
	w.quotas[w.nquotas++] = (struct sched_quota){ "u", 1 };
	size_t sh = limited(&w, "short", 1, 3, 60); /* u holds 1 already */
	nothing_starts(&w);
	w.nquotas = 0;
	CHECK_INT(next_start(&w), sh);
}

TEST(backfilled_jobs_in_turn_never_delay_the_reservation)
{
	/* start every job the scheduler allows; the reservation stays NOW + 500 */
	struct world w = { 0 };
	w.now = NOW;
	devs(&w, "gpu", 4);
	runs(&w, limited(&w, "long", 2, 1, 600), 0, NOW - 100);
	limited(&w, "big", 4, 2, 3600);
	static const char *const ids[] = { "s0", "s1", "s2", "s3", "s4", "s5" };
	for (int i = 0; i < 6; i++)
		limited(&w, ids[i], 1, 3 + i, i % 2 ? 400 : 900);
	int started = 0;
	for (int round = 0; round < 10; round++) {
		struct sched_decision d;
		decide(&w, &d);
		bool none = d.action == SCHED_NONE;
		if (!none) {
			CHECK_INT(d.action, SCHED_START);
			CHECK(d.backfill && w.jobs[d.job].max_runtime <= 500);
			runs(&w, d.job, d.ids[0], NOW);
			started++;
		}
		sched_decision_release(&d);
		CHECK(fabs(reserved(&w, 1) - (NOW + 500)) < 1e-9);
		if (none)
			break;
	}
	CHECK_INT(started, 2); /* the two free gpus, to the 400 s jobs */
}
