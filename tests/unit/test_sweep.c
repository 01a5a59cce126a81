/* test_sweep.c -- src/sweep/: the sweep file, trials, objective, early stopping, the store rows */
#include "test.h"

#include "core/err.h"
#include "store/store.h"
#include "sweep/sweep.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static struct sweep_def *parse_ok(const char *text)
{
	struct sweep_def *d = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = sweep_parse(text, strlen(text), "s.yaml", "/tmp", NULL, &d, &err);
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	CHECK_INT(rc, 0);
	tc_err_release(&err);
	return d;
}

static char *parse_err(const char *text)
{
	struct sweep_def *d = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(sweep_parse(text, strlen(text), "s.yaml", "/tmp", NULL, &d, &err), TC_ESPEC);
	CHECK(d == NULL);
	char *m = strdup(err.msg);
	tc_err_release(&err);
	return m;
}

static const char grid[] = "spec: {command: [python3, t.py]}\n"
			   "parameters:\n"
			   "  args.lr: [0.01, 0.1]\n"
			   "  args.batch-size: [16, 64]\n"
			   "objective: {metric: val.accuracy, mode: max}\n"
			   "parallel: 2\n";

TEST(grid_is_the_product_last_key_fastest)
{
	struct sweep_def *d = parse_ok(grid);
	CHECK_INT(d->count, 4);
	CHECK(!d->random);
	CHECK_INT(d->parallel, 2);
	CHECK_INT(d->mode, SWEEP_MAX);
	CHECK_INT(d->reduce, SWEEP_LAST);
	CHECK_STR(d->name, "s");
	CHECK_CONTAINS(d->spec_text, "\"workdir\": \"/tmp\"");
	json_t *t = sweep_trials(d);
	CHECK_INT(json_array_size(t), 4);
	char *s = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	CHECK_STR(s, "[{\"args.lr\":0.01,\"args.batch-size\":16},{\"args.lr\":0.01,\"args.batch-size\":64},"
		     "{\"args.lr\":0.1,\"args.batch-size\":16},{\"args.lr\":0.1,\"args.batch-size\":64}]");
	free(s);
	json_decref(t);
	sweep_def_free(d);
}

TEST(random_search_is_seeded_and_in_range)
{
	const char *text = "spec: {command: [python3, t.py]}\n"
			   "parameters:\n"
			   "  args.lr: {loguniform: [0.001, 0.1]}\n"
			   "  args.m: {uniform: [0.5, 0.9]}\n"
			   "  args.h: {int: [8, 12]}\n"
			   "  args.opt: [sgd, adam]\n"
			   "count: 20\nseed: 7\n"
			   "objective: {metric: loss}\n";
	struct sweep_def *d = parse_ok(text), *d2 = parse_ok(text);
	CHECK(d->random);
	CHECK_INT(d->count, 20);
	json_t *a = sweep_trials(d), *b = sweep_trials(d2);
	CHECK(json_equal(a, b));
	size_t i;
	json_t *o;
	bool seen[5] = { false };
	json_array_foreach(a, i, o) {
		double lr = json_real_value(json_object_get(o, "args.lr"));
		double m = json_real_value(json_object_get(o, "args.m"));
		json_int_t h = json_integer_value(json_object_get(o, "args.h"));
		const char *opt = json_string_value(json_object_get(o, "args.opt"));
		CHECK(lr >= 0.001 && lr <= 0.1);
		CHECK(m >= 0.5 && m <= 0.9);
		CHECK(h >= 8 && h <= 12);
		seen[h - 8] = true;
		CHECK(opt && (!strcmp(opt, "sgd") || !strcmp(opt, "adam")));
	}
	CHECK(seen[0] && seen[4]);
	json_decref(a);
	json_decref(b);
	sweep_def_free(d);
	sweep_def_free(d2);
}

TEST(bad_files_name_the_line_and_key)
{
	char *m = parse_err("spec: {command: [x]}\nparameters: {args.lr: [1]}\nobjective: {metric: l, mode: maximum}\n");
	CHECK_CONTAINS(m, "s.yaml:3: objective.mode: must be one of min, max");
	free(m);
	m = parse_err("spec: {command: [x]}\nparameters: {args.lr: [1]}\nobjective: {metric: l}\nparalel: 2\n");
	CHECK_CONTAINS(m, "s.yaml:4: unknown key 'paralel' (did you mean 'parallel'?)");
	free(m);
	m = parse_err("spec: {command: [x]}\nparameters: {args.lr: {loguniform: [0, 1]}}\ncount: 2\nobjective: {metric: l}\n");
	CHECK_CONTAINS(m, "loguniform: needs low > 0");
	free(m);
	m = parse_err("spec: {command: [x]}\nparameters: {args.lr: {uniform: [0, 1]}}\nobjective: {metric: l}\n");
	CHECK_CONTAINS(m, "count: is missing");
	free(m);
	m = parse_err("spec: {command: [x]}\nparameters: {args.lr: [1, 2]}\ncount: 3\nobjective: {metric: l}\n");
	CHECK_CONTAINS(m, "count: is for random search");
	free(m);
	m = parse_err("spec: {command: [x]}\nparameters: {args.lr: [1]}\n");
	CHECK_CONTAINS(m, "objective: is missing");
	free(m);
	m = parse_err("spec: nothere.yaml\nparameters: {args.lr: [1]}\nobjective: {metric: l}\n");
	CHECK_CONTAINS(m, "s.yaml:1: spec: ");
	free(m);
	m = parse_err("spec: {command: [x]}\nparameters: {args.lr: [1]}\nobjective: {metric: l}\n"
		      "early_stopping: {rule: halving}\n");
	CHECK_CONTAINS(m, "halving needs budget");
	free(m);
}

TEST(definition_round_trips_through_json)
{
	struct sweep_def *d = parse_ok("spec: {command: [x]}\nparameters:\n  args.lr: {uniform: [0.1, 0.2]}\n"
				       "  env.K: [a, b]\ncount: 3\nobjective: {metric: acc, mode: max, reduce: mean}\n"
				       "early_stopping: {rule: median, grace: 2, min_trials: 2}\n");
	json_t *j = sweep_def_to_json(d);
	char *text = json_dumps(j, JSON_COMPACT);
	struct sweep_def *e = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(sweep_def_from_json(text, &e, &err), 0);
	json_t *a = sweep_trials(d), *b = sweep_trials(e);
	CHECK(json_equal(a, b));
	CHECK_INT(e->reduce, SWEEP_MEAN);
	CHECK_INT(e->stop.rule, SWEEP_RULE_MEDIAN);
	CHECK_INT(e->stop.grace, 2);
	CHECK_INT(e->stop.min_trials, 2);
	json_decref(a);
	json_decref(b);
	json_decref(j);
	free(text);
	sweep_def_free(d);
	sweep_def_free(e);
}

TEST(values_as_override_text)
{
	json_t *v = json_real(0.1);
	char *t = sweep_value_text(v);
	CHECK_STR(t, "0.1");
	free(t);
	json_decref(v);
	v = json_string("adam");
	t = sweep_value_text(v);
	CHECK_STR(t, "adam");
	free(t);
	json_decref(v);
	v = json_string("4"); /* a string that YAML would read as a number stays a string */
	t = sweep_value_text(v);
	CHECK_STR(t, "\"4\"");
	free(t);
	json_decref(v);
	v = json_pack("[s, s]", "python3", "t.py");
	t = sweep_value_text(v);
	CHECK_STR(t, "[\"python3\",\"t.py\"]");
	free(t);
	json_decref(v);
	t = sweep_params_text("{\"args.lr\": 0.1, \"args.batch-size\": 16}");
	CHECK_STR(t, "lr=0.1 batch-size=16");
	free(t);
}

TEST(reduce_and_better)
{
	double v[] = { 3, 1, 2 };
	CHECK(sweep_reduce_values(v, 3, SWEEP_LAST) == 2);
	CHECK(sweep_reduce_values(v, 3, SWEEP_RMIN) == 1);
	CHECK(sweep_reduce_values(v, 3, SWEEP_RMAX) == 3);
	CHECK(sweep_reduce_values(v, 3, SWEEP_MEAN) == 2);
	CHECK(isnan(sweep_reduce_values(v, 0, SWEEP_LAST)));
	CHECK(sweep_better(SWEEP_MAX, 2, 1));
	CHECK(sweep_better(SWEEP_MIN, 1, 2));
	CHECK(sweep_better(SWEEP_MIN, 1, NAN));
	CHECK(!sweep_better(SWEEP_MIN, NAN, 1));
}

TEST(accuracy_like_names)
{
	const char *yes[] = { "val.accuracy", "acc", "val_acc", "eval/f1", "val-top1", "mAP", "bleu", "val.AUC" };
	const char *no[] = { "loss", "val.loss", "accuracy_loss", "perplexity", "lr", "mae" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		CHECK(sweep_metric_maximised(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		CHECK(!sweep_metric_maximised(no[i]));
}

TEST(median_rule_stops_a_clearly_worse_trial)
{
	struct sweep_def *d = parse_ok("spec: {command: [x]}\nparameters: {args.lr: [1]}\n"
				       "objective: {metric: loss}\nearly_stopping: {rule: median, grace: 2, min_trials: 2}\n");
	double good1[] = { 5, 4, 3, 2 }, good2[] = { 5, 4, 3, 2.5 }, bad[] = { 9, 9, 9 };
	struct sweep_curve c[] = { { good1, 4, false }, { good2, 4, false }, { bad, 2, true } };
	struct sbuf why = SBUF_INIT;
	CHECK(!sweep_should_stop(d, c, 3, 2, &why)); /* within its grace */
	c[2].n = 3;
	CHECK(sweep_should_stop(d, c, 3, 2, &why));
	CHECK_CONTAINS(why.buf, "median rule");
	sbuf_reset(&why);
	c[2].v = good2;
	CHECK(!sweep_should_stop(d, c, 3, 2, &why)); /* as good as the others */
	c[1].n = 2;                                   /* too few others reached step 3 */
	c[2].v = bad;
	CHECK(!sweep_should_stop(d, c, 3, 2, &why));
	sbuf_release(&why);
	sweep_def_free(d);
}

TEST(halving_keeps_the_best_third_at_a_rung)
{
	struct sweep_def *d = parse_ok("spec: {command: [x]}\nparameters: {args.lr: [1]}\n"
				       "objective: {metric: acc, mode: max}\n"
				       "early_stopping: {rule: halving, budget: 9, eta: 3, min_steps: 1}\n");
	double a[] = { 0.9, 0.9, 0.9 }, b[] = { 0.5, 0.5, 0.5 }, c0[] = { 0.1, 0.1, 0.1 };
	struct sweep_curve c[] = { { a, 1, true }, { b, 1, true }, { c0, 1, true } };
	struct sbuf why = SBUF_INIT;
	CHECK(!sweep_should_stop(d, c, 3, 0, &why));
	CHECK(sweep_should_stop(d, c, 3, 1, &why));
	CHECK(sweep_should_stop(d, c, 3, 2, &why));
	CHECK_CONTAINS(why.buf, "successive halving");
	c[1].n = 0; /* two at the rung: fewer than eta, nobody is judged */
	CHECK(!sweep_should_stop(d, c, 3, 2, &why));
	sbuf_release(&why);
	sweep_def_free(d);
}

TEST(store_rows_and_ranking)
{
	char dir[] = "/tmp/tc-sweep-XXXXXX";
	CHECK(mkdtemp(dir));
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(dir, &st, &err), 0);
	struct sweep_row s = { .id = "20260101-000000-000-abcd", .name = "g", .state = "running",
			       .def_json = "{}", .created = 1 };
	struct trial_row t[3] = {
		{ .sweep_id = s.id, .idx = 0, .params_json = "{\"a\":1}", .state = "pending" },
		{ .sweep_id = s.id, .idx = 1, .params_json = "{\"a\":2}", .state = "pending" },
		{ .sweep_id = s.id, .idx = 2, .params_json = "{\"a\":3}", .state = "pending" },
	};
	CHECK_INT(store_sweep_create(st, &s, t, 3, &err), 0);
	struct trial_row *v = NULL;
	size_t n = 0;
	CHECK_INT(store_sweep_trials(st, s.id, &v, &n, &err), 0);
	CHECK_INT(n, 3);
	CHECK(isnan(v[0].objective));
	for (size_t i = 0; i < n; i++) { /* started: the diagram's way to an end */
		free(v[i].state);
		v[i].state = strdup("running");
		CHECK_INT(store_trial_update(st, &v[i], &err), 0);
	}
	free(v[0].state);
	v[0].state = strdup("succeeded");
	v[0].objective = 0.5;
	v[0].job_id = strdup("J0");
	free(v[1].state);
	v[1].state = strdup("succeeded");
	v[1].objective = 0.25;
	free(v[2].state);
	v[2].state = strdup("failed");
	v[2].objective = 0.1; /* better, but failed: not the best */
	for (size_t i = 0; i < n; i++)
		CHECK_INT(store_trial_update(st, &v[i], &err), 0);
	trial_rows_free(v, n);
	CHECK_INT(store_sweep_trials(st, s.id, &v, &n, &err), 0);
	long best = sweep_rank_trials(SWEEP_MIN, v, n);
	CHECK_INT(best, 0);
	CHECK_INT(v[0].idx, 1);
	CHECK_INT(v[1].idx, 0);
	CHECK_INT(v[2].idx, 2);
	trial_rows_free(v, n);
	struct trial_row one;
	CHECK_INT(store_trial_of_job(st, "J0", &one, &err), 0);
	CHECK_INT(one.idx, 0);
	trial_row_release(&one);
	struct sweep_row g;
	CHECK_INT(store_sweep_get(st, "g", &g, &err), 0);
	CHECK_STR(g.id, s.id);
	sweep_row_release(&g);
	CHECK_INT(store_sweep_get(st, "2026", &g, &err), 0);
	sweep_row_release(&g);
	CHECK_INT(store_sweep_set_state(st, s.id, "done", "best: trial 1", true, &err), 0);
	/* state.h's diagrams, enforced: an end over an end keeps the first, a way back is refused */
	CHECK_INT(store_sweep_set_state(st, s.id, "stopped", "late signal", true, &err), 0);
	CHECK_INT(store_sweep_get(st, s.id, &g, &err), 0);
	CHECK_STR(g.state, "done");
	sweep_row_release(&g);
	CHECK_INT(store_sweep_set_state(st, s.id, "running", NULL, false, &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "cannot go from done to running");
	tc_err_release(&err);
	CHECK_INT(store_sweep_trials(st, s.id, &v, &n, &err), 0);
	free(v[2].state);
	v[2].state = strdup("pending");
	CHECK_INT(store_trial_update(st, &v[2], &err), TC_EUSAGE);
	CHECK_CONTAINS(err.msg, "trial 2 cannot go from failed to pending");
	tc_err_release(&err);
	free(v[0].state);
	v[0].state = strdup("failed-objective"); /* drawn: succeeded, the objective never logged */
	CHECK_INT(store_trial_update(st, &v[0], &err), 0);
	trial_rows_free(v, n);
	struct sweep_row *l = NULL;
	CHECK_INT(store_sweep_list(st, true, &l, &n, &err), 0);
	CHECK_INT(n, 0);
	sweep_rows_free(l, n);
	store_close(st);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
}
