/*
 * sched_bench.c -- the server's scheduler (src/sched/sched.c) replayed on a
 * synthetic trace, with today's rules (FIFO by priority: no job has a
 * limit, so rule (8) never applies) and with backfill (every job has
 * limits.max_runtime), side by side on the same trace; and the time of one
 * sched_decide with 10,000 jobs waiting on a full machine.
 *
 * The trace (seed 1234): NJOBS jobs from 3 users arrive as a Poisson stream
 * whose offered load is LOAD x the machine (64 nodes x 8 gpus = 512 in the
 * scheduler's view); sizes 1, 2, 4, 8, 16, 32, 64 gpus (40/15/15/20/5/3/2%);
 * runtimes log-uniform from 1 min to 12 h; each job's limit is its runtime x
 * a factor uniform in [1, 3] (users overestimate), rounded up to a minute.
 *
 * usage: sched_bench [NJOBS [LOAD]]     (defaults 10000 1.2)
 * Prints per mode: utilisation (busy gpu-seconds over 512 x the makespan),
 * mean and p95 wait, and the mean CPU time of one sched_decide in the
 * replay; then the 10,000-waiting decision, FIFO and backfill, and their
 * ratio (CPU time of this thread: the machine's load does not count).
 */
#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NDEV 512

struct tjob {
	double arrive, runtime, limit;
	int count;
	char id[16];
	const char *user;
};

static unsigned long long rng = 1234;
static double urand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* This thread's CPU seconds: a decision's cost, not the other sessions' share of the core. */
static double cpu_s(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static struct tjob *make_trace(int n, double load)
{
	static const char *const users[] = { "vision", "nlp", "speech" };
	static const int sizes[] = { 1, 2, 4, 8, 16, 32, 64 };
	static const double cum[] = { 0.40, 0.55, 0.70, 0.90, 0.95, 0.98, 1.0 };
	struct tjob *t = calloc((size_t)n, sizeof(*t));
	if (!t)
		exit(1);
	double work = 0;
	for (int i = 0; i < n; i++) {
		double u = urand();
		int s = 0;
		while (u > cum[s])
			s++;
		t[i].count = sizes[s];
		t[i].runtime = 60 * exp(urand() * log(720.0)); /* 1 min .. 12 h */
		t[i].limit = ceil(t[i].runtime * (1 + 2 * urand()) / 60) * 60;
		t[i].user = users[i % 3];
		snprintf(t[i].id, sizeof(t[i].id), "j%05d", i);
		work += t[i].count * t[i].runtime;
	}
	double rate = load * NDEV / (work / n); /* jobs per second */
	double at = 0;
	for (int i = 0; i < n; i++) {
		at += -log(1 - urand()) / rate;
		t[i].arrive = at;
	}
	return t;
}

struct result {
	double util, mean_wait, p95_wait, decide_us;
};

static void replay(const struct tjob *t, int n, bool backfill, struct result *r)
{
	struct sched_job *jobs = calloc((size_t)n, sizeof(*jobs));
	double *end = calloc((size_t)n, sizeof(double)), *wait = calloc((size_t)n, sizeof(double));
	size_t *queue = calloc((size_t)n, sizeof(size_t));
	struct sched_dev devs[NDEV];
	if (!jobs || !end || !wait || !queue)
		exit(1);
	for (int i = 0; i < NDEV; i++)
		devs[i] = (struct sched_dev){ "gpu", i, SCHED_FREE };
	for (int i = 0; i < n; i++)
		jobs[i] = (struct sched_job){ t[i].id, t[i].user, "gpu", 100, false, t[i].arrive,
					      t[i].count, NULL, SJ_IDLE, 0, backfill ? t[i].limit : 0 };
	size_t nq = 0;
	int next = 0, done = 0, nrun = 0;
	double now = 0, busy = 0, dsum = 0;
	long dcalls = 0;
	while (done < n) {
		/* the next event: an arrival or an end */
		double tnext = next < n ? t[next].arrive : INFINITY;
		for (int k = 0; k < n && nrun; k++)
			if (jobs[k].state == SJ_RUNNING && end[k] < tnext)
				tnext = end[k];
		now = tnext;
		for (int k = 0; k < n && nrun; k++)
			if (jobs[k].state == SJ_RUNNING && end[k] <= now) {
				jobs[k].state = SJ_IDLE;
				for (int i = 0; i < NDEV; i++)
					if (devs[i].owner == k)
						devs[i].owner = SCHED_FREE;
				nrun--;
				done++;
			}
		while (next < n && t[next].arrive <= now) {
			jobs[next].state = SJ_QUEUED;
			queue[nq++] = (size_t)next++; /* arrival order is queue order (one priority) */
		}
		for (;;) {
			struct sched_in in = { jobs, (size_t)n, queue, nq, devs, NDEV, NULL, 0, now };
			struct sched_decision d;
			double t0 = cpu_s();
			sched_decide(&in, &d);
			dsum += cpu_s() - t0;
			dcalls++;
			if (d.action != SCHED_START) {
				sched_decision_release(&d);
				break;
			}
			size_t k = d.job;
			for (int c = 0; c < jobs[k].count; c++)
				devs[d.ids[c]].owner = (int)k;
			jobs[k].state = SJ_RUNNING;
			jobs[k].started = now;
			end[k] = now + t[k].runtime;
			wait[k] = now - t[k].arrive;
			busy += t[k].count * t[k].runtime;
			nrun++;
			size_t kept = 0;
			for (size_t q = 0; q < nq; q++)
				if (queue[q] != k)
					queue[kept++] = queue[q];
			nq = kept;
			sched_decision_release(&d);
		}
	}
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += wait[i];
	qsort(wait, (size_t)n, sizeof(double), cmp_double);
	r->util = busy / (NDEV * (now - t[0].arrive));
	r->mean_wait = sum / n;
	r->p95_wait = wait[(size_t)(0.95 * (n - 1))];
	r->decide_us = dsum / (double)dcalls * 1e6;
	free(jobs);
	free(end);
	free(wait);
	free(queue);
}

/* One decision with every job of the trace waiting on a full machine; mean us over reps. */
static double one_round(const struct tjob *t, int n, bool backfill, int reps)
{
	struct sched_job *jobs = calloc((size_t)n + NDEV, sizeof(*jobs));
	size_t *queue = calloc((size_t)n, sizeof(size_t));
	struct sched_dev devs[NDEV];
	if (!jobs || !queue)
		exit(1);
	/* 64 running 8-gpu jobs with limits ending over the next hours */
	for (int r = 0; r < NDEV / 8; r++) {
		jobs[n + r] = (struct sched_job){ "run", "vision", "gpu", 100, false, 0, 8, NULL,
						  SJ_RUNNING, 0, 600.0 * (r + 1) };
		for (int i = 0; i < 8; i++)
			devs[r * 8 + i] = (struct sched_dev){ "gpu", r * 8 + i, n + r };
	}
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct sched_job){ t[i].id, t[i].user, "gpu", 100, false, (double)i,
					      t[i].count, NULL, SJ_QUEUED, 0, backfill ? t[i].limit : 0 };
		queue[i] = (size_t)i;
	}
	struct sched_in in = { jobs, (size_t)n + NDEV / 8, queue, (size_t)n, devs, NDEV, NULL, 0, 1 };
	double t0 = cpu_s();
	for (int r = 0; r < reps; r++) {
		struct sched_decision d;
		sched_decide(&in, &d);
		if (d.action != SCHED_NONE)
			exit(2); /* nothing is free: nothing may start */
		sched_decision_release(&d);
	}
	double us = (cpu_s() - t0) / reps * 1e6;
	free(jobs);
	free(queue);
	return us;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	double load = argc > 2 ? atof(argv[2]) : 1.2;
	if (n < 10 || !(load > 0)) {
		fprintf(stderr, "usage: %s [NJOBS [LOAD]]\n", argv[0]);
		return 2;
	}
	struct tjob *t = make_trace(n, load);
	struct result fifo, bf;
	replay(t, n, false, &fifo);
	replay(t, n, true, &bf);
	printf("trace: %d jobs, offered load %.2f of %d gpus, seed 1234\n", n, load, NDEV);
	printf("%-9s utilisation %5.1f%%  mean wait %8.0f s  p95 wait %8.0f s  decide %7.1f us\n",
	       "fifo", fifo.util * 100, fifo.mean_wait, fifo.p95_wait, fifo.decide_us);
	printf("%-9s utilisation %5.1f%%  mean wait %8.0f s  p95 wait %8.0f s  decide %7.1f us\n",
	       "backfill", bf.util * 100, bf.mean_wait, bf.p95_wait, bf.decide_us);
	printf("utilisation +%.1f points, mean wait ratio fifo/backfill %.2fx\n",
	       (bf.util - fifo.util) * 100, fifo.mean_wait / bf.mean_wait);
	double f1 = one_round(t, n, false, 200), b1 = one_round(t, n, true, 200);
	printf("one sched_decide, %d waiting, machine full: fifo %.1f us  backfill %.1f us  ratio %.1fx\n",
	       n, f1, b1, b1 / f1);
	free(t);
	return 0;
}
