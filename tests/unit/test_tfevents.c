/*
 * test_tfevents.c -- the TensorBoard event writer: CRC32C vectors, record
 * framing and the protobuf fields, read back by a small decoder here.
 *
 * `test_tfevents write_for_reader` with TC_TFEVENTS_OUT=DIR writes the file
 * that tests/e2e/test_tfevents_reader.py reads with its own decoder; keep the
 * points in step with EXPECTED there.
 */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "metrics/tfevents.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>

static uint64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t varint(const unsigned char **p, const unsigned char *end)
{
	uint64_t v = 0;
	for (int shift = 0; *p < end; shift += 7) {
		unsigned char b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	CHECK(!"truncated varint");
	return 0;
}

struct ev {
	double wall;
	int64_t step;
	char version[32];
	char tag[64];
	float value;
	bool has_value;
};

/* Decode one Event with the fields the writer uses. */
static void decode(const unsigned char *p, size_t len, struct ev *e)
{
	const unsigned char *end = p + len;
	memset(e, 0, sizeof(*e));
	while (p < end) {
		uint64_t key = varint(&p, end);
		unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
		if (field == 1 && wire == 1) {
			uint64_t u = le(p, 8);
			memcpy(&e->wall, &u, 8);
			p += 8;
		} else if (field == 2 && wire == 0) {
			e->step = (int64_t)varint(&p, end);
		} else if (field == 3 && wire == 2) {
			uint64_t n = varint(&p, end);
			CHECK(n < sizeof(e->version));
			memcpy(e->version, p, n);
			p += n;
		} else if (field == 5 && wire == 2) {
			uint64_t n = varint(&p, end);
			const unsigned char *s = p, *send = p + n;
			p += n;
			CHECK(varint(&s, send) == (1 << 3 | 2)); /* Summary.value */
			uint64_t vn = varint(&s, send);
			CHECK(s + vn == send);
			while (s < send) {
				uint64_t k = varint(&s, send);
				if (k == (1 << 3 | 2)) {
					uint64_t tn = varint(&s, send);
					CHECK(tn < sizeof(e->tag));
					memcpy(e->tag, s, tn);
					s += tn;
				} else {
					CHECK(k == (2 << 3 | 5));
					uint32_t u = (uint32_t)le(s, 4);
					memcpy(&e->value, &u, 4);
					e->has_value = true;
					s += 4;
				}
			}
		} else if (field == 10 && wire == 2) { /* source_metadata: the first Event */
			uint64_t n = varint(&p, end);
			CHECK(n == 2 + strlen(TFEVENTS_WRITER) && p[0] == (1 << 3 | 2));
			CHECK(!memcmp(p + 2, TFEVENTS_WRITER, strlen(TFEVENTS_WRITER)));
			CHECK(e->version[0]);
			p += n;
		} else {
			CHECK(!"unexpected field");
		}
	}
	CHECK(p == end);
}

/* Read every record of path, checking lengths and both CRCs. */
static size_t read_events(const char *path, struct ev *evs, size_t max)
{
	struct sbuf sb = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	CHECK(read_file(path, &sb, &err) == 0);
	const unsigned char *p = (const unsigned char *)sb.buf, *end = p + sb.len;
	size_t n = 0;
	while (p < end) {
		CHECK(end - p >= 12);
		uint64_t len = le(p, 8);
		CHECK(le(p + 8, 4) == tfevents_mask_crc(tfevents_crc32c(0, p, 8)));
		p += 12;
		CHECK((uint64_t)(end - p) >= len + 4);
		CHECK(le(p + len, 4) == tfevents_mask_crc(tfevents_crc32c(0, p, len)));
		CHECK(n < max);
		decode(p, len, &evs[n++]);
		p += len + 4;
	}
	sbuf_release(&sb);
	return n;
}

static char *only_file(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *found = NULL;
	CHECK(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "events.out.tfevents.", 20)) {
			CHECK(!found);
			struct sbuf sb = SBUF_INIT;
			sbuf_addf(&sb, "%s/%s", dir, de->d_name);
			found = sbuf_detach(&sb);
		}
	closedir(d);
	CHECK(found);
	return found;
}

TEST(crc32c_vectors)
{
	CHECK_INT(tfevents_crc32c(0, "123456789", 9), 0xE3069283u);
	CHECK_INT(tfevents_crc32c(0, "", 0), 0);
	unsigned char buf[32];
	memset(buf, 0, 32);
	CHECK_INT(tfevents_crc32c(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, 32);
	CHECK_INT(tfevents_crc32c(0, buf, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	CHECK_INT(tfevents_crc32c(0, buf, 32), 0x46DD794Eu);
	/* incremental == one shot */
	CHECK_INT(tfevents_crc32c(tfevents_crc32c(0, "12345", 5), "6789", 4), 0xE3069283u);
	/* mask from TensorFlow's crc32c.h */
	CHECK_INT(tfevents_mask_crc(0), 0xa282ead8u);
	uint32_t c = 0xE3069283u;
	CHECK_INT(tfevents_mask_crc(c), (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST(write_and_read_back)
{
	struct tc_err err = TC_ERR_INIT;
	struct tfevents_writer *w;
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/tb/sub", test_tmpdir());
	CHECK(tfevents_open(dir.buf, 1700000000.25, &w, &err) == 0);
	CHECK_CONTAINS(tfevents_path(w), "/events.out.tfevents.1700000000.");
	CHECK(tfevents_add_scalar(w, "train/loss", 0, 2.5, 1700000001.0, &err) == 0);
	CHECK(tfevents_add_scalar(w, "train/loss", 10, NAN, 1700000002.0, &err) == 0);
	CHECK(tfevents_add_scalar(w, "neg", -7, -INFINITY, 1700000003.0, &err) == 0);
	CHECK(tfevents_add_scalar(w, "big", INT64_MAX, 0.1, 0, &err) == 0);
	CHECK(tfevents_flush(w, &err) == 0);
	char *path = only_file(dir.buf);
	CHECK(tfevents_close(w, &err) == 0);

	struct ev e[8];
	CHECK_INT(read_events(path, e, 8), 5);
	CHECK_STR(e[0].version, "brain.Event:2");
	CHECK(e[0].wall == 1700000000.25);
	CHECK(!e[0].has_value);
	CHECK_STR(e[1].tag, "train/loss");
	CHECK(e[1].step == 0 && e[1].value == 2.5f && e[1].wall == 1700000001.0);
	CHECK(e[2].step == 10 && isnan(e[2].value));
	CHECK_STR(e[3].tag, "neg");
	CHECK(e[3].step == -7 && isinf(e[3].value) && e[3].value < 0);
	CHECK(e[4].step == INT64_MAX && e[4].value == 0.1f);
	CHECK(fabs(e[4].wall - now_wall()) < 60); /* 0 = now */
	free(path);
	sbuf_release(&dir);
	tc_err_release(&err);
}

TEST(many_records_and_name_clash)
{
	struct tc_err err = TC_ERR_INIT;
	struct tfevents_writer *a, *b;
	const char *dir = test_tmpdir();
	CHECK(tfevents_open(dir, 1700000000, &a, &err) == 0);
	CHECK(tfevents_open(dir, 1700000000, &b, &err) == 0); /* same second */
	CHECK(strcmp(tfevents_path(a), tfevents_path(b)) != 0);
	CHECK_CONTAINS(tfevents_path(b), ".1");
	/* more than the 64 KiB buffer: flushes by itself */
	for (int i = 0; i < 5000; i++)
		CHECK(tfevents_add_scalar(a, "x", i, i * 0.5, 1700000000 + i, &err) == 0);
	char *pa = xstrdup(tfevents_path(a));
	CHECK(tfevents_close(a, &err) == 0);
	CHECK(tfevents_close(b, &err) == 0);
	CHECK(tfevents_close(NULL, &err) == 0);
	static struct ev e[5001];
	CHECK_INT(read_events(pa, e, 5001), 5001);
	CHECK(e[5000].step == 4999 && e[5000].value == 2499.5f);
	free(pa);
	tc_err_release(&err);
}

TEST(open_fails_cleanly)
{
	struct tc_err err = TC_ERR_INIT;
	struct tfevents_writer *w = (void *)1;
	CHECK(tfevents_open("/proc/no/such/dir", 0, &w, &err) < 0);
	CHECK(w == NULL);
	CHECK(err.msg != NULL);
	tc_err_release(&err);
}

/* The fixed points tests/e2e/test_tfevents_reader.py expects (EXPECTED). */
TEST(write_for_reader)
{
	static const struct {
		const char *tag;
		int64_t step;
		double value, wall;
	} pts[] = {
		{ "train/loss", 0, 2.5, 1700000000.5 },
		{ "train/loss", 1, 2.25, 1700000001.0 },
		{ "train.ips", 1, 512.0, 1700000001.0 },
		{ "train/loss", -3, NAN, 1700000002.0 },
		{ "inf", 2, INFINITY, 1700000003.0 },
		{ "big", 1099511627776LL, 0.001, 1700000004.0 },
		{ "\xc3\xbcn\xc3\xaf/tag", 5, -1.5, 1700000005.0 },
	};
	struct tc_err err = TC_ERR_INIT;
	struct tfevents_writer *w;
	const char *out = getenv("TC_TFEVENTS_OUT");
	CHECK(tfevents_open(out ? out : test_tmpdir(), 1700000000.0, &w, &err) == 0);
	for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++)
		CHECK(tfevents_add_scalar(w, pts[i].tag, pts[i].step, pts[i].value, pts[i].wall,
					  &err) == 0);
	printf("%s\n", tfevents_path(w));
	CHECK(tfevents_close(w, &err) == 0);
}

/* Tags of 100 bytes and more take the general encoder; both read back. */
TEST(long_and_short_tags)
{
	struct tfevents_writer *w;
	struct tc_err err = TC_ERR_INIT;
	char tag[300];
	CHECK_INT(tfevents_open(test_tmpdir(), 1700000000.0, &w, &err), 0);
	for (size_t len = 95; len < 300; len += 5) {
		memset(tag, 'a' + (int)(len % 26), len);
		tag[len] = '\0';
		CHECK_INT(tfevents_add_scalar(w, tag, (int64_t)len * 1000, 0.5, 1700000001.0, &err), 0);
	}
	struct sbuf path = SBUF_INIT;
	sbuf_adds(&path, tfevents_path(w));
	CHECK_INT(tfevents_close(w, &err), 0);
	struct sbuf data = SBUF_INIT;
	CHECK_INT(read_file(path.buf, &data, &err), 0);
	/* walk the records: every length and CRC must check out */
	size_t off = 0, records = 0;
	while (off < data.len) {
		uint64_t n = 0;
		for (int i = 0; i < 8; i++)
			n |= (uint64_t)(unsigned char)data.buf[off + i] << (8 * i);
		uint32_t c = 0;
		for (int i = 0; i < 4; i++)
			c |= (uint32_t)(unsigned char)data.buf[off + 8 + i] << (8 * i);
		CHECK(c == tfevents_mask_crc(tfevents_crc32c(0, data.buf + off, 8)));
		uint32_t d = 0;
		for (int i = 0; i < 4; i++)
			d |= (uint32_t)(unsigned char)data.buf[off + 12 + n + i] << (8 * i);
		CHECK(d == tfevents_mask_crc(tfevents_crc32c(0, data.buf + off + 12, n)));
		/* the tag is in there, whole */
		if (records) {
			size_t len = 95 + 5 * (records - 1);
			memset(tag, 'a' + (int)(len % 26), len);
			tag[len] = '\0';
			CHECK(memmem(data.buf + off + 12, n, tag, len) != NULL);
		}
		off += 12 + n + 4;
		records++;
	}
	CHECK_INT(off, data.len);
	CHECK_INT(records, 1 + (300 - 95) / 5);
	sbuf_release(&path);
	sbuf_release(&data);
	tc_err_release(&err);
}
