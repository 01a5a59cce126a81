/* test_plan_io.c -- instance formats, validation, synth, eval (src/plan/). */
#include "test.h"

#include "core/sbuf.h"
#include "core/xalloc.h"
#include "plan/plan.h"
#include "plan/plan_int.h"

#include <math.h>
#include <stdint.h>

static int parse(const char *line, struct plan_instance *in, struct tc_err *err)
{
	return plan_instance_from_json(line, strlen(line), "t.jsonl:1: instance 0", in, err);
}

TEST(json_instance_round_trip)
{
	struct plan_instance in = { 0 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(parse("{\"x\":[1,0.5,2e-3],\"C\":[[0.25,1],[3,4]],\"num_split\":2,\"micro_batches\":4}", &in, &err), 0);
	CHECK_INT(in.g, 3);
	CHECK_INT(in.s, 2);
	CHECK_INT(in.micro_batches, 4);
	CHECK(in.x[2] == 2e-3 && in.c[1] == 1 && in.c[2] == 3);
	struct sbuf sb = SBUF_INIT;
	plan_instance_to_json(&in, &sb);
	struct plan_instance back = { 0 };
	CHECK_INT(parse(sb.buf, &back, &err), 0);
	CHECK(back.g == 3 && back.s == 2 && back.x[1] == 0.5 && back.c[3] == 4);
	plan_instance_release(&in);
	plan_instance_release(&back);
	plan_instance_release(NULL);
	sbuf_release(&sb);
}

/* The fast number path must read every number exactly as strtod does. */
TEST(json_numbers_exact)
{
	const char *fmts[] = { "%.17g", "%.6f", "%g", "%.3e", "%.15g", "%.0f" };
	uint64_t st = 12345;
	for (int rep = 0; rep < 2000; rep++) {
		struct sbuf line = SBUF_INIT, num = SBUF_INIT;
		double want[4];
		sbuf_adds(&line, "{\"num_split\":0,\"C\":[[],[],[]],\"x\":[");
		for (int i = 0; i < 4; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			double v = (double)(st >> 11) * 0x1.0p-53 * pow(10, (int)(st % 13) - 6);
			sbuf_reset(&num);
			sbuf_addf(&num, fmts[(rep + i) % 6], v);
			want[i] = strtod(num.buf, NULL);
			sbuf_addf(&line, "%s%s", i ? " , " : "", num.buf);
		}
		sbuf_adds(&line, "]}");
		struct plan_instance in = { 0 };
		struct tc_err err = TC_ERR_INIT;
		CHECK_INT(parse(line.buf, &in, &err), 0);
		for (int i = 0; i < 4; i++)
			CHECK(in.x[i] == want[i]);
		plan_instance_release(&in);
		sbuf_release(&line);
		sbuf_release(&num);
	}
}

static void expect_bad(const char *line, const char *needle)
{
	struct plan_instance in = { 0 };
	struct tc_err err = TC_ERR_INIT;
	int rc = parse(line, &in, &err);
	if (rc != TC_EINPUT || !err.msg || !strstr(err.msg, needle)) {
		fprintf(stderr, "line %s: rc %d msg %s (want '%s')\n", line, rc, err.msg, needle);
		exit(1);
	}
	CHECK_CONTAINS(err.msg, "instance 0");
	tc_err_release(&err);
}

TEST(json_instance_errors_name_the_field)
{
	expect_bad("{\"x\":[1,2],\"C\":[[1]],\"num_split\":2}", "'num_split'");
	expect_bad("{\"x\":[1,2,3],\"C\":[[1]],\"num_split\":1}", "field 'C'");
	expect_bad("{\"x\":[1,2,3],\"C\":[[1],[1,2]],\"num_split\":1}", "'C[1]'");
	expect_bad("{\"x\":[1,-2,3],\"C\":[[1],[1]],\"num_split\":1}", "'x[1]': negative");
	expect_bad("{\"x\":[1,2,3],\"C\":[[1],[-1]],\"num_split\":1}", "'C[1][0]': negative");
	expect_bad("{\"x\":[1,1e999,3],\"C\":[[1],[1]],\"num_split\":1}", "instance 0");
	expect_bad("{\"x\":[1,2],\"C\":[[1]],\"num_split\":1,\"graph_size\":3}", "graph_size");
	expect_bad("{\"x\":[1,2],\"C\":[[1]],\"num_split\":1,\"cuts\":3}", "unknown field 'cuts'");
	expect_bad("{\"x\":[1,2],\"C\":[[1]]}", "'num_split'");
	expect_bad("{\"x\":[1,2],\"C\":[[\"a\"]],\"num_split\":1}", "'C[0][0]'");
	expect_bad("{\"x\":[1,2],\"C\":[[1]],\"num_split\":1,\"micro_batches\":0}", "micro_batches");
	expect_bad("{\"x\":[1,2],\"C\":[[1]],\"num_split\":1", "not JSON");
}

TEST(csv_instance)
{
	struct plan_instance in = { 0 };
	struct tc_err err = TC_ERR_INIT;
	const char *csv = "# three layers, two cuts\nx,C0,C1\n1,0.5,9\n2,9,0.25\n3\n";
	CHECK_INT(plan_instance_from_csv(csv, "i.csv", &in, &err), 0);
	CHECK(in.g == 3 && in.s == 2 && in.x[2] == 3 && in.c[0] == 0.5 && in.c[3] == 0.25);
	plan_instance_release(&in);
	CHECK_INT(plan_instance_from_csv("x,C0\n1,2\n2,,\n", "i.csv", &in, &err), 0);
	CHECK(in.g == 2 && in.s == 1);
	plan_instance_release(&in);
	CHECK_INT(plan_instance_from_csv("x,C0\n1,2\n2,nan\n3\n", "i.csv", &in, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "C[1][0]");
	CHECK_INT(plan_instance_from_csv("x,C0\n1,abc\n2\n", "i.csv", &in, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "i.csv:2");
	CHECK_INT(plan_instance_from_csv("x,C0,C1,C2\n1,1,1,1\n2\n", "i.csv", &in, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "num_split");
	tc_err_release(&err);
}

TEST(synth_reproducible_and_shaped)
{
	struct plan_synth a, b;
	plan_synth_init(&a, 1234);
	plan_synth_init(&b, 1234);
	for (int i = 0; i < 50; i++) {
		struct plan_instance x, y;
		plan_synth_next(&a, 30, 15, &x);
		plan_synth_next(&b, 30, 15, &y);
		CHECK(x.g == 30 && x.s == 15);
		CHECK(!memcmp(x.x, y.x, 30 * sizeof(double)));
		CHECK(!memcmp(x.c, y.c, 29 * 15 * sizeof(double)));
		for (int j = 0; j < 30; j++)
			CHECK(x.x[j] >= 0 && x.x[j] < 1 && fabs(x.x[j] * 1e6 - floor(x.x[j] * 1e6 + 0.5)) < 1e-6);
		plan_instance_release(&x);
		plan_instance_release(&y);
	}
	/* the written text is the instance exactly, and n does not change it */
	const char *path = "synth.jsonl";
	char *full = xmalloc(strlen(test_tmpdir()) + 32);
	snprintf(full, strlen(test_tmpdir()) + 32, "%s/%s", test_tmpdir(), path);
	FILE *f = fopen(full, "w");
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_synth_write(f, 8, 3, 5, 7, &err), 0);
	fclose(f);
	struct plan_reader *r;
	CHECK_INT(plan_reader_open(full, &r, &err), 0);
	plan_synth_init(&a, 7);
	struct plan_instance in, want;
	int n = 0;
	while (plan_reader_next(r, &in, &err) == 1) {
		plan_synth_next(&a, 8, 3, &want);
		CHECK(!memcmp(in.x, want.x, 8 * sizeof(double)));
		CHECK(!memcmp(in.c, want.c, 7 * 3 * sizeof(double)));
		plan_instance_release(&in);
		plan_instance_release(&want);
		n++;
	}
	CHECK_INT(n, 5);
	plan_reader_free(r);
	plan_reader_free(NULL);
	free(full);
}

static double direct_train(const struct plan_instance *in, const int *cuts)
{
	double mx = 0, comm = 0;
	int a = 0;
	for (int t = 0; t <= in->s; t++) {
		int e = t < in->s ? cuts[t] + 1 : in->g;
		double sx = 0;
		for (int i = a; i < e; i++)
			sx += in->x[i];
		if (sx > mx)
			mx = sx;
		if (t < in->s)
			comm += in->c[cuts[t] * in->s + t];
		a = e;
	}
	return mx + comm;
}

/* eval's mean and std error equal a direct computation; --against gives 0
 * for our partitions and the right gap for perturbed ones. */
TEST(eval_numbers_and_gap)
{
	const char *dir = test_tmpdir();
	struct sbuf ip = SBUF_INIT, pp = SBUF_INIT, qp = SBUF_INIT;
	sbuf_addf(&ip, "%s/i.jsonl", dir);
	sbuf_addf(&pp, "%s/p.jsonl", dir);
	sbuf_addf(&qp, "%s/q.jsonl", dir);
	struct tc_err err = TC_ERR_INIT;
	FILE *f = fopen(ip.buf, "w");
	CHECK_INT(plan_synth_write(f, 12, 4, 40, 99, &err), 0);
	fclose(f);

	FILE *pf = fopen(pp.buf, "w");
	struct plan_eval_opts o = { PLAN_OBJ_TRAIN, 0, NULL, pf };
	struct plan_eval e;
	CHECK_INT(plan_eval_file(ip.buf, &o, &e, &err), 0);
	fclose(pf);
	CHECK_INT(e.n, 40);

	/* direct: partition each instance, mean and sample std / sqrt(n) */
	struct plan_synth sy;
	plan_synth_init(&sy, 99);
	double v[40], sum = 0, their[40], tsum = 0;
	FILE *qf = fopen(qp.buf, "w");
	for (int i = 0; i < 40; i++) {
		struct plan_instance in;
		struct plan_result r;
		plan_synth_next(&sy, 12, 4, &in);
		CHECK_INT(plan_partition(&in, PLAN_OBJ_TRAIN, 0, &r, &err), 0);
		v[i] = direct_train(&in, r.cuts);
		sum += v[i];
		/* perturbed: every cut as far left as it goes */
		int cuts[4] = { 0, 1, 2, 3 };
		their[i] = direct_train(&in, cuts);
		tsum += their[i];
		fprintf(qf, "{\"instance\":%d,\"cuts\":[0,1,2,3]}\n", i);
		plan_result_release(&r);
		plan_instance_release(&in);
	}
	fclose(qf);
	double mean = sum / 40, ss = 0;
	for (int i = 0; i < 40; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	double se = sqrt(ss / 39) / sqrt(40);
	CHECK(fabs(e.mean - mean) < 1e-12 && fabs(e.stderr_ - se) < 1e-12);
	CHECK(e.seconds_per_instance > 0 && e.seconds_per_instance < 0.1);

	o.partitions_out = NULL;
	o.against = pp.buf;
	CHECK_INT(plan_eval_file(ip.buf, &o, &e, &err), 0);
	CHECK(e.has_against && e.mean_gap == 0 && e.max_gap == 0 && e.optimal == 40);

	o.against = qp.buf;
	CHECK_INT(plan_eval_file(ip.buf, &o, &e, &err), 0);
	double gap = 0, mx = 0;
	for (int i = 0; i < 40; i++) {
		gap += (their[i] - v[i]) / v[i];
		if ((their[i] - v[i]) / v[i] > mx)
			mx = (their[i] - v[i]) / v[i];
		CHECK(their[i] >= v[i] - 1e-12);
	}
	CHECK(fabs(e.mean_gap - gap / 40) < 1e-9 && fabs(e.max_gap - mx) < 1e-9);
	CHECK(fabs(e.their_mean - tsum / 40) < 1e-9);
	CHECK(e.mean_gap > 0);

	/* a bad partition names the instance and the field */
	f = fopen(qp.buf, "w");
	fprintf(f, "{\"cuts\":[0,1,2,3]}\n{\"cuts\":[0,2,2,3]}\n");
	fclose(f);
	CHECK_INT(plan_eval_file(ip.buf, &o, &e, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "instance 1");
	CHECK_CONTAINS(err.msg, "cuts[2]");
	tc_err_release(&err);
	sbuf_release(&ip);
	sbuf_release(&pp);
	sbuf_release(&qp);
}

TEST(score_accepts_stage_sizes_and_checks)
{
	double x[4] = { 1, 2, 3, 4 }, c[3] = { 1, 1, 1 };
	struct plan_instance in = { 4, 1, x, c, 0 };
	struct plan_result r;
	struct tc_err err = TC_ERR_INIT;
	int cuts[1] = { 2 };
	CHECK_INT(plan_score(&in, PLAN_OBJ_TRAIN, 0, cuts, 1, "w", &r, &err), 0);
	CHECK(r.objective == 7 && r.stages[0] == 3 && r.stages[1] == 1);
	plan_result_release(&r);
	cuts[0] = 3;
	CHECK_INT(plan_score(&in, PLAN_OBJ_TRAIN, 0, cuts, 1, "w", &r, &err), TC_EINPUT);
	CHECK_INT(plan_score(&in, PLAN_OBJ_TRAIN, 0, cuts, 0, "w", &r, &err), TC_EINPUT);
	tc_err_release(&err);
}

TEST(json_numbers_shortest_round_trip)
{
	static const double cases[] = { 2.543722, 0.1 + 0.2, 1.75, 1e-05, 1.2345678901234568e+17, 0,
					-7.25e-300 };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sbuf sb = SBUF_INIT;
		plan_add_number(&sb, cases[i]);
		CHECK(strtod(sb.buf, NULL) == cases[i]);
		sbuf_release(&sb);
	}
	/* %.17g wrote 2.5437219999999998; 0.1 + 0.2 is not the double 0.3 reads as */
	struct sbuf sb = SBUF_INIT;
	plan_add_number(&sb, 2.543722);
	CHECK_STR(sb.buf, "2.543722");
	sbuf_reset(&sb);
	plan_add_number(&sb, 0.1 + 0.2);
	CHECK_STR(sb.buf, "0.30000000000000004");
	sbuf_reset(&sb);
	plan_add_number(&sb, NAN);
	CHECK_STR(sb.buf, "null");
	sbuf_release(&sb);
}
