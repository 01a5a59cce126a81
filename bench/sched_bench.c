/*
 * sched_bench.c -- the server's scheduler (src/sched/sched.c) replayed on a
 * synthetic trace, with today's rules (FIFO by priority: no job has a
 * limit, so rule (8) never applies), with backfill (every job has
 * limits.max_runtime), and with fair share + backfill (rule (1)'s factor
 * from src/sched/fairshare.c, the teams' guarantees as shares, the usage
 * read again every FS_EVERY simulated seconds as the server does), side by
 * side on the same trace; and the time of one round with 10,000 jobs
 * waiting on a full machine.
 *
 * Teams: job i is team vision, nlp or speech by i's last digit (0-3, 4-6,
 * 7-9: 40/30/30% of the jobs, drawn without the random stream, so the
 * trace is the one of the runs before teams), guaranteed 256/128/128 gpus:
 * vision asks for less than its guarantee, nlp and speech for more.
 * Per team: mean and p95 wait, and the share of the gpus it held while it
 * had a job waiting, against its guarantee.
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
#include "sched/fairshare.h"
#include "sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NDEV 512
#define NTEAM 3
#define FS_HALF_LIFE (12 * 3600.0) /* fair share's half-life in the replay */
#define FS_EVERY 60.0              /* the usage read again (the server: h/16, at most 60 s) */

static const char *const TEAMS[NTEAM] = { "vision", "nlp", "speech" };
static const struct sched_team_limit ROWS[NTEAM] = {
	{ "vision", "gpu", 256, 0 }, { "nlp", "gpu", 128, 0 }, { "speech", "gpu", 128, 0 },
};

static int team_of(int i)
{
	int d = i % 10;
	return d < 4 ? 0 : d < 7 ? 1 : 2;
}

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
	static const char *const users[] = { "vision-user", "nlp-user", "speech-user" };
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
		t[i].user = users[team_of(i)];
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
	double team_mean[NTEAM], team_p95[NTEAM], team_share[NTEAM];
};

enum mode { FIFO, BACKFILL, FAIR };

/* p95 of v[0..n) (sorts v). */
static double p95(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(double), cmp_double);
	return v[(size_t)(0.95 * (double)(n - 1))];
}

/* Fair share: the table of the intervals so far (fairshare.h), every queued job's factor, the
 * queue sorted again; the table stays for the jobs that arrive until the next read. */
static struct fs_table *fs_refresh(const struct tjob *t, struct sched_job *jobs, const double *end,
				   int n, size_t *queue, size_t nq, const struct sched_dev *devs,
				   double now)
{
	struct fs_interval *iv = calloc((size_t)n + 1, sizeof(*iv));
	size_t ni = 0;
	if (!iv)
		exit(1);
	for (int k = 0; k < n; k++)
		if (jobs[k].state == SJ_RUNNING ||
		    (jobs[k].state == SJ_IDLE && end[k] > now - 20 * FS_HALF_LIFE))
			iv[ni++] = (struct fs_interval){ jobs[k].team, t[k].user, "gpu", t[k].count,
							 jobs[k].started, end[k] < now ? end[k] : now };
	struct fs_table *ft = fs_build(iv, ni, ROWS, NTEAM, devs, NDEV, now, FS_HALF_LIFE);
	for (size_t q = 0; q < nq; q++) {
		struct fs_factor f;
		fs_factor(ft, jobs[queue[q]].team, jobs[queue[q]].user, "gpu", &f);
		jobs[queue[q]].fairshare = f.factor;
	}
	free(iv);
	sched_sort(jobs, queue, nq);
	return ft;
}

/* A job that arrives: its factor from the table, into its place in the sorted queue. */
static void fs_arrive(struct sched_job *jobs, const struct fs_table *ft, size_t *queue, size_t *nq,
		      size_t k)
{
	struct fs_factor f;
	fs_factor(ft, jobs[k].team, jobs[k].user, "gpu", &f);
	jobs[k].fairshare = f.factor;
	size_t lo = 0, hi = *nq;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (sched_cmp(&jobs[queue[mid]], &jobs[k]) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(queue + lo + 1, queue + lo, (*nq - lo) * sizeof(*queue));
	queue[lo] = k;
	(*nq)++;
}

static void replay(const struct tjob *t, int n, enum mode mode, struct result *r)
{
	bool backfill = mode != FIFO;
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
					      t[i].count, NULL, SJ_IDLE, 0, backfill ? t[i].limit : 0,
					      TEAMS[team_of(i)], 0 };
	size_t nq = 0;
	int next = 0, done = 0, nrun = 0;
	double now = 0, busy = 0, dsum = 0, fs_next = 0;
	struct fs_table *ft = NULL;
	long dcalls = 0;
	/* per team: gpus held now, queued jobs now; held x time and time while it had work */
	int held[NTEAM] = { 0 }, waiting[NTEAM] = { 0 };
	double held_t[NTEAM] = { 0 }, work_t[NTEAM] = { 0 };
	while (done < n) {
		/* the next event: an arrival or an end (or, for fair share, the usage read again) */
		double tnext = next < n ? t[next].arrive : INFINITY;
		for (int k = 0; k < n && nrun; k++)
			if (jobs[k].state == SJ_RUNNING && end[k] < tnext)
				tnext = end[k];
		if (mode == FAIR && nq && fs_next < tnext)
			tnext = fs_next > now ? fs_next : now;
		for (int g = 0; g < NTEAM; g++)
			if (waiting[g]) {
				held_t[g] += held[g] * (tnext - now);
				work_t[g] += tnext - now;
			}
		now = tnext;
		for (int k = 0; k < n && nrun; k++)
			if (jobs[k].state == SJ_RUNNING && end[k] <= now) {
				jobs[k].state = SJ_IDLE;
				for (int i = 0; i < NDEV; i++)
					if (devs[i].owner == k)
						devs[i].owner = SCHED_FREE;
				held[team_of(k)] -= jobs[k].count;
				nrun--;
				done++;
			}
		while (next < n && t[next].arrive <= now) {
			jobs[next].state = SJ_QUEUED;
			waiting[team_of(next)]++;
			if (mode == FAIR && ft)
				fs_arrive(jobs, ft, queue, &nq, (size_t)next++);
			else
				queue[nq++] = (size_t)next++; /* arrival order is queue order (one priority) */
		}
		if (mode == FAIR && now >= fs_next) {
			fs_free(ft);
			ft = fs_refresh(t, jobs, end, n, queue, nq, devs, now);
			fs_next = now + FS_EVERY;
		}
		for (;;) {
			struct sched_in in = { jobs, (size_t)n, queue, nq, devs, NDEV, NULL, 0, now,
					       NULL, 0 };
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
			held[team_of((int)k)] += jobs[k].count;
			waiting[team_of((int)k)]--;
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
	double *tw = calloc((size_t)n, sizeof(double));
	if (!tw)
		exit(1);
	for (int g = 0; g < NTEAM; g++) {
		size_t m = 0;
		double ts = 0;
		for (int i = 0; i < n; i++)
			if (team_of(i) == g) {
				tw[m++] = wait[i];
				ts += wait[i];
			}
		r->team_mean[g] = m ? ts / (double)m : 0;
		r->team_p95[g] = p95(tw, m);
		r->team_share[g] = work_t[g] > 0 ? held_t[g] / work_t[g] / NDEV : 0;
	}
	free(tw);
	fs_free(ft);
	for (int i = 0; i < n; i++)
		sum += wait[i];
	r->util = busy / (NDEV * (now - t[0].arrive));
	r->mean_wait = sum / n;
	r->p95_wait = p95(wait, (size_t)n);
	r->decide_us = dsum / (double)dcalls * 1e6;
	free(jobs);
	free(end);
	free(wait);
	free(queue);
}

/*
 * One decision with every job of the trace waiting on a full machine; mean us over reps.
 * FAIR: the server's whole round (queue.c, server.c): each waiting job's factor looked
 * up in the table, the queue sorted, then the decision; *build_us: the table's read
 * again from n intervals (every few seconds, not each round).
 */
static double one_round(const struct tjob *t, int n, enum mode mode, int reps, double *build_us)
{
	bool backfill = mode != FIFO;
	struct sched_job *jobs = calloc((size_t)n + NDEV, sizeof(*jobs));
	size_t *queue = calloc((size_t)n, sizeof(size_t));
	struct sched_dev devs[NDEV];
	if (!jobs || !queue)
		exit(1);
	/* 64 running 8-gpu jobs with limits ending over the next hours */
	for (int r = 0; r < NDEV / 8; r++) {
		jobs[n + r] = (struct sched_job){ "run", "vision-user", "gpu", 100, false, 0, 8, NULL,
						  SJ_RUNNING, 0, 600.0 * (r + 1), "vision", 0 };
		for (int i = 0; i < 8; i++)
			devs[r * 8 + i] = (struct sched_dev){ "gpu", r * 8 + i, n + r };
	}
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct sched_job){ t[i].id, t[i].user, "gpu", 100, false, (double)i,
					      t[i].count, NULL, SJ_QUEUED, 0, backfill ? t[i].limit : 0,
					      TEAMS[team_of(i)], 0 };
		queue[i] = (size_t)i;
	}
	struct sched_in in = { jobs, (size_t)n + NDEV / 8, queue, (size_t)n, devs, NDEV, NULL, 0, 1,
			       NULL, 0 };
	struct fs_table *ft = NULL;
	if (mode == FAIR) {
		/* the usage: each job of the trace ran once, as it arrived */
		struct fs_interval *iv = calloc((size_t)n, sizeof(*iv));
		if (!iv)
			exit(1);
		double end = t[n - 1].arrive;
		for (int i = 0; i < n; i++)
			iv[i] = (struct fs_interval){ TEAMS[team_of(i)], t[i].user, "gpu", t[i].count,
						      t[i].arrive, t[i].arrive + t[i].runtime };
		double b0 = cpu_s();
		for (int r = 0; r < 20; r++)
			fs_free(fs_build(iv, (size_t)n, ROWS, NTEAM, devs, NDEV, end, FS_HALF_LIFE));
		*build_us = (cpu_s() - b0) / 20 * 1e6;
		ft = fs_build(iv, (size_t)n, ROWS, NTEAM, devs, NDEV, end, FS_HALF_LIFE);
		free(iv);
	}
	double t0 = cpu_s();
	for (int r = 0; r < reps; r++) {
		struct sched_decision d;
		if (ft) {
			for (int i = 0; i < n; i++) {
				struct fs_factor f;
				fs_factor(ft, jobs[i].team, jobs[i].user, "gpu", &f);
				jobs[i].fairshare = f.factor;
			}
			sched_sort(jobs, queue, (size_t)n);
		}
		sched_decide(&in, &d);
		if (d.action != SCHED_NONE)
			exit(2); /* nothing is free: nothing may start */
		sched_decision_release(&d);
	}
	double us = (cpu_s() - t0) / reps * 1e6;
	fs_free(ft);
	free(jobs);
	free(queue);
	return us;
}

static void print_mode(const char *name, const struct result *r)
{
	printf("%-13s utilisation %5.1f%%  mean wait %8.0f s  p95 wait %8.0f s  decide %7.1f us\n",
	       name, r->util * 100, r->mean_wait, r->p95_wait, r->decide_us);
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
	struct result fifo, bf, fs;
	replay(t, n, FIFO, &fifo);
	replay(t, n, BACKFILL, &bf);
	replay(t, n, FAIR, &fs);
	printf("trace: %d jobs, offered load %.2f of %d gpus, seed 1234\n", n, load, NDEV);
	print_mode("fifo", &fifo);
	print_mode("backfill", &bf);
	print_mode("fair+backfill", &fs);
	printf("utilisation +%.1f points (backfill), +%.1f (fair share + backfill) over fifo;"
	       " mean wait ratio fifo/backfill %.2fx\n", (bf.util - fifo.util) * 100,
	       (fs.util - fifo.util) * 100, fifo.mean_wait / bf.mean_wait);
	printf("per team (fair share half-life %.0f h): mean wait / p95 wait / gpus held while it had"
	       " work, against its guarantee\n", FS_HALF_LIFE / 3600);
	const struct result *modes[] = { &fifo, &bf, &fs };
	const char *names[] = { "fifo", "backfill", "fair+backfill" };
	for (int g = 0; g < NTEAM; g++) {
		double guar = ROWS[g].guarantee / (double)NDEV;
		printf("  %-7s guarantee %4.1f%%", TEAMS[g], guar * 100);
		for (int m = 0; m < 3; m++)
			printf("  | %s %6.0f / %6.0f s, %4.1f%% (%+.0f%%)", names[m], modes[m]->team_mean[g],
			       modes[m]->team_p95[g], modes[m]->team_share[g] * 100,
			       (modes[m]->team_share[g] / guar - 1) * 100);
		printf("\n");
	}
	double build = 0;
	double f1 = one_round(t, n, FIFO, 200, &build), b1 = one_round(t, n, BACKFILL, 200, &build);
	double s1 = one_round(t, n, FAIR, 50, &build);
	printf("one sched_decide, %d waiting, machine full: fifo %.1f us  backfill %.1f us  ratio %.1fx\n",
	       n, f1, b1, b1 / f1);
	printf("one fair-share round, %d waiting (factors looked up, queue sorted, decide): %.1f us;"
	       " the usage table from %d intervals: %.1f us\n", n, s1, n, build);
	free(t);
	return 0;
}
