/* test_metrics_summary.c -- the job summary read from the rows kept at
 * ingestion (store_metrics.c, note 4) is the summary read from every point:
 * the same job is summarised both ways (the second after its summary rows
 * are deleted, which makes the reader fall back to the points) and every
 * field compared, over kinds, text values, NaN and infinities, equal
 * minima, several batches, warm-up and batch-size settings, and a second
 * batch writing to the same series (a supervisor started again). */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/query.h"
#include "store/store.h"

#include <math.h>
#include <sqlite3.h>

static struct store *open_job(const char *job, const char *spec_json)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = (char *)job, .name = "t", .state = JOB_RUNNING,
			       .run_dir = "/tmp", .spec_json = (char *)spec_json,
			       .created = 1700000000.0, .started = 1700000000.0, .world_size = 3 };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	return st;
}

static void put(struct store_mbatch *b, int rank, const char *metric, int kind, long long seq,
		const char *step, double v, const char *text, double t)
{
	struct store_mpoint p = { kind, seq, -1, seq, step, text ? NAN : v, text, t };
	store_mbatch_point(b, rank, metric, &p);
}

/*
 * Steps first..first+n-1 of rank 0 (ips, loss, per_step_time, text), rank 1
 * (per_step_time only) and rank 2 (loss only: throughput from step times),
 * written every `every` steps.
 */
static void feed(struct store *st, struct store_mbatch *b, long long first, int n, int every)
{
	struct tc_err err = TC_ERR_INIT;
	for (int i = 0; i < n; i++) {
		long long seq = first + i;
		char step[32];
		snprintf(step, sizeof(step), "[0, %lld]", seq);
		double t = 1000.0 + (double)seq * 0.5;
		double ips = i % 13 == 5 ? NAN : i == 17 ? INFINITY : 100.0 + (i % 7);
		put(b, 0, "train.ips", STORE_MPOINT, seq, step, ips, NULL, t);
		/* equal minima: the first keeps its step */
		put(b, 0, "train.loss", STORE_MPOINT, seq, step, i < 40 ? 10.0 - i * 0.2 : 2.0, NULL,
		    t + 0.1);
		put(b, 0, "per_step_time", STORE_MPOINT, seq, step, i % 11 == 0 ? 0.0 : 250.0 + i,
		    NULL, t + 0.2);
		if (i % 7 == 3)
			put(b, 0, "note", STORE_MPOINT, seq, step, 0, "text value", t);
		if (i % 10 == 9) {
			put(b, 0, "val.acc", STORE_MEPOCH, seq, "[1]", 0.5 + i * 0.001, NULL, t);
			put(b, 1, "val.acc", STORE_MEPOCH, seq, "[1]", 0.4 + i * 0.001, NULL, t);
			/* a metric with two kinds: epoch records, then a later text one */
			put(b, 0, "mixed", STORE_MEPOCH, seq, "[1]", -i, NULL, t);
		}
		put(b, 1, "per_step_time", STORE_MPOINT, seq, step, i % 9 == 4 ? -1.0 : 300.0 + i % 5,
		    NULL, t);
		/* two records of one step on rank 2: the step ends with the later */
		put(b, 2, "train.loss", STORE_MPOINT, seq, step, 5.0 / (i + 1), NULL, t + 0.01 * (i % 3));
		put(b, 2, "lr", STORE_MPOINT, seq, step, 0.1, NULL, t + 0.3);
		if ((i + 1) % every == 0)
			CHECK_INT(store_mbatch_write(st, b, &err), 0);
	}
	put(b, 0, "mixed", STORE_MPOINT, first + n, "[9]", 0, "done", 2000);
	put(b, 0, "final", STORE_MSUMMARY, first + n, "[]", 42.0, NULL, 2000);
	store_mbatch_counters(b, 0, n, n * 4, 1, "bad line");
	store_mbatch_counters(b, 2, n, n * 2, 0, NULL);
	store_mbatch_meta(b, "train.ips", "unit", "samples/s");
	store_mbatch_meta(b, "val.acc", "GOAL", "MAXIMIZE");
	store_mbatch_param(b, 0, "lr", "0.1");
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
}

static bool same_num(double a, double b, double rel)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	if (a == b)
		return true;
	return fabs(a - b) <= rel * fmax(fabs(a), fabs(b));
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

#define CHECK_NUM(a, b, rel)                                                               \
	do {                                                                               \
		if (!same_num((a), (b), (rel))) {                                          \
			fprintf(stderr, "%s:%d: %s: %.17g from the rows, %.17g from the points\n", \
				__FILE__, __LINE__, #a, (double)(a), (double)(b));          \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static void drop_rows(void)
{
	struct sbuf path = SBUF_INIT;
	sbuf_addf(&path, "%s/trainctl.db", test_tmpdir());
	sqlite3 *db = NULL;
	CHECK_INT(sqlite3_open(path.buf, &db), SQLITE_OK);
	CHECK_INT(sqlite3_exec(db, "DELETE FROM metric_summary; DELETE FROM metric_rank_steps", NULL,
			       NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	sbuf_release(&path);
}

/* Do the job's rows count every stored point, and do its ranks' seqs never go back? */
static void rows_hold(struct store *st, const char *job, bool want, bool ordered)
{
	struct tc_err err = TC_ERR_INIT;
	struct store_msum *v = NULL;
	struct store_msteps *sv = NULL;
	size_t nv = 0, nsv = 0;
	CHECK_INT(store_metric_summaries(st, job, &v, &nv, &err), 0);
	bool hold = nv > 0;
	for (size_t i = 0; i < nv; i++)
		hold &= v[i].k[0].points + v[i].k[1].points + v[i].k[2].points == v[i].stored;
	CHECK_INT(hold, want);
	CHECK_INT(store_metric_steps(st, job, &sv, &nsv, &err), 0);
	CHECK_INT(nsv, 3);
	for (size_t i = 0; i < nsv; i++)
		CHECK_INT(sv[i].ordered, ordered);
	store_msum_free(v, nv);
	free(sv);
}

/* Summarise job both ways and compare every field. */
static void compare_both_ways(struct store *st, const char *job)
{
	struct tc_err err = TC_ERR_INIT;
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, job, &j, &err), 0);
	struct metrics_job_summary a, b;
	CHECK_INT(metrics_job_summary(st, &j, &a, &err), 0);
	drop_rows();
	CHECK_INT(metrics_job_summary(st, &j, &b, &err), 0);
	CHECK_INT(a.nmetrics, b.nmetrics);
	CHECK(a.nmetrics > 5);
	for (size_t i = 0; i < a.nmetrics; i++) {
		const struct metrics_metric_sum *x = &a.metrics[i], *y = &b.metrics[i];
		CHECK_STR(x->name, y->name);
		CHECK_INT(x->rank, y->rank);
		CHECK_STR(x->kind, y->kind);
		CHECK_INT(x->goal, y->goal);
		CHECK_INT(x->n, y->n);
		CHECK_NUM(x->last, y->last, 0);
		CHECK_NUM(x->best, y->best, 0);
		CHECK_NUM(x->min, y->min, 0);
		CHECK_NUM(x->max, y->max, 0);
		CHECK_NUM(x->mean, y->mean, 1e-12);
		CHECK(same_str(x->last_step, y->last_step));
		CHECK(same_str(x->best_step, y->best_step));
		CHECK(same_str(x->unit, y->unit));
		CHECK(same_str(x->text, y->text));
	}
	CHECK_INT(a.nranks, b.nranks);
	for (size_t i = 0; i < a.nranks; i++) {
		const struct metrics_rank_sum *x = &a.ranks[i], *y = &b.ranks[i];
		CHECK_INT(x->rank, y->rank);
		CHECK_NUM(x->throughput, y->throughput, 1e-12);
		CHECK(same_str(x->method, y->method));
		CHECK(same_str(x->source, y->source));
		CHECK_INT(x->lines, y->lines);
		CHECK_INT(x->malformed, y->malformed);
		CHECK(same_str(x->last_error, y->last_error));
	}
	CHECK_NUM(a.throughput, b.throughput, 1e-12);
	CHECK_NUM(a.accuracy, b.accuracy, 0);
	CHECK_INT(a.malformed, b.malformed);
	CHECK_INT(a.nparams, b.nparams);
	metrics_job_summary_release(&a);
	metrics_job_summary_release(&b);
	job_row_release(&j);
}

TEST(rows_match_points_no_settings)
{
	struct store *st = open_job("S1", "{}");
	struct store_mbatch *b = store_mbatch_new("S1");
	feed(st, b, 1, 200, 37);
	store_mbatch_free(b);
	rows_hold(st, "S1", true, true);
	compare_both_ways(st, "S1");
	store_close(st);
}

TEST(rows_match_points_warmup_and_batch)
{
	struct store *st = open_job("S2", "{\"metrics\": {\"warmup_steps\": 7, \"batch_size\": 32,"
					  " \"accuracy\": \"val.acc\"}}");
	struct store_mbatch *b = store_mbatch_new("S2");
	feed(st, b, 1, 150, 16);
	store_mbatch_free(b);
	rows_hold(st, "S2", true, true);
	compare_both_ways(st, "S2");
	store_close(st);
}

TEST(rows_match_points_warmup_past_the_end)
{
	struct store *st = open_job("S3", "{\"metrics\": {\"warmup_steps\": 500, \"batch_size\": 8}}");
	struct store_mbatch *b = store_mbatch_new("S3");
	feed(st, b, 1, 60, 1000);
	store_mbatch_free(b);
	compare_both_ways(st, "S3");
	store_close(st);
}

TEST(rows_match_points_after_a_second_batch)
{
	/* a supervisor started again for the same job: its seq counts start again */
	struct store *st = open_job("S4", "{\"metrics\": {\"warmup_steps\": 2, \"batch_size\": 4,"
					  " \"accuracy\": \"mixed\"}}");
	struct store_mbatch *b = store_mbatch_new("S4");
	feed(st, b, 1, 80, 25);
	store_mbatch_free(b);
	b = store_mbatch_new("S4");
	feed(st, b, 1, 50, 20);
	store_mbatch_free(b);
	rows_hold(st, "S4", true, false);
	compare_both_ways(st, "S4");
	store_close(st);
}

TEST(rows_are_checked_against_the_chunks)
{
	/* points a batch dropped are counted by its summary but never stored */
	struct store *st = open_job("S5", "{\"metrics\": {\"batch_size\": 4}}");
	struct tc_err err = TC_ERR_INIT;
	struct store_mbatch *b = store_mbatch_new("S5");
	feed(st, b, 1, 30, 10);
	put(b, 0, "train.ips", STORE_MPOINT, 99, "[0, 99]", 1e9, NULL, 3000);
	store_mbatch_drop(b);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	put(b, 0, "train.loss", STORE_MPOINT, 100, "[0, 100]", -5, NULL, 3001);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	rows_hold(st, "S5", true, true); /* the dropped point's series was not written again */
	put(b, 0, "train.ips", STORE_MPOINT, 101, "[0, 101]", 7, NULL, 3002);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	store_mbatch_free(b);
	rows_hold(st, "S5", false, true);
	compare_both_ways(st, "S5");
	store_close(st);
}

TEST(summary_reads_the_rows)
{
	/* a value changed in the rows shows: the summary did not read the points */
	struct store *st = open_job("S6", "{}");
	struct tc_err err = TC_ERR_INIT;
	struct store_mbatch *b = store_mbatch_new("S6");
	feed(st, b, 1, 20, 5);
	store_mbatch_free(b);
	struct sbuf path = SBUF_INIT;
	sbuf_addf(&path, "%s/trainctl.db", test_tmpdir());
	sqlite3 *db = NULL;
	CHECK_INT(sqlite3_open(path.buf, &db), SQLITE_OK);
	CHECK_INT(sqlite3_exec(db, "UPDATE metric_summary SET max = 12345, max_step = 'x' WHERE"
			       " series_id = (SELECT id FROM metric_series WHERE metric = 'val.acc'"
			       " AND rank = 0)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	sbuf_release(&path);
	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "S6", &j, &err), 0);
	struct metrics_job_summary a;
	CHECK_INT(metrics_job_summary(st, &j, &a, &err), 0);
	bool seen = false;
	for (size_t i = 0; i < a.nmetrics; i++)
		if (!strcmp(a.metrics[i].name, "val.acc") && a.metrics[i].rank == 0) {
			CHECK(a.metrics[i].best == 12345); /* GOAL MAXIMIZE */
			CHECK_STR(a.metrics[i].best_step, "x");
			seen = true;
		}
	CHECK(seen);
	metrics_job_summary_release(&a);
	job_row_release(&j);
	store_close(st);
}
