/*
 * test_tfread.c -- the TensorBoard event-file reader: the writer's files
 * read back, scalars as simple_value and as tensors, every wire type
 * skipped, records fed a byte at a time, and corrupt or cut records
 * counted without losing the others; and the files as the supervisor's
 * ingestion follows them (which ranks, never trainctl's own).
 */
#include "test.h"

#include "core/enc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "metrics/ingest.h"
#include "metrics/tfevents.h"
#include "metrics/tfread.h"
#include "store/store.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

/* ---- a small protobuf writer, independent of tfevents.c ---- */

static void pb_varint(struct sbuf *sb, uint64_t v)
{
	unsigned char tmp[VARINT_MAX];
	sbuf_add(sb, tmp, varint_put(tmp, v));
}

static void pb_key(struct sbuf *sb, unsigned field, unsigned wire)
{
	pb_varint(sb, (uint64_t)field << 3 | wire);
}

static void pb_le(struct sbuf *sb, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		sbuf_addch(sb, (char)(v >> (8 * i)));
}

static void pb_bytes(struct sbuf *sb, unsigned field, const void *p, size_t n)
{
	pb_key(sb, field, 2);
	pb_varint(sb, n);
	sbuf_add(sb, p, n);
}

static void pb_msg(struct sbuf *sb, unsigned field, struct sbuf *inner)
{
	pb_bytes(sb, field, inner->buf, inner->len);
	sbuf_release(inner);
}

static void pb_f32(struct sbuf *sb, unsigned field, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	pb_key(sb, field, 5);
	pb_le(sb, u, 4);
}

static void pb_f64(struct sbuf *sb, unsigned field, double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	pb_key(sb, field, 1);
	pb_le(sb, u, 8);
}

/* Frame data as one record onto out. */
static void record(struct sbuf *out, const struct sbuf *data)
{
	struct sbuf h = SBUF_INIT;
	pb_le(&h, data->len, 8);
	uint32_t hc = tfevents_mask_crc(tfevents_crc32c(0, h.buf, 8));
	pb_le(&h, hc, 4);
	sbuf_add(out, h.buf, h.len);
	sbuf_add(out, data->buf, data->len);
	struct sbuf t = SBUF_INIT;
	pb_le(&t, tfevents_mask_crc(tfevents_crc32c(0, data->buf, data->len)), 4);
	sbuf_add(out, t.buf, t.len);
	sbuf_release(&h);
	sbuf_release(&t);
}

/* An Event {wall, step, summary {value {tag, simple_value}}} record onto out. */
static void simple_record(struct sbuf *out, double wall, int64_t step, const char *tag, float v)
{
	struct sbuf ev = SBUF_INIT, sum = SBUF_INIT, val = SBUF_INIT;
	pb_bytes(&val, 1, tag, strlen(tag));
	pb_f32(&val, 2, v);
	pb_msg(&sum, 1, &val);
	pb_f64(&ev, 1, wall);
	pb_key(&ev, 2, 0);
	pb_varint(&ev, (uint64_t)step);
	pb_msg(&ev, 5, &sum);
	record(out, &ev);
	sbuf_release(&ev);
}

/* Every item of a stream fed whole (or a byte at a time): events into a text, corrupt counted. */
static void read_all(const struct sbuf *in, bool bytewise, struct sbuf *text, int *corrupt)
{
	struct tfread *r = tfread_new();
	struct tfread_event ev;
	enum tfread_result res;
	*corrupt = 0;
	size_t step = bytewise ? 1 : in->len;
	for (size_t at = 0; at <= in->len; at += step) {
		bool end = at >= in->len;
		if (!end)
			tfread_feed(r, in->buf + at, at + step <= in->len ? step : in->len - at);
		while ((res = tfread_next(r, end, &ev)) != TFREAD_MORE) {
			if (res == TFREAD_CORRUPT) {
				(*corrupt)++;
				sbuf_addf(text, "corrupt@%llu;",
					  (unsigned long long)tfread_corrupt_offset(r));
				CHECK(*tfread_reason(r));
				continue;
			}
			if (ev.file_version)
				sbuf_addf(text, "v=%s%s;", ev.file_version, ev.trainctl ? ",ours" : "");
			for (size_t i = 0; i < ev.nscalars; i++)
				sbuf_addf(text, "%s@%lld=%g,%.1f;", ev.scalars[i].tag,
					  (long long)ev.step, ev.scalars[i].value, ev.wall_time);
		}
		if (end)
			break;
	}
	tfread_free(r);
}

static void check_stream(const struct sbuf *in, const char *want, int want_corrupt)
{
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct sbuf text = SBUF_INIT;
		int corrupt;
		read_all(in, bytewise, &text, &corrupt);
		CHECK_STR(text.buf ? text.buf : "", want);
		CHECK_INT(corrupt, want_corrupt);
		sbuf_release(&text);
	}
}

TEST(writer_files_read_back_marked)
{
	char tmpl[] = "/tmp/tc-tfread-XXXXXX";
	CHECK(mkdtemp(tmpl));
	struct tfevents_writer *w = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK(tfevents_open(tmpl, 1700000000.0, &w, &err) == 0);
	CHECK(tfevents_add_scalar(w, "train.loss", 10, 0.5, 1700000001.5, &err) == 0);
	CHECK(tfevents_add_scalar(w, "train.loss", 20, 0.25, 1700000002.5, &err) == 0);
	char tag[300];
	memset(tag, 'x', sizeof(tag) - 1); /* the writer's long-tag road */
	tag[sizeof(tag) - 1] = '\0';
	CHECK(tfevents_add_scalar(w, tag, 0, -2, 1700000003.0, &err) == 0);
	struct sbuf path = SBUF_INIT;
	sbuf_adds(&path, tfevents_path(w));
	CHECK(tfevents_close(w, &err) == 0);
	struct sbuf raw = SBUF_INIT;
	CHECK(read_file(path.buf, &raw, &err) == 0);
	struct sbuf want = SBUF_INIT;
	sbuf_addf(&want, "v=brain.Event:2,ours;train.loss@10=0.5,1700000001.5;"
			 "train.loss@20=0.25,1700000002.5;%s@0=-2,1700000003.0;", tag);
	check_stream(&raw, want.buf, 0);
	CHECK(unlink(path.buf) == 0);
	CHECK(rmdir(tmpl) == 0);
	sbuf_release(&want);
	sbuf_release(&raw);
	sbuf_release(&path);
	tc_err_release(&err);
}

TEST(scalars_as_tensors)
{
	struct sbuf s = SBUF_INIT, ev, sum, val, ten, md, pd;
	double d = 2.5;
	int64_t i64 = -7;
	/* one Event, many Values: only the scalar tensors count */
	sbuf_init(&ev, 0);
	sbuf_init(&sum, 0);
	/* float_val packed, plugin "scalars" */
	sbuf_init(&val, 0), sbuf_init(&ten, 0), sbuf_init(&md, 0), sbuf_init(&pd, 0);
	pb_bytes(&val, 1, "f", 1);
	pb_key(&ten, 1, 0), pb_varint(&ten, 1); /* DT_FLOAT */
	pb_key(&ten, 5, 2), pb_varint(&ten, 4), pb_le(&ten, 0x3fc00000, 4); /* 1.5 */
	pb_msg(&val, 8, &ten);
	pb_bytes(&pd, 1, "scalars", 7);
	pb_msg(&md, 1, &pd);
	pb_msg(&val, 9, &md);
	pb_msg(&sum, 1, &val);
	/* double_val not packed, no plugin */
	sbuf_init(&val, 0), sbuf_init(&ten, 0);
	pb_key(&ten, 1, 0), pb_varint(&ten, 2); /* DT_DOUBLE */
	pb_f64(&ten, 6, d);
	pb_msg(&val, 8, &ten);
	pb_bytes(&val, 1, "d", 1); /* the tag after the tensor: any order */
	pb_msg(&sum, 1, &val);
	/* int64 in tensor_content */
	sbuf_init(&val, 0), sbuf_init(&ten, 0);
	pb_bytes(&val, 1, "i", 1);
	pb_key(&ten, 1, 0), pb_varint(&ten, 9); /* DT_INT64 */
	pb_bytes(&ten, 4, &i64, 8);
	pb_msg(&val, 8, &ten);
	pb_msg(&sum, 1, &val);
	/* int32 in int_val (a negative int32 is a 10-byte varint) */
	sbuf_init(&val, 0), sbuf_init(&ten, 0);
	pb_bytes(&val, 1, "n", 1);
	pb_key(&ten, 1, 0), pb_varint(&ten, 3); /* DT_INT32 */
	pb_key(&ten, 7, 0), pb_varint(&ten, (uint64_t)(int64_t)-3);
	pb_msg(&val, 8, &ten);
	pb_msg(&sum, 1, &val);
	/* two values: not a scalar */
	sbuf_init(&val, 0), sbuf_init(&ten, 0);
	pb_bytes(&val, 1, "two", 3);
	pb_key(&ten, 1, 0), pb_varint(&ten, 1);
	pb_f32(&ten, 5, 1), pb_f32(&ten, 5, 2);
	pb_msg(&val, 8, &ten);
	pb_msg(&sum, 1, &val);
	/* another plugin's one-value tensor: not a scalar */
	sbuf_init(&val, 0), sbuf_init(&ten, 0), sbuf_init(&md, 0), sbuf_init(&pd, 0);
	pb_bytes(&val, 1, "h", 1);
	pb_key(&ten, 1, 0), pb_varint(&ten, 1);
	pb_f32(&ten, 5, 9);
	pb_msg(&val, 8, &ten);
	pb_bytes(&pd, 1, "histograms", 10);
	pb_msg(&md, 1, &pd);
	pb_msg(&val, 9, &md);
	pb_msg(&sum, 1, &val);
	/* a string tensor: not a number */
	sbuf_init(&val, 0), sbuf_init(&ten, 0);
	pb_bytes(&val, 1, "s", 1);
	pb_key(&ten, 1, 0), pb_varint(&ten, 7); /* DT_STRING */
	pb_bytes(&ten, 8, "abc", 3);
	pb_msg(&val, 8, &ten);
	pb_msg(&sum, 1, &val);
	/* an image value: skipped */
	sbuf_init(&val, 0), sbuf_init(&ten, 0);
	pb_bytes(&val, 1, "img", 3);
	pb_bytes(&ten, 4, "\x89PNG", 4);
	pb_msg(&val, 4, &ten);
	pb_msg(&sum, 1, &val);
	pb_f64(&ev, 1, 100.0);
	pb_key(&ev, 2, 0);
	pb_varint(&ev, 3);
	pb_msg(&ev, 5, &sum);
	record(&s, &ev);
	sbuf_release(&ev);
	check_stream(&s, "f@3=1.5,100.0;d@3=2.5,100.0;i@3=-7,100.0;n@3=-3,100.0;", 0);
	sbuf_release(&s);
}

TEST(unknown_fields_of_every_wire_type_are_skipped)
{
	struct sbuf s = SBUF_INIT, ev = SBUF_INIT, sum = SBUF_INIT, val = SBUF_INIT;
	sbuf_init(&ev, 0), sbuf_init(&sum, 0), sbuf_init(&val, 0);
	pb_key(&val, 15, 0), pb_varint(&val, 1ull << 60);  /* varint */
	pb_bytes(&val, 1, "loss", 4);
	pb_key(&val, 16, 1), pb_le(&val, 42, 8);           /* fixed64 */
	pb_key(&val, 17, 5), pb_le(&val, 42, 4);           /* fixed32 */
	pb_bytes(&val, 7, "node", 4);                      /* node_name: length-delimited */
	pb_f32(&val, 2, 0.75f);
	pb_msg(&sum, 1, &val);
	pb_key(&sum, 2, 0), pb_varint(&sum, 5);
	pb_key(&ev, 20, 5), pb_le(&ev, 1, 4);
	pb_f64(&ev, 1, 7.0);
	pb_bytes(&ev, 6, "log message", 11); /* Event.log_message and friends */
	pb_key(&ev, 2, 0);
	pb_varint(&ev, (uint64_t)(int64_t)-4); /* a negative step */
	pb_msg(&ev, 5, &sum);
	pb_key(&ev, 4, 1), pb_le(&ev, 0, 8);
	record(&s, &ev);
	check_stream(&s, "loss@-4=0.75,7.0;", 0);

	/* a group (wire 3) or a field that runs past its message: the Event is corrupt */
	struct sbuf bad = SBUF_INIT;
	sbuf_init(&bad, 0);
	pb_key(&bad, 9, 3);
	struct sbuf s2 = SBUF_INIT;
	record(&s2, &bad);
	sbuf_reset(&bad);
	pb_key(&bad, 5, 2), pb_varint(&bad, 50), sbuf_adds(&bad, "short");
	record(&s2, &bad);
	simple_record(&s2, 1.0, 1, "ok", 1);
	check_stream(&s2, "corrupt@0;corrupt@17;ok@1=1,1.0;", 2);
	sbuf_release(&bad);
	sbuf_release(&s2);
	sbuf_release(&ev);
	sbuf_release(&s);
}

TEST(corrupt_records_are_counted_and_the_rest_kept)
{
	struct sbuf s = SBUF_INIT;
	simple_record(&s, 1.0, 1, "a", 1);
	size_t second = s.len;
	simple_record(&s, 2.0, 2, "a", 2);
	size_t third = s.len;
	simple_record(&s, 3.0, 3, "a", 3);
	simple_record(&s, 4.0, 4, "a", 4);
	/* a flipped data byte of the second record: its length still holds */
	s.buf[second + 14] ^= 0x40;
	/* a flipped length byte of the third: the reader looks for the next header */
	s.buf[third] ^= 0x01;
	struct sbuf want = SBUF_INIT;
	sbuf_addf(&want, "a@1=1,1.0;corrupt@%zu;corrupt@%zu;a@4=4,4.0;", second, third);
	check_stream(&s, want.buf, 2);
	sbuf_release(&want);

	/* garbage first, then records: found again */
	struct sbuf g = SBUF_INIT;
	sbuf_adds(&g, "this is not an event file at all\n");
	simple_record(&g, 5.0, 5, "b", 5);
	check_stream(&g, "corrupt@0;b@5=5,5.0;", 1);
	sbuf_release(&g);
	sbuf_release(&s);
}

TEST(a_length_over_the_limit_is_corrupt)
{
	struct sbuf s = SBUF_INIT, h = SBUF_INIT;
	sbuf_init(&h, 0);
	pb_le(&h, (uint64_t)TFREAD_MAX_RECORD + 1, 8);
	pb_le(&h, tfevents_mask_crc(tfevents_crc32c(0, h.buf, 8)), 4);
	sbuf_add(&s, h.buf, h.len);
	simple_record(&s, 1.0, 1, "after", 1);
	check_stream(&s, "corrupt@0;after@1=1,1.0;", 1);
	struct tfread *r = tfread_new();
	struct tfread_event ev;
	tfread_feed(r, s.buf, s.len);
	CHECK_INT(tfread_next(r, false, &ev), TFREAD_CORRUPT);
	CHECK_CONTAINS(tfread_reason(r), "over the limit");
	tfread_free(r);
	sbuf_release(&h);
	sbuf_release(&s);
}

TEST(a_cut_record_is_waited_for_until_the_end)
{
	struct sbuf s = SBUF_INIT;
	simple_record(&s, 1.0, 1, "a", 1);
	size_t whole = s.len;
	simple_record(&s, 2.0, 2, "a", 2);
	for (size_t cut = whole + 1; cut < s.len; cut += 5) {
		struct tfread *r = tfread_new();
		struct tfread_event ev;
		tfread_feed(r, s.buf, cut);
		CHECK_INT(tfread_next(r, false, &ev), TFREAD_EVENT);
		CHECK_INT(tfread_next(r, false, &ev), TFREAD_MORE); /* still being written */
		CHECK_INT(tfread_next(r, false, &ev), TFREAD_MORE);
		CHECK_INT(tfread_next(r, true, &ev), TFREAD_CORRUPT); /* the job ended */
		CHECK_CONTAINS(tfread_reason(r), "truncated");
		CHECK_INT(tfread_corrupt_offset(r), whole);
		CHECK_INT(tfread_next(r, true, &ev), TFREAD_MORE);
		tfread_free(r);
	}
	/* the rest arrives: the record is whole after all */
	struct tfread *r = tfread_new();
	struct tfread_event ev;
	tfread_feed(r, s.buf, whole + 3);
	CHECK_INT(tfread_next(r, false, &ev), TFREAD_EVENT);
	CHECK_INT(tfread_next(r, false, &ev), TFREAD_MORE);
	tfread_feed(r, s.buf + whole + 3, s.len - whole - 3);
	CHECK_INT(tfread_next(r, false, &ev), TFREAD_EVENT);
	CHECK_INT(ev.step, 2);
	CHECK_INT(ev.offset, whole);
	CHECK_INT(tfread_next(r, true, &ev), TFREAD_MORE);
	tfread_free(r);
	sbuf_release(&s);
}

/* ---- followed by the supervisor's ingestion (metrics/ingest.h note 6) ---- */

static size_t stored;

static int keep_count(void *ctx, struct store_mbatch *b, struct tc_err *err)
{
	(void)ctx, (void)err;
	stored += store_mbatch_pending(b);
	store_mbatch_drop(b);
	return 0;
}

static void write_bytes(const char *path, const struct sbuf *sb)
{
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(sb->buf, 1, sb->len, f) == sb->len && fclose(f) == 0);
}

/* Two ranks' files (rank-0/, rank1/) and trainctl's own: what ingestion with own ranks takes. */
static void ingest_ranks(const int *ranks, size_t nranks, long long want_lines, size_t want_points)
{
	char tmpl[] = "/tmp/tc-tfread-XXXXXX";
	CHECK(mkdtemp(tmpl));
	struct sbuf p = SBUF_INIT, a = SBUF_INIT, b = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_addf(&p, "%s/run/rank-0", tmpl);
	CHECK(mkdir_p(p.buf, &err) == 0);
	simple_record(&a, 1.0, 1, "loss", 1);
	simple_record(&a, 2.0, 2, "loss", 2);
	sbuf_adds(&p, "/events.out.tfevents.1.h");
	write_bytes(p.buf, &a);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/run/rank1", tmpl);
	CHECK(mkdir_p(p.buf, &err) == 0);
	simple_record(&b, 1.0, 1, "loss", 3);
	sbuf_adds(&p, "/events.out.tfevents.1.h");
	write_bytes(p.buf, &b);
	/* trainctl's own file: marked, so never read */
	struct tfevents_writer *w = NULL;
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/rank-0", tmpl);
	CHECK(tfevents_open(p.buf, 0, &w, &err) == 0);
	CHECK(tfevents_add_scalar(w, "loss", 5, 5, 0, &err) == 0);
	CHECK(tfevents_close(w, &err) == 0);

	const char *dirs[] = { tmpl };
	struct metrics_ingest_opts o = {
		.write = keep_count, .job_id = "J", .tb_dirs = dirs, .ntb_dirs = 1, .nranks = 2,
		.since = 1.0, .node_ranks = ranks, .nnode_ranks = nranks,
	};
	stored = 0;
	struct metrics_ingest *mi = metrics_ingest_new(&o);
	metrics_ingest_finish(mi);
	long long lines, records, malformed;
	metrics_ingest_counts(mi, &lines, &records, &malformed);
	CHECK_INT(lines, want_lines);
	CHECK_INT(records, want_lines);
	CHECK_INT(malformed, 0);
	CHECK_INT(stored >= want_points, 1); /* points, and a counters row per rank */
	CHECK_INT(stored <= want_points + 2, 1);
	metrics_ingest_free(mi);
	sbuf_reset(&p);
	sbuf_addf(&p, "rm -rf '%s'", tmpl);
	CHECK(system(p.buf) == 0);
	sbuf_release(&p);
	sbuf_release(&a);
	sbuf_release(&b);
	tc_err_release(&err);
}

TEST(ingest_reads_the_ranks_of_this_node)
{
	ingest_ranks(NULL, 0, 3, 3); /* one machine: every rank */
	int one[] = { 1 };
	ingest_ranks(one, 1, 1, 1); /* a node with rank 1 only */
	int zero[] = { 0 };
	ingest_ranks(zero, 1, 2, 2);
}
