/*
 * metrics_parse.c -- how many DLLogger JSON lines per second one core parses
 * with metrics_parse_line() (the supervisor's hot path), next to a plain
 * jansson json_loadb() of the same lines as the yardstick.
 *
 * Build and run (after building the library, e.g. build-metrics):
 *   cmake --build build-metrics --target tc
 *   cc -O2 -std=c17 -D_GNU_SOURCE -Isrc bench/metrics_parse.c build-metrics/libtc.a \
 *      $(pkg-config --libs jansson) -lm -lpthread -o build-metrics/bench_metrics_parse
 *   ./build-metrics/bench_metrics_parse [lines]     (default 1000000)
 */
#include "core/sbuf.h"
#include "metrics/metrics.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
	if (n <= 0)
		n = 1000000;
	/* Lines as NVIDIA's JSONStreamBackend writes them, one per step. */
	struct sbuf all = SBUF_INIT;
	size_t *off = malloc((size_t)(n + 1) * sizeof(*off));
	if (!off)
		return 1;
	for (long i = 0; i < n; i++) {
		off[i] = all.len;
		double t = 1700000000.0 + (double)i * 0.05;
		sbuf_addf(&all,
			  "DLLL {\"timestamp\": \"%.6f\", \"datetime\": \"2023-11-14 "
			  "22:13:20.123456\", \"elapsedtime\": \"%.6f\", \"type\": \"LOG\", "
			  "\"step\": [%ld, %ld], \"data\": {\"train.loss\": %.6f, \"train.ips\": "
			  "%.3f, \"lr\": 0.1}}\n",
			  t, (double)i * 0.05, i / 1000, i % 1000, 2.3 / (1 + i * 1e-4),
			  500 + (double)(i % 17));
	}
	off[n] = all.len;

	struct metrics_parser *p = metrics_parser_new();
	const struct metric_rec *recs;
	size_t nrecs, total = 0;
	long bad = 0;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		if (metrics_parse_line(p, all.buf + off[i], off[i + 1] - off[i], &recs, &nrecs) !=
		    METRICS_PARSED)
			bad++;
		total += nrecs;
	}
	double dt = now() - t0;

	double t1 = now();
	for (long i = 0; i < n; i++) {
		json_error_t je;
		json_t *j = json_loadb(all.buf + off[i] + 5, off[i + 1] - off[i] - 5, 0, &je);
		if (!j)
			bad++;
		json_decref(j);
	}
	double dj = now() - t1;

	/* Non-metric log lines: the cost paid on every other line. */
	static const char plain[] = "INFO 2024-06-05 10:00:00 epoch 3 step 120: forward done, "
				    "memory 12.3 GiB, dataloader queue 4 {'a': 1}";
	double t2 = now();
	for (long i = 0; i < n; i++)
		if (metrics_parse_line(p, plain, sizeof(plain) - 1, &recs, &nrecs) != METRICS_NONE)
			bad++;
	double dn = now() - t2;

	printf("metrics_parse_line: %ld DLLL lines (%.1f MB) in %.3f s = %.0f lines/s, "
	       "%.1f MB/s, %zu records\n",
	       n, (double)all.len / 1e6, dt, (double)n / dt, (double)all.len / 1e6 / dt, total);
	printf("json_loadb alone:   %.3f s = %.0f lines/s (ratio parse/json_loadb %.2f)\n", dj,
	       (double)n / dj, dt / dj);
	printf("non-metric lines:   %.0f lines/s (%.0f MB/s)\n", (double)n / dn,
	       (double)n * (sizeof(plain) - 1) / 1e6 / dn);
	metrics_parser_free(p);
	sbuf_release(&all);
	free(off);
	return bad ? 1 : 0;
}
