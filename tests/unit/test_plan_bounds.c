/*
 * test_plan_bounds.c -- the strategy search on inputs at and beyond its
 * limits: device counts whose product overflowed an int (UBSan in the
 * sanitizer build), a global batch of 2^30 (divisors were found by trying
 * every value), a request beyond the work budget, and the O(1) node-crossing
 * test against the rank-by-rank loops it replaced.
 */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "plan/plan.h"
#include "plan/plan_int.h"
#include "spec/spec.h"

#include <math.h>
#include <time.h>

/*
 * CPU seconds of this process: the bounds below are about the planner's
 * work (the old divisor loop took 14 s), not about how busy the machine
 * is, so they use CPU time, which other processes' load does not inflate.
 * The limits are loose (5 s, 10x the sanitizer build's time here) so that
 * only a return of the old algorithms trips them.
 */
static double cpu_now(void)
{
	struct timespec ts;
	CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
#define CPU_LIMIT 5.0

static char *write_tmp(const char *name, const char *text)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", test_tmpdir(), name);
	FILE *f = fopen(p.buf, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK(fclose(f) == 0);
	return sbuf_detach(&p);
}

TEST(cluster_counts_are_bounded)
{
	struct plan_cluster cl;
	struct tc_err err = TC_ERR_INIT;
	/* 100000 x 100000 overflowed int in the search */
	char *huge = write_tmp("huge.yaml", "nodes: 100000\ndevices_per_node: 100000\n");
	plan_cluster_defaults(&cl);
	CHECK_INT(plan_cluster_load(huge, &cl, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "huge.yaml:2: 'devices_per_node': 100000 is more than the 1024 the planner handles");
	char *many = write_tmp("many.yaml", "nodes: 1000000\n");
	CHECK_INT(plan_cluster_load(many, &cl, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "many.yaml:1: 'nodes': 1000000 is more than the 100000");
	/* each in range, the product not */
	char *prod = write_tmp("prod.yaml", "nodes: 100000\ndevices_per_node: 1024\n");
	plan_cluster_defaults(&cl);
	CHECK_INT(plan_cluster_load(prod, &cl, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "prod.yaml:2: 'nodes' x 'devices_per_node' = 100000 x 1024 = 102400000 devices");

	/* the search: a file in range, the request's nodes making it too many */
	char *wide = write_tmp("wide.yaml", "devices_per_node: 1024\n");
	struct plan_strategy_req req = { "gpt2-small", 0, 100000, 64, wide, 0, 0 };
	struct plan_strategy *st = NULL;
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "100000 nodes x 1024 devices per node = 102400000 devices, more than the 1048576");
	CHECK(st == NULL);
	tc_err_release(&err);
	free(huge);
	free(many);
	free(prod);
	free(wide);
}

TEST(global_batch_of_2_30_plans_fast)
{
	struct plan_strategy_req req = { "gpt3-175b", 8, 1, 1L << 30, NULL, 0, 0 };
	struct plan_strategy *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	double t0 = cpu_now();
	/* 8 devices of 80 GiB cannot hold it: the answer is the memory error */
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "does not fit on 8 devices");
	double dt = cpu_now() - t0;
	if (dt >= CPU_LIMIT) {
		fprintf(stderr, "took %.2f CPU s\n", dt);
		CHECK(dt < CPU_LIMIT);
	}
	/* one that fits, with a batch of many divisors */
	req.model = "gpt2-small";
	req.global_batch = 720720;
	t0 = cpu_now();
	CHECK_INT(plan_strategy_search(&req, &st, &err), 0);
	CHECK(cpu_now() - t0 < CPU_LIMIT);
	CHECK(st->n > 0);
	/* every (dp, mb) with dp | 8 and mb | 720720 / dp was tried */
	long want = 0;
	for (long tp = 1; tp <= 8; tp *= 2) /* gpt2-small's 12 heads: tp 1, 2, 4 */
		for (long dp = 1; tp <= 4 && dp <= 8 / tp; dp++)
			if ((8 / tp) % dp == 0 && 8 / (tp * dp) <= 12)
				for (long mb = 1; mb <= 720720 / dp; mb++)
					want += (720720 / dp) % mb == 0;
	CHECK_INT(st->enumerated, want);
	plan_strategy_free(st);
	tc_err_release(&err);
}

TEST(spec_with_global_batch_of_2_30_parses_fast)
{
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8", 1);
	static const char text[] = "command: [\"true\"]\n"
				   "devices: {type: gpu}\n"
				   "parallel: {strategy: auto, model: gpt3-175b, global_batch: 1073741824}\n";
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	double t0 = cpu_now();
	int rc = spec_parse(text, sizeof(text) - 1, "job.yaml", "/tmp", &s, &err);
	double dt = cpu_now() - t0;
	CHECK_INT(rc, TC_ESPEC);
	CHECK_CONTAINS(err.msg, "job.yaml:3: parallel:");
	if (dt >= CPU_LIMIT) {
		fprintf(stderr, "spec_parse took %.2f CPU s\n", dt);
		CHECK(dt < CPU_LIMIT);
	}
	tc_err_release(&err);
}

TEST(work_beyond_the_budget_fails_fast)
{
	/* 4096 devices, a batch with 1344 divisors, 96 layers */
	struct plan_strategy_req req = { "gpt3-175b", 4096, 512, 735134400, NULL, 0, 0 };
	struct plan_strategy *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	double t0 = cpu_now();
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK(cpu_now() - t0 < CPU_LIMIT);
	CHECK_CONTAINS(err.msg, "planning gpt3-175b (96 layers) on 4096 devices with global batch 735134400 is more work than one plan may take");
	CHECK(st == NULL);
	/* a model of many layers: each candidate costs O(layers^2) to solve */
	char *big = write_tmp("big.yaml", "name: big\nlayers:\n"
				  "  - {name: b, count: 20000, params: 1e6, time_ms: {1: 1}, output_bytes: 1e3, activation_bytes: 1e3}\n");
	struct plan_strategy_req r2 = { big, 8, 1, 1, NULL, 0, 0 };
	t0 = cpu_now();
	CHECK_INT(plan_strategy_search(&r2, &st, &err), TC_EINPUT);
	CHECK(cpu_now() - t0 < CPU_LIMIT);
	CHECK_CONTAINS(err.msg, "is more work than one plan may take");
	tc_err_release(&err);
	free(big);
}

/* ---- which links are inter-node, against the rank-by-rank definition ---- */

static long rank_of(int tp, int dp, int stage, int d, int t)
{
	return ((long)stage * dp + d) * tp + t;
}

TEST(node_crossing_matches_rank_by_rank)
{
	struct plan_model *m;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_model_load("gpt2-small", 0, &m, &err), 0);
	int g = plan_model_layers(m);
	long checked = 0;
	for (int nodes = 1; nodes <= 6; nodes++)
		for (int dpn = 1; dpn <= 12; dpn++) {
			int devices = nodes * dpn;
			for (int tp = 1; tp <= devices; tp++)
				for (int dp = 1; dp <= devices / tp; dp++) {
					if ((devices / tp) % dp || devices / (tp * dp) > g)
						continue;
					int pp = devices / (tp * dp), s = pp - 1;
					struct plan_cluster cl, one;
					plan_cluster_defaults(&cl);
					cl.nodes = nodes;
					cl.devices_per_node = dpn;
					cl.intra_bw = 4; /* powers of two: the two builds differ exactly */
					cl.inter_bw = 1;
					one = cl;
					one.nodes = 1;
					one.devices_per_node = devices;
					struct plan_cand_problem a, b;
					plan_cand_build(m, &cl, tp, dp, pp, 1, 4, &a);
					plan_cand_build(m, &one, tp, dp, pp, 1, 4, &b);
					/* the definition: any pair of ranks of a group on two nodes */
					bool dp_inter = false;
					for (int st = 0; st < pp; st++)
						for (int t = 0; t < tp; t++)
							for (int d = 1; d < dp; d++)
								dp_inter |= rank_of(tp, dp, st, d, t) / dpn !=
									    rank_of(tp, dp, st, 0, t) / dpn;
					for (int j = 0; j < g; j++)
						CHECK(a.y[j] == (dp_inter ? 4 * b.y[j] : b.y[j]));
					for (int k = 0; k < s; k++) {
						bool inter = false;
						for (int d = 0; d < dp; d++)
							for (int t = 0; t < tp; t++)
								inter |= rank_of(tp, dp, k, d, t) / dpn !=
									 rank_of(tp, dp, k + 1, d, t) / dpn;
						for (int j = 0; j < g - 1; j++) {
							double want = b.c[(size_t)j * s + k] * (inter ? 4 : 1);
							CHECK(a.c[(size_t)j * s + k] == want);
						}
					}
					plan_cand_release(&a);
					plan_cand_release(&b);
					checked++;
				}
		}
	CHECK(checked > 500);
	plan_model_free(m);
}
