/* test_sched_backfill.c -- src/sched/: rule (8), backfill past the reservation
 * of a blocked job, judged by limits.max_runtime (sched.h) */
#include "test.h"

#include "sched/sched.h"

#include <math.h>
#include <stdbool.h>

#define NOW 1000.0

struct world {
	struct sched_job jobs[32];
	size_t njobs;
	struct sched_dev devs[32];
	size_t ndevs;
	struct sched_quota quotas[4];
	size_t nquotas;
	size_t queue[32];
	size_t nqueue;
};

static void devs(struct world *w, const char *type, int n)
{
	for (int i = 0; i < n; i++)
		w->devs[w->ndevs++] = (struct sched_dev){ type, i, SCHED_FREE };
}

/* A queued job of user "u", priority 100, with a limit (0: none). */
static size_t job(struct world *w, const char *id, int count, double created, double limit)
{
	w->jobs[w->njobs] = (struct sched_job){ id, "u", "gpu", 100, false, created, count, NULL,
						SJ_QUEUED, 0, limit };
	return w->njobs++;
}

/* Job k runs on gpu ids [from, from + its count), started at started. */
static void running(struct world *w, size_t k, int from, double started)
{
	for (int id = from; id < from + w->jobs[k].count; id++)
		for (size_t i = 0; i < w->ndevs; i++)
			if (w->devs[i].id == id) {
				CHECK_INT(w->devs[i].owner, SCHED_FREE);
				w->devs[i].owner = (int)k;
			}
	w->jobs[k].state = SJ_RUNNING;
	w->jobs[k].started = started;
}

static struct sched_in input(struct world *w)
{
	w->nqueue = 0;
	for (size_t k = 0; k < w->njobs; k++)
		if (w->jobs[k].state == SJ_QUEUED)
			w->queue[w->nqueue++] = k;
	sched_sort(w->jobs, w->queue, w->nqueue);
	return (struct sched_in){ w->jobs, w->njobs, w->queue, w->nqueue, w->devs, w->ndevs,
				  w->quotas, w->nquotas, NOW };
}

static void decide(struct world *w, struct sched_decision *d)
{
	struct sched_in in = input(w);
	sched_decide(&in, d);
}

/*
 * The test's picture: 2 gpus; "long" holds gpu 0 until NOW + 500; "big"
 * (2 gpus) waits for it, reserved from NOW + 500.
 */
static void picture(struct world *w, double long_limit)
{
	devs(w, "gpu", 2);
	size_t lg = job(w, "long", 1, 1, long_limit);
	running(w, lg, 0, NOW - 100);
	job(w, "big", 2, 2, 3600);
}

TEST(a_short_job_starts_past_a_blocked_one_when_it_ends_before_the_reservation)
{
	struct world w = { 0 };
	picture(&w, 600);
	size_t sh = job(&w, "short", 1, 3, 300); /* ends at NOW + 300 < NOW + 500 */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, sh);
	CHECK(d.backfill);
	CHECK_STR(w.jobs[d.ahead].id, "big");
	CHECK(fabs(d.reserved - (NOW + 500)) < 1e-9);
	CHECK_INT(d.ids[0], 1);
	sched_decision_release(&d);
	struct sched_in in = input(&w);
	double at = 0;
	CHECK(sched_reservation(&in, 1, &at));
	CHECK(fabs(at - (NOW + 500)) < 1e-9);
}

TEST(a_job_that_would_end_after_the_reservation_waits)
{
	struct world w = { 0 };
	picture(&w, 600);
	job(&w, "long2", 1, 3, 501); /* ends at NOW + 501: it would delay big */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(a_job_without_a_limit_never_backfills)
{
	struct world w = { 0 };
	picture(&w, 600);
	job(&w, "nolimit", 1, 3, 0);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(nothing_backfills_past_a_running_job_without_a_limit)
{
	struct world w = { 0 };
	picture(&w, 0); /* long never ends in the scheduler's view */
	job(&w, "short", 1, 3, 1);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	struct sched_in in = input(&w);
	double at = 0;
	CHECK(!sched_reservation(&in, 1, &at));
	CHECK(isinf(at));
}

TEST(a_long_job_may_use_devices_the_reservation_does_not_need)
{
	struct world w = { 0 };
	devs(&w, "gpu", 4);
	size_t a = job(&w, "a", 2, 1, 600);
	running(&w, a, 0, NOW); /* gpus 0-1 until NOW + 600 */
	job(&w, "big", 3, 2, 3600); /* needs 3: reserved from NOW + 600 on gpus 0, 1, 2 */
	size_t lg = job(&w, "long", 1, 3, 7200);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, lg);
	CHECK(d.backfill);
	CHECK_INT(d.ids[0], 3); /* not gpu 2, which big gets at NOW + 600 */
	sched_decision_release(&d);
}

TEST(backfill_never_takes_a_device_the_reservation_needs_for_longer)
{
	struct world w = { 0 };
	devs(&w, "gpu", 4);
	size_t a = job(&w, "a", 2, 1, 600);
	running(&w, a, 0, NOW);
	job(&w, "big", 4, 2, 3600); /* needs all 4 from NOW + 600 */
	job(&w, "long", 1, 3, 7200);
	job(&w, "long2", 2, 4, 601);
	size_t ok = job(&w, "fits", 2, 5, 600);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_INT(d.job, ok);
	sched_decision_release(&d);
}

TEST(a_stopping_job_frees_its_devices_now_in_the_reservation)
{
	struct world w = { 0 };
	picture(&w, 0);
	w.jobs[0].state = SJ_STOPPING; /* no limit, but it is going */
	job(&w, "short", 1, 3, 60);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE); /* big starts as soon as it is gone: nothing fits before */
	sched_decision_release(&d);
}

TEST(a_job_past_its_limit_counts_as_ending_now)
{
	struct world w = { 0 };
	picture(&w, 50); /* started NOW - 100 with 50 s: being stopped */
	job(&w, "short", 1, 3, 60);
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
}

TEST(backfill_respects_quotas_and_other_types)
{
	struct world w = { 0 };
	picture(&w, 600);
	w.quotas[w.nquotas++] = (struct sched_quota){ "u", 1 };
	job(&w, "short", 1, 3, 60); /* u holds 1 already */
	struct sched_decision d;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_NONE);
	sched_decision_release(&d);
	w.nquotas = 0;
	decide(&w, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_STR(w.jobs[d.job].id, "short");
	sched_decision_release(&d);
}

TEST(backfilled_jobs_in_turn_never_delay_the_reservation)
{
	/* start every job the scheduler allows; the reservation stays NOW + 500 */
	struct world w = { 0 };
	devs(&w, "gpu", 4);
	size_t lg = job(&w, "long", 2, 1, 600);
	running(&w, lg, 0, NOW - 100);
	job(&w, "big", 4, 2, 3600);
	for (int i = 0; i < 6; i++) {
		static const char *const ids[] = { "s0", "s1", "s2", "s3", "s4", "s5" };
		job(&w, ids[i], 1, 3 + i, i % 2 ? 400 : 900);
	}
	int started = 0;
	for (int round = 0; round < 10; round++) {
		struct sched_decision d;
		decide(&w, &d);
		if (d.action == SCHED_NONE) {
			sched_decision_release(&d);
			break;
		}
		CHECK_INT(d.action, SCHED_START);
		CHECK(d.backfill);
		CHECK(w.jobs[d.job].max_runtime <= 500);
		running(&w, d.job, d.ids[0], NOW);
		started++;
		sched_decision_release(&d);
		struct sched_in in = input(&w);
		double at = 0;
		CHECK(sched_reservation(&in, 1, &at));
		CHECK(fabs(at - (NOW + 500)) < 1e-9);
	}
	CHECK_INT(started, 2); /* the two free gpus, to the 400 s jobs */
}
