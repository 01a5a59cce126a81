/* test_source.c -- the run folder's names (jobs/runpath.h) and the job source's wire forms (source/source.h) */
#include "test.h"

#include "jobs/runpath.h"
#include "source/source.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TEST(run_paths_are_spelled_once)
{
	struct sbuf p = SBUF_INIT;
	run_path(&p, "/s", "J1", RUN_DIR, 0);
	CHECK_STR(p.buf, "/s/runs/J1");
	sbuf_reset(&p);
	run_path(&p, "/s", "J1", RUN_RANK_LOG, 3);
	CHECK_STR(p.buf, "/s/runs/J1/logs/rank-3.log");
	sbuf_reset(&p);
	run_path(&p, "/r", NULL, RUN_SPEC, 0);
	CHECK_STR(p.buf, "/r/job.yaml");
	sbuf_reset(&p);
	run_path(&p, "/r", NULL, RUN_SUPERVISOR_LOG, 0);
	CHECK_STR(p.buf, "/r/logs/supervisor.log");
	sbuf_reset(&p);
	run_leaf(&p, RUN_RANK_TIMES, 12);
	CHECK_STR(p.buf, "rank-12.times");
	sbuf_reset(&p);
	run_runs(&p, "/s");
	CHECK_STR(p.buf, "/s/runs");
	sbuf_release(&p);
	int r = -1;
	CHECK(run_is_rank_log("rank-7.log", &r) && r == 7);
	CHECK(!run_is_rank_log("rank-x.log", &r));
	CHECK(!run_is_rank_log("rank-7.times", &r));
	CHECK(!run_is_rank_log("supervisor.log", &r));
}

TEST(run_names_relative_to_the_run_folder)
{
	static const struct {
		enum run_what what;
		int rank;
		const char *rel;
	} cases[] = {
		{ RUN_RANK_LOG, 2, "logs/rank-2.log" },
		{ RUN_SUPERVISOR_LOG, 0, "logs/supervisor.log" },
		{ RUN_RANK_ERROR, 4, "logs/error-rank-4.json" },
		{ RUN_CONTAINER_ENV, 5, "container-rank-5.env" },
		{ RUN_DIR, 0, "" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sbuf p = SBUF_INIT, full = SBUF_INIT, want = SBUF_INIT;
		run_rel(&p, cases[i].what, cases[i].rank);
		CHECK_STR(p.buf, cases[i].rel);
		/* run_path is the run folder, a slash, and run_rel */
		run_path(&full, "/r", NULL, cases[i].what, cases[i].rank);
		sbuf_addf(&want, cases[i].what == RUN_DIR ? "/r" : "/r/%s", cases[i].rel);
		CHECK_STR(full.buf, want.buf);
		sbuf_release(&want);
		sbuf_release(&full);
		sbuf_release(&p);
	}
}

TEST(series_survive_the_wire)
{
	struct store_mpoint pts[] = {
		{ 0, 1, 0, 1, "1", 0.05, NULL, 1700000000.125 },
		{ 0, 2, -1, -1, "[0, 2]", NAN, NULL, 1700000001.5 },
		{ 1, 3, 1, -1, "ep 1", INFINITY, NULL, 2 },
		{ 2, 4, -1, -1, "x\"y", NAN, "warm \"up\"", 3 },
		{ 0, 5, -1, -1, "5", -INFINITY, NULL, 4 },
	};
	struct store_mseries in = { "train.loss", 2, 5, pts, NULL, 0 };
	struct sbuf text = SBUF_INIT;
	source_series_json(&in, 1, &text);
	struct store_mseries *out = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(source_series_parse(text.buf, text.len, &out, &n, &err), 0);
	CHECK_INT((long long)n, 1);
	CHECK_STR(out[0].metric, "train.loss");
	CHECK_INT(out[0].rank, 2);
	CHECK_INT((long long)out[0].n, 5);
	for (size_t i = 0; i < 5; i++) {
		const struct store_mpoint *a = &pts[i], *b = &out[0].v[i];
		CHECK_INT(b->kind, a->kind);
		CHECK_INT(b->seq, a->seq);
		CHECK_INT(b->epoch, a->epoch);
		CHECK_INT(b->iter, a->iter);
		CHECK_STR(b->step, a->step);
		CHECK(isnan(a->value) ? isnan(b->value) : b->value == a->value);
		CHECK((a->text == NULL) == (b->text == NULL));
		if (a->text)
			CHECK_STR(b->text, a->text);
		CHECK(b->wall_time == a->wall_time);
	}
	store_mseries_free(out, n);
	CHECK(source_series_parse("{}", 2, &out, &n, &err) == TC_EBACKEND);
	tc_err_release(&err);
	sbuf_release(&text);
}

TEST(checkpoints_survive_the_wire)
{
	struct store_ckpt in = { "step_10", "/r/ckpt", 10, -1, 1, 3, 4096, "abcd0123", NULL, 17.5,
				 "complete" };
	struct sbuf text = SBUF_INIT;
	source_ckpt_json(&in, 1, &text);
	struct store_ckpt *out = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(source_ckpt_parse(text.buf, text.len, &out, &n, &err), 0);
	CHECK_INT((long long)n, 1);
	CHECK_STR(out[0].name, "step_10");
	CHECK_STR(out[0].dir, "/r/ckpt");
	CHECK_INT(out[0].step, 10);
	CHECK_INT(out[0].epoch, -1);
	CHECK_INT(out[0].layout, 1);
	CHECK_INT(out[0].nfiles, 3);
	CHECK_INT(out[0].bytes, 4096);
	CHECK_STR(out[0].checksum, "abcd0123");
	CHECK_STR(out[0].state, "complete");
	CHECK(out[0].created == 17.5);
	store_ckpt_free(out, n);
	sbuf_release(&text);
	tc_err_release(&err);
}

/* A chart's points as a sink collects them: "r<rank>" per rank, then "x:y" per point. */
static void xy_begin(void *arg, int rank)
{
	sbuf_addf(arg, "|r%d", rank);
}

static void xy_add(void *arg, double x, double y)
{
	sbuf_addf(arg, " %g:%g", x, y);
}

static struct store *store_with_series(const char *job)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = (char *)job, .name = "t", .state = JOB_RUNNING,
			       .run_dir = "/tmp", .spec_json = "{}", .created = 1700000000.0,
			       .world_size = 2 };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	struct store_mbatch *b = store_mbatch_new(job);
	struct store_mpoint pts[] = {
		{ STORE_MPOINT, 1, -1, 10, "10", 0.5, NULL, 1 },
		{ STORE_MPOINT, 2, -1, 20, "20", NAN, NULL, 2 },
		{ STORE_MEPOCH, 3, 1, -1, "ep 1", 0.4, NULL, 3 },
		{ STORE_MPOINT, 4, 0, 5, "[0, 5]", 0.3, NULL, 4 },
		{ STORE_MPOINT, 5, -1, 30, "30", 0.2, NULL, 5 },
		{ STORE_MPOINT, 6, -1, 40, "40", 0.1, NULL, 6 },
	};
	for (int rank = 0; rank < 2; rank++)
		for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++)
			store_mbatch_point(b, rank, "loss", &pts[i]);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	store_mbatch_free(b);
	tc_err_release(&err);
	return st;
}

/* The remote source's chart read (series over the wire, filtered) agrees with the store's. */
TEST(chart_points_agree_both_roads)
{
	struct store *st = store_with_series("S1");
	struct job_source *src = source_local_wrap(st);
	struct tc_err err = TC_ERR_INIT;
	struct sbuf local = SBUF_INIT, wire = SBUF_INIT, remote = SBUF_INIT;
	struct store_xy_sink a = { xy_begin, xy_add, &local }, b = { xy_begin, xy_add, &remote };
	CHECK_INT(src->ops->metric_xy(src, "S1", "loss", -1, 4, 35, &a, &err), 0);
	CHECK_STR(local.buf, "|r0 10:0.5 4:0.3 30:0.2|r1 10:0.5 4:0.3 30:0.2");
	struct store_mseries *v = NULL;
	size_t n = 0;
	CHECK_INT(src->ops->metric_series(src, "S1", "loss", -1, &v, &n, &err), 0);
	source_series_json(v, n, &wire);
	store_mseries_free(v, n);
	CHECK_INT(source_series_parse(wire.buf, wire.len, &v, &n, &err), 0);
	source_series_xy(v, n, 4, 35, &b);
	store_mseries_free(v, n);
	CHECK_STR(remote.buf, local.buf);
	sbuf_release(&local);
	sbuf_release(&wire);
	sbuf_release(&remote);
	source_close(src);
	store_close(st);
	tc_err_release(&err);
}

static int count_points(void *arg, const struct store_mpoint *p)
{
	(void)p;
	return ++*(int *)arg == 3 ? 7 : 0; /* stop at the third */
}

TEST(local_source_walks_and_lists_endpoints)
{
	struct store *st = store_with_series("S2");
	struct job_source *src = source_local_wrap(st);
	struct tc_err err = TC_ERR_INIT;
	int seen = 0;
	CHECK_INT(src->ops->metric_walk(src, "S2", "loss", 1, count_points, &seen, &err), 7);
	CHECK_INT(seen, 3);
	json_t *o = NULL;
	CHECK_INT(src->ops->endpoints(src, "S2", &o, &err), 0);
	CHECK_STR(json_string_value(json_object_get(o, "job")), "S2");
	CHECK(json_is_array(json_object_get(o, "endpoints")));
	CHECK_INT((long long)json_array_size(json_object_get(o, "endpoints")), 0);
	json_decref(o);
	CHECK_INT(src->ops->endpoints(src, "no-such-job", &o, &err), TC_ENOTFOUND);
	tc_err_release(&err);
	source_close(src);
	store_close(st);
}
