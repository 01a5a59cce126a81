/* test_plan_strategy.c -- the strategy search against exhaustive search. */
#include "test.h"

#include "core/sbuf.h"
#include "core/xalloc.h"
#include "plan/plan.h"
#include "plan/plan_int.h"

#include <math.h>

#define GiB (1024.0 * 1024.0 * 1024.0)

/* Step time and peak memory of one partition, by direct sums; INF if a
 * stage does not fit. */
static double direct_step(const struct plan_cand_problem *cp, const int *cuts, long nb)
{
	const struct plan_problem *p = &cp->p;
	double mx = 0, my = 0, comm = 0;
	int a = 0;
	for (int t = 0; t <= p->s; t++) {
		int e = t < p->s ? cuts[t] + 1 : p->g;
		double sx = 0, sy = 0, ms = 0, ma = 0;
		for (int i = a; i < e; i++) {
			sx += p->x[i];
			sy += p->y[i];
			ms += p->mstat[i];
			ma += p->mact[i];
		}
		if (ms + p->mult[t] * ma > p->cap[t])
			return HUGE_VAL;
		mx = sx > mx ? sx : mx;
		my = sy > my ? sy : my;
		if (t < p->s)
			comm += p->c[cuts[t] * p->s + t];
		a = e;
	}
	return (double)(nb - 1) * mx + cp->sum_x + comm + my;
}

static double best_partition(const struct plan_cand_problem *cp, long nb, int *cuts, int k, int from)
{
	const struct plan_problem *p = &cp->p;
	if (k == p->s)
		return direct_step(cp, cuts, nb);
	double best = HUGE_VAL;
	for (int j = from; j <= p->g - 2 - (p->s - 1 - k); j++) {
		cuts[k] = j;
		double v = best_partition(cp, nb, cuts, k + 1, j + 1);
		best = v < best ? v : best;
	}
	return best;
}

/* Enumerate like APSS (tp | devices per node, dp | devices / tp and the
 * global batch, mb | global batch / dp) and try every partition. */
static double exhaustive(const char *model, int nodes, int dpn, long gb, double mem, int *fits)
{
	struct plan_model *m;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_model_load(model, 0, &m, &err), 0);
	struct plan_cluster cl;
	plan_cluster_defaults(&cl);
	cl.nodes = nodes;
	cl.devices_per_node = dpn;
	if (mem > 0)
		cl.device_memory = mem;
	int dev = nodes * dpn, g = plan_model_layers(m);
	double best = HUGE_VAL;
	int cuts[128];
	*fits = 0;
	for (int tp = 1; tp <= dpn; tp++) {
		if (dpn % tp || !plan_model_tp_ok(m, tp))
			continue;
		for (int dp = 1; dp <= dev / tp; dp++) {
			if ((dev / tp) % dp || gb % dp || dev / (tp * dp) > g)
				continue;
			for (long mb = 1; mb <= gb / dp; mb++) {
				if ((gb / dp) % mb)
					continue;
				long nb = gb / (dp * mb);
				struct plan_cand_problem cp;
				plan_cand_build(m, &cl, tp, dp, dev / (tp * dp), (int)mb, nb, &cp);
				double v = best_partition(&cp, nb, cuts, 0, 0);
				if (v < HUGE_VAL)
					(*fits)++;
				best = v < best ? v : best;
				plan_cand_release(&cp);
			}
		}
	}
	plan_model_free(m);
	return best;
}

static void check_search(const char *model, int nodes, int dpn, long gb, double mem)
{
	int fits;
	double want = exhaustive(model, nodes, dpn, gb, mem, &fits);
	struct plan_strategy_req req = { model, nodes * dpn, nodes, gb, NULL, mem, 0 };
	struct plan_strategy *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_strategy_search(&req, &st, &err), 0);
	CHECK_INT(st->n, fits);
	if (fabs(st->cand[0].step_time - want) > 1e-9 * want) {
		fprintf(stderr, "%s %dx%d gb %ld: search %.12g exhaustive %.12g\n", model, nodes, dpn, gb,
			st->cand[0].step_time, want);
		exit(1);
	}
	for (int i = 0; i < st->n; i++) {
		const struct plan_candidate *c = &st->cand[i];
		int sum = 0;
		for (int t = 0; t < c->pp; t++) {
			sum += c->layers[t];
			CHECK(c->layers[t] >= 1);
			CHECK(c->peak_mem[t] + st->cluster.memory_reserve <= st->cluster.device_memory);
		}
		CHECK_INT(sum, st->num_layers);
		CHECK_INT(c->dp * c->tp * c->pp, nodes * dpn);
		CHECK_INT((long)c->dp * c->mb * c->micro_batches, gb);
		if (i)
			CHECK(c->step_time >= st->cand[i - 1].step_time);
	}
	plan_strategy_free(st);
}

TEST(strategy_best_equals_exhaustive)
{
	check_search("gpt2-small", 2, 2, 8, 0);
	check_search("gpt2-small", 1, 4, 16, 0);
	check_search("gpt2-medium", 2, 2, 4, 0);
}

/* Memory so tight that some candidates and some partitions are out. */
TEST(strategy_memory_rejects)
{
	int fits;
	double want = exhaustive("gpt2-medium", 1, 4, 16, 4.0 * GiB, &fits);
	CHECK(want < HUGE_VAL);
	struct plan_strategy_req req = { "gpt2-medium", 4, 1, 16, NULL, 4.0 * GiB, 0 };
	struct plan_strategy *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_strategy_search(&req, &st, &err), 0);
	CHECK(st->rejected_memory > 0);
	CHECK_INT(st->n, fits);
	plan_strategy_free(st);
	check_search("gpt2-medium", 1, 4, 16, 4.0 * GiB);
	check_search("gpt2-medium", 1, 4, 16, 6.0 * GiB);
	check_search("gpt2-small", 2, 2, 8, 3.0 * GiB);
}

TEST(strategy_too_large_is_clear_error)
{
	struct plan_strategy_req req = { "gpt3-175b", 16, 2, 32, NULL, 0, 0 };
	struct plan_strategy *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "does not fit");
	CHECK_CONTAINS(err.msg, "16 devices");
	req.model = "gpt5-huge";
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "unknown model");
	tc_err_release(&err);
}

TEST(strategy_best_library_call)
{
	struct plan_strategy_req req = { "gpt2-medium", 16, 2, 32, NULL, 0, 0 };
	struct plan_candidate c;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_strategy_best(&req, &c, &err), 0);
	CHECK_INT(c.dp * c.tp * c.pp, 16);
	int sum = 0;
	for (int t = 0; t < c.pp; t++)
		sum += c.layers[t];
	CHECK_INT(sum, 24);
	plan_candidate_release(&c);
	plan_candidate_release(&c);
	plan_candidate_release(NULL);
}

static char *write_tmp(const char *name, const char *text)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s", test_tmpdir(), name);
	FILE *f = fopen(p.buf, "w");
	fputs(text, f);
	fclose(f);
	return sbuf_detach(&p);
}

TEST(strategy_yaml_model_and_cluster)
{
	char *model = write_tmp("m.yaml",
				"name: toy\n"
				"layers:\n"
				"  - {name: embed, params: 4e6, time_ms: {1: 0.2, 2: 0.12}, output_bytes: 1e6, activation_bytes: 2e6}\n"
				"  - {name: block, count: 6, params: 1.2e7, time_ms: {1: 1.0, 2: 0.55}, output_bytes: 1e6, activation_bytes: 3e7}\n"
				"  - {name: head, params: 4e6, time_ms: {1: 0.9, 2: 0.5}, output_bytes: 0, activation_bytes: 5e7}\n");
	char *cluster = write_tmp("c.yaml",
				  "nodes: 2\ndevices_per_node: 2\nintra_node_bandwidth: 100\n"
				  "inter_node_bandwidth: 10\ndevice_memory: 4GiB\nmemory_reserve: 512MiB\n");
	struct plan_strategy_req req = { model, 0, 0, 8, cluster, 0, 0 };
	struct plan_strategy *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(plan_strategy_search(&req, &st, &err), 0);
	CHECK_INT(st->num_layers, 8);
	CHECK_INT(st->cluster.nodes, 2);
	CHECK(st->cluster.device_memory == 4 * GiB);
	for (int i = 0; i < st->n; i++)
		CHECK(st->cand[i].tp <= 2);
	plan_strategy_free(st);
	check_search(model, 2, 2, 8, 0);

	char *bad = write_tmp("b.yaml", "layers:\n  - {params: 1, time_ms: {1: 1}, colour: red}\n");
	req.model = bad;
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "b.yaml:2");
	CHECK_CONTAINS(err.msg, "colour");
	char *badc = write_tmp("bc.yaml", "nodes: 2\nintra_node_bandwith: 3\n");
	req.model = model;
	req.cluster_file = badc;
	CHECK_INT(plan_strategy_search(&req, &st, &err), TC_EINPUT);
	CHECK_CONTAINS(err.msg, "bc.yaml:2");
	tc_err_release(&err);
	free(model);
	free(cluster);
	free(bad);
	free(badc);
}

TEST(parse_size)
{
	double v;
	CHECK(plan_parse_size("80GiB", &v) && v == 80 * GiB);
	CHECK(plan_parse_size("40GB", &v) && v == 40e9);
	CHECK(plan_parse_size("1.5e9", &v) && v == 1.5e9);
	CHECK(plan_parse_size("512 MiB", &v) && v == 512.0 * 1024 * 1024);
	CHECK(!plan_parse_size("80 parsecs", &v));
	CHECK(!plan_parse_size("", &v));
}
