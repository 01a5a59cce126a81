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
