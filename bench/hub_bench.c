/*
 * hub_bench.c -- the hub's event channel (hub/hub.h) under load; driven by
 * bench/hub_bench.py, which starts the processes below and prints the
 * table of docs/PERFORMANCE.md.
 *
 *   hub_bench hub HOME JOB
 *       a hub on 127.0.0.1 (any port) for JOB in HOME's store; prints
 *       "port N", serves until stdin closes, then prints "cpu SECONDS".
 *   hub_bench direct HOME JOB POINTS
 *       the alternative: POINTS metric points written by this process into
 *       the store itself (store_mbatch_write, batches of 65,536: the
 *       supervisor's own path); prints "points N seconds S cpu C".
 *   hub_bench send URL HOME JOB STREAM POINTS
 *       POINTS points through a remote sink as fast as it takes them
 *       (batches of 65,536 points); the time runs until the hub acknowledged
 *       the last one; prints "points N seconds S cpu C".
 *   hub_bench gen RANKS PERIOD_MS SECONDS
 *       the ranks of one node: each prints a DLLogger step line (two
 *       points) every PERIOD_MS, as "RANK<TAB>LINE" on stdout.
 *   hub_bench ranks URL HOME JOB STREAM
 *       one node's supervisor, as far as metrics go: gen's lines from stdin,
 *       parsed by metrics_ingest (the supervisor's path) and sent through a
 *       remote sink; prints "lines N cpu C lag_avg_ms A lag_max_ms M" (lag:
 *       a batch's append to its acknowledgement).  URL "direct": into
 *       HOME's store instead (the alternative).
 *
 * Build (after `make build`):
 *   cc -O2 -std=c17 -D_GNU_SOURCE -Isrc bench/hub_bench.c build/libtc.a \
 *      $(pkg-config --libs jansson sqlite3 yaml-0.1) -ldl -lm -lpthread -o build/hub_bench
 */
#include "core/sbuf.h"
#include "core/util.h"
#include "hub/hub.h"
#include "metrics/ingest.h"
#include "store/store.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#define SECRET "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define BATCH 65536

static double cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const struct tc_err *err)
{
	fprintf(stderr, "hub_bench: %s: %s\n", what, err && err->msg ? err->msg : "failed");
	exit(1);
}

/* The job's row and its hub row (secret SECRET). */
static void make_job(const char *home, const char *job)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (store_open(home, &st, &err))
		die("store", &err);
	struct job_row j = { .id = (char *)job, .name = "bench", .state = JOB_RUNNING,
			     .run_dir = "/tmp", .spec_json = "{}", .created = now_wall(),
			     .world_size = 8 };
	struct job_row old = { 0 };
	if (store_job_get(st, job, &old, &err) != 0) {
		tc_err_release(&err);
		if (store_job_create(st, &j, &err))
			die("job", &err);
	}
	job_row_release(&old);
	struct sbuf sha = SBUF_INIT;
	hub_secret_hash(SECRET, &sha);
	if (store_hub_job_set(st, job, sha.buf, NULL, &err))
		die("hub row", &err);
	sbuf_release(&sha);
	store_close(st);
}

static void fill(struct store_mbatch *b, long from, long n)
{
	char step[32];
	for (long i = from; i < from + n; i++) {
		snprintf(step, sizeof(step), "%ld", i / 8);
		struct store_mpoint p = { .kind = STORE_MPOINT, .seq = i / 8, .epoch = -1,
					  .iter = i / 8, .step = step, .value = (double)i * 0.001,
					  .wall_time = 1700000000.0 + (double)i };
		store_mbatch_point(b, (int)(i % 8), (i & 1) ? "train.loss" : "train.ips", &p);
	}
}

static int hub_main(const char *home, const char *job)
{
	make_job(home, job);
	struct hub *h = NULL;
	struct hub_daemon *d = NULL;
	struct tc_err err = TC_ERR_INIT;
	int port = 0;
	if (hub_new(home, &h, &err) || hub_daemon_start(h, "127.0.0.1", 0, &d, &port, &err))
		die("hub", &err);
	printf("port %d\n", port);
	fflush(stdout);
	char buf[64];
	while (fgets(buf, sizeof(buf), stdin))
		;
	hub_daemon_stop(d);
	hub_free(h);
	printf("cpu %.3f\n", cpu_self());
	return 0;
}

static int direct_main(const char *home, const char *job, long points)
{
	make_job(home, job);
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (store_open(home, &st, &err))
		die("store", &err);
	struct store_mbatch *b = store_mbatch_new(job);
	double t0 = mono(), c0 = cpu_self();
	for (long i = 0; i < points; i += BATCH) {
		fill(b, i, points - i < BATCH ? points - i : BATCH);
		if (store_mbatch_write(st, b, &err))
			die("write", &err);
	}
	printf("points %ld seconds %.3f cpu %.3f\n", points, mono() - t0, cpu_self() - c0);
	store_mbatch_free(b);
	store_close(st);
	return 0;
}

static struct sink *open_sink(const char *url, const char *home, const char *job,
			      const char *stream)
{
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/journal/%s", home, job);
	struct hub_remote_opts o = { .url = url, .secret = SECRET, .job_id = job, .stream = stream,
				     .journal_dir = dir.buf, .wait_s = 600 };
	struct sink *k = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (sink_remote_open(&o, &k, &err))
		die("sink", &err);
	sbuf_release(&dir);
	return k;
}

static int send_main(const char *url, const char *home, const char *job, const char *stream,
		     long points)
{
	struct sink *k = open_sink(url, home, job, stream);
	struct store_mbatch *b = store_mbatch_new(job);
	struct tc_err err = TC_ERR_INIT;
	double t0 = mono(), c0 = cpu_self();
	for (long i = 0; i < points; i += BATCH) {
		fill(b, i, points - i < BATCH ? points - i : BATCH);
		if (sink_metrics(k, b, &err) || sink_commit(k, 0, &err))
			die("send", &err);
	}
	sink_close(k); /* returns once the hub acknowledged the last batch */
	printf("points %ld seconds %.3f cpu %.3f\n", points, mono() - t0, cpu_self() - c0);
	store_mbatch_free(b);
	return 0;
}

static int write_cb(void *ctx, struct store_mbatch *b, struct tc_err *err)
{
	return sink_metrics(ctx, b, err);
}

/* The simulated ranks: "R<TAB>line" on stdout, RANKS lines every PERIOD_MS. */
static int gen_main(int ranks, double period_ms, int seconds)
{
	struct sbuf out = SBUF_INIT;
	double t0 = mono(), next = t0;
	long step = 0;
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	while (mono() - t0 < seconds) {
		while (mono() >= next) {
			sbuf_reset(&out);
			for (int r = 0; r < ranks; r++)
				sbuf_addf(&out, "%d\tDLLL {\"timestamp\": \"%.3f\", \"type\": \"LOG\", \"step\": "
					  "[0, %ld], \"data\": {\"train.loss\": %.4f, \"train.ips\": 512.5}}\n",
					  r, now_wall(), step, 1.0 / (double)(step + 1));
			if (fwrite(out.buf, 1, out.len, stdout) != out.len)
				return 1;
			fflush(stdout);
			step++;
			next += period_ms / 1000.0;
		}
		double left = next - mono();
		if (left > 0)
			usleep((useconds_t)(left * 1e6));
	}
	sbuf_release(&out);
	return 0;
}

/*
 * One node's supervisor, as far as metrics go: read the ranks' lines from
 * stdin (gen_main's), parse them with metrics_ingest and send the batches
 * through a remote sink (or write them to HOME's store: url "direct").
 */
static int ranks_main(const char *url, const char *home, const char *job, const char *stream)
{
	bool direct = !strcmp(url, "direct");
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	if (direct) {
		make_job(home, job);
		if (store_open(home, &st, &err))
			die("store", &err);
	}
	struct sink *k = direct ? sink_direct(st) : open_sink(url, home, job, stream);
	struct metrics_ingest_opts mo = { .job_id = job, .nranks = 8, .world = 8,
					  .write = write_cb, .write_ctx = k };
	struct metrics_ingest *mi = metrics_ingest_new(&mo);
	struct sbuf in = SBUF_INIT;
	long lines = 0, batches = 0;
	double lag_sum = 0, lag_max = 0;
	double pending[4096]; /* append times of events not yet acknowledged, by seq */
	long long seen = 0, acked_seen = 0;
	double c0 = cpu_self();
	char buf[65536];
	int64_t rest_until = 0; /* as the supervisor's loop (workers.c, COALESCE_MS): reads rest 10 ms */
	for (bool eof = false; !eof;) {
		int wait = metrics_ingest_tick(mi, now_mono_ms());
		long long app = 0, ack = 0;
		if (!direct) {
			sink_remote_counts(k, &app, &ack);
			for (double now = mono(); seen < app; seen++)
				pending[seen % 4096] = now;
		}
		/* an acknowledgement is waited for in 2 ms steps: the lag's resolution */
		int cap = seen > acked_seen ? 2 : 50;
		int64_t now_ms = now_mono_ms();
		int nfds = 1;
		if (rest_until > now_ms) {
			nfds = 0;
			if (rest_until - now_ms < cap)
				cap = (int)(rest_until - now_ms);
		}
		struct pollfd pf = { 0, POLLIN, 0 };
		int pr = poll(&pf, (nfds_t)nfds, wait < cap ? wait : cap);
		if (pr > 0) {
			ssize_t n = read(0, buf, sizeof(buf));
			rest_until = n == (ssize_t)sizeof(buf) ? 0 : now_mono_ms() + 10;
			if (n <= 0) {
				eof = true;
			} else {
				sbuf_add(&in, buf, (size_t)n);
				char *nl, *p = in.buf;
				while ((nl = memchr(p, '\n', in.len - (size_t)(p - in.buf)))) {
					char *tab = memchr(p, '\t', (size_t)(nl - p));
					if (tab) {
						metrics_ingest_lines(mi, atoi(p), tab + 1, (size_t)(nl - tab));
						lines++;
					}
					p = nl + 1;
				}
				sbuf_remove_front(&in, (size_t)(p - in.buf));
			}
		}
		if (direct)
			continue;
		sink_remote_counts(k, &app, &ack);
		double now = mono();
		for (; acked_seen < ack && acked_seen < seen; acked_seen++) {
			double lag = now - pending[acked_seen % 4096];
			lag_sum += lag;
			if (lag > lag_max)
				lag_max = lag;
			batches++;
		}
	}
	metrics_ingest_finish(mi);
	metrics_ingest_free(mi);
	double cpu = cpu_self() - c0;
	sink_close(k);
	store_close(st);
	printf("lines %ld cpu %.3f lag_avg_ms %.1f lag_max_ms %.1f batches %ld\n", lines, cpu,
	       batches ? 1000 * lag_sum / (double)batches : 0, 1000 * lag_max, batches);
	sbuf_release(&in);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "hub"))
		return hub_main(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "direct"))
		return direct_main(argv[2], argv[3], atol(argv[4]));
	if (argc == 7 && !strcmp(argv[1], "send"))
		return send_main(argv[2], argv[3], argv[4], argv[5], atol(argv[6]));
	if (argc == 5 && !strcmp(argv[1], "gen"))
		return gen_main(atoi(argv[2]), atof(argv[3]), atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "ranks"))
		return ranks_main(argv[2], argv[3], argv[4], argv[5]);
	fprintf(stderr, "usage: see the head of bench/hub_bench.c\n");
	return 2;
}
