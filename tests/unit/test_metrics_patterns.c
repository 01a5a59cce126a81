/*
 * test_metrics_patterns.c -- metrics.patterns: the patterns of
 * docs/metrics.md, loaded through the spec as a user writes them, read the
 * lines they are written for; built-in lines never reach them; a job whose
 * lines gave no record gets the hint (show and the supervisor's end).
 */
#include "test.h"
#include "ingest_store.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/ingest.h"
#include "metrics/query.h"
#include "spec/spec.h"
#include "store/store.h"

#include <jansson.h>
#include <math.h>

/* the patterns block of docs/metrics.md, as written there */
static const char doc_spec[] =
	"name: p\n"
	"command: [\"true\"]\n"
	"metrics:\n"
	"  patterns:\n"
	"    # step 10 loss 0.53\n"
	"    - {regex: \"^step ([0-9]+) loss ([^ ]+)\", step: 1, values: {loss: 2}}\n"
	"    # Keras: Epoch 3/10 - loss: 0.12 - acc: 0.97\n"
	"    - {regex: \"^Epoch ([0-9]+)/[0-9]+ - loss: ([^ ]+) - acc: ([^ ]+)\", step: 1, values: {loss: 2, acc: 3}}\n"
	"    # Hugging Face Trainer: {'loss': 0.5, 'learning_rate': 5e-05, 'epoch': 1.0}\n"
	"    - {regex: \"'loss': ([^,}]+).*'epoch': ([^,}]+)\", step: 2, values: {loss: 1}}\n"
	"    - {regex: \"'learning_rate': ([^,}]+).*'epoch': ([^,}]+)\", step: 2, values: {learning_rate: 1}}\n";

static struct spec *load_doc(void)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse(doc_spec, strlen(doc_spec), "job.yaml", "/tmp", &s, &err);
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	CHECK_INT(rc, 0);
	tc_err_release(&err);
	CHECK_INT(s->metrics_npatterns, 4);
	return s;
}

static const struct metric_rec *find(const struct metric_rec *r, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(r[i].name, name))
			return &r[i];
	fprintf(stderr, "no record %s among %zu\n", name, n);
	exit(1);
}

TEST(doc_patterns_read_their_lines)
{
	struct spec *s = load_doc();
	size_t bad = 99;
	struct metrics_matcher *m = metrics_matcher_new(s->metrics_patterns, s->metrics_npatterns, &bad);
	CHECK(m != NULL);
	spec_free(s); /* the matcher keeps copies */
	const struct metric_rec *r;

	static const char plain[] = "step 10 loss 0.53\n";
	CHECK_INT(metrics_matcher_match(m, plain, strlen(plain), &r), 1);
	CHECK_STR(r[0].name, "loss");
	CHECK_STR(r[0].step, "10");
	CHECK_INT(r[0].iter, 10);
	CHECK(r[0].has_value && r[0].value == 0.53);
	CHECK_INT(r[0].kind, METRICS_POINT);
	CHECK_INT(r[0].format, METRICS_FMT_PATTERN);
	CHECK_STR(metrics_format_name(r[0].format), "pattern");
	CHECK(r[0].str == NULL && r[0].rank == -1 && isnan(r[0].wall_time));

	static const char keras[] = "Epoch 3/10 - loss: 0.12 - acc: 0.97\r\n";
	CHECK_INT(metrics_matcher_match(m, keras, strlen(keras), &r), 2);
	CHECK(find(r, 2, "loss")->value == 0.12);
	CHECK(find(r, 2, "acc")->value == 0.97);
	CHECK_STR(find(r, 2, "acc")->step, "3");

	static const char hf[] = "{'loss': 0.5, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 1.5}\n";
	CHECK_INT(metrics_matcher_match(m, hf, strlen(hf), &r), 2);
	CHECK(find(r, 2, "loss")->value == 0.5);
	CHECK(find(r, 2, "learning_rate")->value == 5e-05);
	CHECK_STR(find(r, 2, "learning_rate")->step, "1.5");
	CHECK_INT(find(r, 2, "loss")->iter, -1);

	static const char other[] = "Downloading data...\n";
	CHECK_INT(metrics_matcher_match(m, other, strlen(other), &r), 0);
	/* a value that is not a number is kept as text */
	static const char text[] = "step 4 loss diverged\n";
	CHECK_INT(metrics_matcher_match(m, text, strlen(text), &r), 1);
	CHECK(!r[0].has_value);
	CHECK_STR(r[0].str, "diverged");
	metrics_matcher_free(m);
}

TEST(matcher_refuses_bad_regex)
{
	char *names[] = { "loss" };
	int groups[] = { 1 };
	struct metrics_pattern p[2] = {
		{ .regex = "^ok ([0-9]+)", .step = 1, .nvalues = 1, .names = names, .groups = groups },
		{ .regex = "(", .step = 1, .nvalues = 1, .names = names, .groups = groups },
	};
	size_t bad = 99;
	CHECK(metrics_matcher_new(p, 2, &bad) == NULL);
	CHECK_INT(bad, 1);
}

/* ---- through ingestion ---- */

struct sink {
	long long points;
};

static int count_write(void *ctx, struct store_mbatch *b, struct tc_err *err)
{
	(void)err;
	((struct sink *)ctx)->points += (long long)store_mbatch_pending(b);
	store_mbatch_drop(b);
	return 0;
}

TEST(builtin_lines_never_see_patterns)
{
	/* a pattern that would match the DLLogger line too */
	char *names[] = { "any" };
	int groups[] = { 1 };
	struct metrics_pattern p = { .regex = "([0-9]+)", .step = 1, .nvalues = 1, .names = names,
				     .groups = groups };
	struct sink sk = { 0 };
	struct metrics_ingest_opts o = { .job_id = "P1", .nranks = 1, .patterns = &p,
					 .npatterns = 1, .write = count_write, .write_ctx = &sk,
					 .format = "dllogger" };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	static const char lines[] =
		"DLLL {\"timestamp\": \"1\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"train.loss\": 1}}\n"
		"epoch 7\n";
	metrics_ingest_lines(mi, 0, lines, strlen(lines));
	metrics_ingest_finish(mi);
	long long l, r, bad;
	metrics_ingest_counts(mi, &l, &r, &bad);
	CHECK_INT(l, 2);     /* the DLLL line and, with format: dllogger, the pattern's */
	CHECK_INT(r, 2);     /* train.loss; any = 7: not any = 0 or 1 from the DLLL line */
	CHECK_INT(bad, 0);
	CHECK(metrics_ingest_hint(mi) == NULL);
	metrics_ingest_free(mi);
}

static struct store *open_store(const char *job)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = (char *)job, .name = "t", .state = JOB_RUNNING,
			       .run_dir = "/tmp", .spec_json = "{}",
			       .created = 1700000000.0, .world_size = 1 };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	tc_err_release(&err);
	return st;
}

static char *show_text(struct store *st, const char *job)
{
	struct tc_err err = TC_ERR_INIT;
	struct job_row row = { 0 };
	struct metrics_job_summary sum;
	CHECK_INT(store_job_get(st, job, &row, &err), 0);
	CHECK_INT(metrics_job_summary(st, &row, &sum, &err), 0);
	json_t *j = metrics_job_summary_json(&sum);
	struct sbuf out = SBUF_INIT;
	metrics_job_summary_text(j, &out);
	json_decref(j);
	metrics_job_summary_release(&sum);
	job_row_release(&row);
	return sbuf_detach(&out);
}

TEST(no_record_gives_the_hint)
{
	struct store *st = open_store("P2");
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st,
					 .job_id = "P2", .nranks = 1 };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	static const char lines[] = "step 10 loss 0.53\nstep 20 loss 0.41\n";
	metrics_ingest_lines(mi, 0, lines, strlen(lines));
	metrics_ingest_finish(mi);
	CHECK(metrics_ingest_hint(mi) == metrics_none_hint);
	CHECK_CONTAINS(metrics_none_hint, "docs/metrics.md");
	CHECK_CONTAINS(metrics_none_hint, "metrics.patterns");
	metrics_ingest_free(mi);
	char *t = show_text(st, "P2");
	CHECK_CONTAINS(t, "metrics:   none recorded; no line was a metrics line");
	CHECK_CONTAINS(t, "docs/metrics.md");
	free(t);

	/* a job that printed nothing: no hint, nothing to explain */
	struct store *st2 = st;
	struct job_row row = { .id = "P3", .name = "t", .state = JOB_RUNNING, .run_dir = "/tmp",
			       .spec_json = "{}", .created = 1700000000.0, .world_size = 1 };
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_job_create(st2, &row, &err), 0);
	o.job_id = "P3";
	mi = metrics_ingest_new(&o);
	metrics_ingest_finish(mi);
	CHECK(metrics_ingest_hint(mi) == NULL);
	metrics_ingest_free(mi);
	t = show_text(st, "P3");
	CHECK_STR(t, "metrics:   none recorded\n");
	free(t);
	store_close(st);
}

TEST(patterns_give_records_and_no_hint)
{
	struct store *st = open_store("P4");
	struct spec *s = load_doc();
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st,
					 .job_id = "P4", .nranks = 1,
					 .patterns = s->metrics_patterns,
					 .npatterns = s->metrics_npatterns };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	static const char lines[] = "hello\nstep 10 loss 0.53\nstep 20 loss 0.41\n";
	metrics_ingest_lines(mi, 0, lines, strlen(lines));
	metrics_ingest_finish(mi);
	long long l, r, bad;
	metrics_ingest_counts(mi, &l, &r, &bad);
	CHECK_INT(l, 2);
	CHECK_INT(r, 2);
	CHECK(metrics_ingest_hint(mi) == NULL);
	metrics_ingest_free(mi);
	spec_free(s);
	char *t = show_text(st, "P4");
	CHECK_CONTAINS(t, "loss");
	CHECK(!strstr(t, "none recorded"));
	free(t);
	store_close(st);
}
