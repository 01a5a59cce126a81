/* test_metrics_store.c -- stored metrics: batches in and out of the store,
 * live ingestion (seq, ranks, malformed counts), the job summary, listing
 * with downsampling, and the TensorBoard export. */
#include "test.h"
#include "ingest_store.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/ingest.h"
#include "metrics/query.h"
#include "store/store.h"

#include <dirent.h>
#include <math.h>

static struct store *open_store(const char *job, const char *spec_json)
{
	struct store *st = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(store_open(test_tmpdir(), &st, &err), 0);
	struct job_row row = { .id = (char *)job, .name = "t", .state = JOB_RUNNING,
			       .run_dir = "/tmp", .spec_json = (char *)spec_json,
			       .created = 1700000000.0, .world_size = 2 };
	CHECK_INT(store_job_create(st, &row, &err), 0);
	tc_err_release(&err);
	return st;
}

TEST(batch_round_trip)
{
	struct store *st = open_store("J1", "{}");
	struct tc_err err = TC_ERR_INIT;
	struct store_mbatch *b = store_mbatch_new("J1");
	struct store_mpoint p = { STORE_MPOINT, 1, 0, 10, "[0, 10]", 2.5, NULL, 1700000001.25 };
	store_mbatch_point(b, 0, "train.loss", &p);
	p.seq = 2, p.value = NAN, p.step = "[0, 11]";
	store_mbatch_point(b, 0, "train.loss", &p);
	p.kind = STORE_MSUMMARY, p.seq = -5, p.epoch = -1, p.iter = -1, p.value = -INFINITY;
	p.step = "[]";
	store_mbatch_point(b, 1, "train.loss", &p);
	p.kind = STORE_MEPOCH, p.text = "n/a", p.step = "[3]";
	store_mbatch_point(b, 1, "note", &p);
	store_mbatch_param(b, 0, "lr", "0.1");
	store_mbatch_param(b, 0, "lr", "0.2"); /* the later value wins */
	store_mbatch_meta(b, "train.loss", "GOAL", "MINIMIZE");
	store_mbatch_counters(b, 1, 7, 9, 2, "unterminated JSON");
	CHECK_INT(store_mbatch_pending(b), 4);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	CHECK_INT(store_mbatch_pending(b), 0);
	/* a second chunk of the same series */
	p = (struct store_mpoint){ STORE_MPOINT, 3, 1, 1, "[1, 1]", 1.5, NULL, 1700000009.0 };
	store_mbatch_point(b, 0, "train.loss", &p);
	CHECK_INT(store_mbatch_write(st, b, &err), 0);

	struct store_mseries *v;
	size_t n;
	CHECK_INT(store_metric_series(st, "J1", NULL, -1, &v, &n, &err), 0);
	CHECK_INT(n, 3); /* note/1, train.loss/0, train.loss/1 */
	CHECK_STR(v[0].metric, "note");
	CHECK_STR(v[0].v[0].text, "n/a");
	CHECK(isnan(v[0].v[0].value));
	CHECK_STR(v[1].metric, "train.loss");
	CHECK_INT(v[1].rank, 0);
	CHECK_INT(v[1].n, 3);
	CHECK(v[1].v[0].value == 2.5 && v[1].v[0].wall_time == 1700000001.25);
	CHECK_STR(v[1].v[0].step, "[0, 10]");
	CHECK_INT(v[1].v[0].iter, 10);
	CHECK(isnan(v[1].v[1].value));
	CHECK(v[1].v[2].value == 1.5 && v[1].v[2].seq == 3);
	CHECK_INT(v[2].v[0].seq, -5);
	CHECK_INT(v[2].v[0].epoch, -1);
	CHECK(isinf(v[2].v[0].value) && v[2].v[0].value < 0);
	CHECK_INT(v[2].v[0].kind, STORE_MSUMMARY);
	store_mseries_free(v, n);
	CHECK_INT(store_metric_series(st, "J1", "train.loss", 1, &v, &n, &err), 0);
	CHECK_INT(n, 1);
	store_mseries_free(v, n);

	struct store_mkv *kv;
	CHECK_INT(store_metric_params(st, "J1", &kv, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(kv[0].value, "0.2");
	store_mkv_free(kv, n);
	CHECK_INT(store_metric_meta(st, "J1", &kv, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_STR(kv[0].key, "GOAL");
	store_mkv_free(kv, n);
	struct store_mcount *c;
	CHECK_INT(store_metric_counters(st, "J1", &c, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_INT(c[0].malformed, 2);
	CHECK_STR(c[0].last_error, "unterminated JSON");
	store_mcount_free(c, n);
	store_mbatch_free(b);
	store_close(st);
	tc_err_release(&err);
}

TEST(failed_write_keeps_points)
{
	struct store *st = open_store("J2", "{}");
	struct tc_err err = TC_ERR_INIT;
	struct store_mbatch *b = store_mbatch_new("no-such-job"); /* foreign key fails */
	struct store_mpoint p = { STORE_MPOINT, 1, 0, 1, "[0, 1]", 1.0, NULL, 1.0 };
	store_mbatch_point(b, 0, "x", &p);
	CHECK(store_mbatch_write(st, b, &err) < 0);
	CHECK_INT(store_mbatch_pending(b), 1);
	store_mbatch_drop(b);
	CHECK_INT(store_mbatch_pending(b), 0);
	store_mbatch_free(b);
	store_close(st);
	tc_err_release(&err);
}

static int warnings;
static void count_warn(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
	warnings++;
}

static const char lines0[] =
	"hello\n"
	"DLLL {\"type\": \"METADATA\", \"metric\": \"train.loss\", \"metadata\": {\"GOAL\": \"MINIMIZE\"}}\n"
	"DLLL {\"type\": \"LOG\", \"step\": \"PARAMETER\", \"data\": {\"lr\": 0.1}}\n"
	"DLLL {\"timestamp\": \"100\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"train.loss\": 3, \"train.ips\": 10}}\n"
	"DLLL {\"timestamp\": \"101\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"lr\": 0.5}}\n"
	"DLLL {\"timestamp\": \"102\", \"type\": \"LOG\", \"step\": [0, 2], \"data\": {\"train.loss\": 2, \"train.ips\": 20}}\n"
	"DLLL {\"timestamp\": \"103\", \"type\": \"LOG\", \"step\": [0, 3], \"data\": {\"train.loss\": 1, \"train.ips\": 40}}\n"
	"DLLL {\"timestamp\": \"104\", \"type\": \"LOG\", \"step\": [0], \"data\": {\"val.acc\": 0.9}}\n"
	"DLLL {\"type\": \"LOG\", \"step\": [0, 4], \"data\": {\"train.loss\": \n";
static const char lines1[] =
	"TCAPPDLL {\"timestamp\": \"5\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'rank': '3', 'train.ips': '7'}\"}\n"
	"DLLL {\"timestamp\": \"200\", \"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"train.ips\": 100}}\n"
	"DLLL {\"timestamp\": \"201\", \"type\": \"LOG\", \"step\": [0, 2], \"data\": {\"train.ips\": 300}}\n";

TEST(ingest_summary_export)
{
	struct store *st = open_store("J3", "{\"metrics\": {\"warmup_steps\": 1, \"accuracy\": \"val.acc\"}}");
	struct tc_err err = TC_ERR_INIT;
	struct sbuf tb = SBUF_INIT, out = SBUF_INIT;
	sbuf_addf(&tb, "%s/tb", test_tmpdir());
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st,
					 .job_id = "J3", .tb_dir = tb.buf, .nranks = 2,
					 .warn = count_warn };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	/* lines arrive in pieces, as the supervisor hands them over */
	metrics_ingest_lines(mi, 0, lines0, 40 + strcspn(lines0 + 40, "\n") + 1);
	size_t first = 40 + strcspn(lines0 + 40, "\n") + 1;
	metrics_ingest_lines(mi, 0, lines0 + first, strlen(lines0) - first);
	metrics_ingest_lines(mi, 1, lines1, strlen(lines1));
	CHECK(metrics_ingest_tick(mi, now_mono_ms()) >= 0);
	metrics_ingest_finish(mi);
	long long l, r, m;
	metrics_ingest_counts(mi, &l, &r, &m);
	CHECK_INT(l, 10);
	CHECK_INT(m, 1);
	metrics_ingest_free(mi);
	CHECK_INT(warnings, 0);

	struct job_row j = { 0 };
	CHECK_INT(store_job_get(st, "J3", &j, &err), 0);
	struct metrics_job_summary s;
	CHECK_INT(metrics_job_summary(st, &j, &s, &err), 0);
	/* rank 0: ips 20, 40 after 1 warm-up step; rank 1: 300; rank 3: no
	 * second step, so nothing after warm-up */
	CHECK_INT(s.nranks, 3);
	CHECK(s.ranks[0].throughput == 30.0);
	CHECK(s.ranks[1].throughput == 300.0);
	CHECK(isnan(s.ranks[2].throughput));
	CHECK_INT(s.ranks[2].rank, 3);
	CHECK(s.throughput == 330.0);
	CHECK(s.accuracy == 0.9);
	CHECK_INT(s.malformed, 1);
	CHECK_INT(s.ranks[0].malformed, 1);
	CHECK_INT(s.ranks[0].lines, 7);
	const struct metrics_metric_sum *loss = NULL;
	for (size_t i = 0; i < s.nmetrics; i++)
		if (!strcmp(s.metrics[i].name, "train.loss"))
			loss = &s.metrics[i];
	CHECK(loss && loss->last == 1 && loss->best == 1 && loss->n == 3);
	CHECK_STR(loss->best_step, "[0, 3]");
	json_t *js = metrics_job_summary_json(&s);
	CHECK(json_real_value(json_object_get(js, "throughput")) == 330.0);
	metrics_job_summary_text(js, &out);
	CHECK_CONTAINS(out.buf, "throughput 330.0 samples/s (sum of 2 ranks, warm-up 1 steps)");
	CHECK_CONTAINS(out.buf, "malformed  1 line; rank 0: 1");
	json_decref(js);
	metrics_job_summary_release(&s);

	/* seq: "[0, 1]" twice in a row is one step; epoch records carry the count */
	struct store_mseries *v;
	size_t n;
	CHECK_INT(store_metric_series(st, "J3", "lr", 0, &v, &n, &err), 0);
	CHECK_INT(n, 1);
	CHECK_INT(v[0].v[0].seq, 1);
	store_mseries_free(v, n);
	CHECK_INT(store_metric_series(st, "J3", "val.acc", 0, &v, &n, &err), 0);
	CHECK_INT(v[0].v[0].seq, 3);
	CHECK_INT(v[0].v[0].kind, STORE_MEPOCH);
	store_mseries_free(v, n);

	/* live event files: one folder per rank, rank 3 from the line's key */
	struct sbuf d = SBUF_INIT;
	sbuf_addf(&d, "%s/rank-3", tb.buf);
	CHECK(is_dir(d.buf));
	sbuf_reset(&d);
	sbuf_addf(&d, "%s/export", test_tmpdir());
	size_t nf, np;
	CHECK_INT(metrics_export_tb(st, "J3", d.buf, &nf, &np, &err), 0);
	CHECK_INT(nf, 3);
	CHECK_INT(np, 11); /* 3+3 ips/loss, 1 val.acc (rank 0), 2 (rank 1), 1 (rank 3), lr */
	sbuf_release(&d);
	job_row_release(&j);
	sbuf_release(&tb);
	sbuf_release(&out);
	store_close(st);
	tc_err_release(&err);
}

struct collect {
	double min, max;
	size_t n;
	long long last_seq;
	bool sorted;
};

static void collect(void *ctx, const struct metrics_point *pt)
{
	struct collect *c = ctx;
	if (!c->n || pt->p->value < c->min)
		c->min = pt->p->value;
	if (!c->n || pt->p->value > c->max)
		c->max = pt->p->value;
	if (c->n && pt->p->seq <= c->last_seq)
		c->sorted = false;
	c->last_seq = pt->p->seq;
	c->n++;
}

TEST(points_downsampled_keep_spike)
{
	struct store *st = open_store("J4", "{}");
	struct tc_err err = TC_ERR_INIT;
	struct store_mbatch *b = store_mbatch_new("J4");
	for (int i = 1; i <= 5000; i++) {
		struct store_mpoint p = { STORE_MPOINT, i, 0, i, "[0, i]", 1.0 + (i % 7) * 0.01,
					  NULL, i };
		if (i == 3217)
			p.value = 99.0;
		if (i == 4000)
			p.value = -5.0;
		store_mbatch_point(b, 0, "loss", &p);
	}
	CHECK_INT(store_mbatch_write(st, b, &err), 0);
	struct collect c = { 0, 0, 0, 0, true };
	size_t count;
	CHECK_INT(metrics_job_points(st, "J4", "loss", 0, 100, collect, &c, &count, &err), 0);
	CHECK(count <= 100 && count == c.n && count > 10);
	CHECK(c.max == 99.0 && c.min == -5.0 && c.sorted);
	c = (struct collect){ 0, 0, 0, 0, true };
	CHECK_INT(metrics_job_points(st, "J4", NULL, -1, 0, collect, &c, &count, &err), 0);
	CHECK_INT(count, 5000);
	store_mbatch_free(b);
	store_close(st);
	tc_err_release(&err);
}

/* A database that refuses the points: one warning, no busy loop, no crash. */
TEST(ingest_store_refuses)
{
	struct store *st = open_store("J5", "{}");
	warnings = 0;
	struct metrics_ingest_opts o = { .write = ingest_to_store, .write_ctx = st,
					 .job_id = "not-a-job", .warn = count_warn,
					 .flush_ms = 1 };
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	metrics_ingest_lines(mi, 0, lines1, strlen(lines1));
	int64_t now = now_mono_ms() + 10;
	CHECK(metrics_ingest_tick(mi, now) >= 0);
	CHECK_INT(warnings, 1);
	/* backing off: the next wake-up is seconds away, not 0 */
	CHECK(metrics_ingest_tick(mi, now + 1) > 1000);
	metrics_ingest_lines(mi, 1, lines1, strlen(lines1));
	metrics_ingest_finish(mi);
	CHECK_INT(warnings, 1);
	metrics_ingest_free(mi);
	store_close(st);
}

/* The x of a point: a single logged step number, else seq (store.h). */
TEST(point_x_is_the_logged_step)
{
	struct store_mpoint p = { STORE_MPOINT, 3, -1, 60, "60", 1.0, NULL, 0 };
	CHECK_INT(store_mpoint_x(&p), 60); /* `step 60` */
	p.epoch = 2, p.iter = 5, p.step = "[2, 5]";
	CHECK_INT(store_mpoint_x(&p), 3);  /* a pair: its iteration may restart each epoch */
	p.epoch = -1, p.iter = -1, p.step = "1.0";
	CHECK_INT(store_mpoint_x(&p), 3);  /* no integer step */
}
