/*
 * tfevents.c -- TensorBoard event-file writer: record framing with masked
 * CRC32C and the few protobuf fields of Event/Summary/Value; see tfevents.h.
 */
#include "metrics/tfevents.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLUSH_AT (64 * 1024)

struct tfevents_writer {
	int fd;
	char *path;
	struct sbuf pending; /* framed records not yet written */
	struct sbuf ev;      /* scratch: one encoded Event */
	struct sbuf sum;     /* scratch: its Summary */
	struct sbuf val;     /* scratch: the Summary's Value */
};

/* ---- CRC32C ----------------------------------------------------------- */

/* Slicing-by-8 (8 tables): a byte-at-a-time loop cost the supervisor ~6%
 * of its time when a job logs as fast as it can. */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t tfevents_crc32c(uint32_t crc, const void *data, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const unsigned char *p = data;
	pthread_once(&once, crc_init);
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
		      crc_table[0][p[7]];
		p += 8;
		len -= 8;
	}
	for (size_t i = 0; i < len; i++)
		crc = crc_table[0][(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

uint32_t tfevents_mask_crc(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protobuf ------------------------------------------------------------ */

static void put_varint(struct sbuf *sb, uint64_t v)
{
	unsigned char tmp[VARINT_MAX];
	sbuf_add(sb, tmp, varint_put(tmp, v));
}

static void put_le(struct sbuf *sb, uint64_t v, int nbytes)
{
	unsigned char tmp[8];
	for (int i = 0; i < nbytes; i++)
		tmp[i] = (unsigned char)((v >> (8 * i)) & 0xff);
	sbuf_add(sb, tmp, (size_t)nbytes);
}

/* wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
static void put_key(struct sbuf *sb, unsigned field, unsigned wire)
{
	put_varint(sb, (uint64_t)field << 3 | wire);
}

static void put_bytes(struct sbuf *sb, unsigned field, const void *data, size_t len)
{
	put_key(sb, field, 2);
	put_varint(sb, len);
	sbuf_add(sb, data, len);
}

static void put_double(struct sbuf *sb, unsigned field, double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	put_key(sb, field, 1);
	put_le(sb, u, 8);
}

static void put_float(struct sbuf *sb, unsigned field, float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	put_key(sb, field, 5);
	put_le(sb, u, 4);
}

/* ---- records ------------------------------------------------------------- */

static void frame(struct sbuf *out, const struct sbuf *data)
{
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)(((uint64_t)data->len >> (8 * i)) & 0xff);
	sbuf_add(out, len8, 8);
	put_le(out, tfevents_mask_crc(tfevents_crc32c(0, len8, 8)), 4);
	sbuf_add(out, data->buf, data->len);
	put_le(out, tfevents_mask_crc(tfevents_crc32c(0, data->buf, data->len)), 4);
}

int tfevents_flush(struct tfevents_writer *w, struct tc_err *err)
{
	if (!w->pending.len)
		return 0;
	if (write_all(w->fd, w->pending.buf, w->pending.len) < 0)
		return tc_error_errno(err, TC_ESTORAGE, "cannot write '%s'", w->path);
	sbuf_reset(&w->pending);
	return 0;
}

static int add_event(struct tfevents_writer *w, struct tc_err *err)
{
	frame(&w->pending, &w->ev);
	return w->pending.len >= FLUSH_AT ? tfevents_flush(w, err) : 0;
}

/* Little-endian bytes of v into p. */
static size_t le_bytes(unsigned char *p, uint64_t v, int nbytes)
{
	for (int i = 0; i < nbytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
	return (size_t)nbytes;
}

/*
 * The common case, a tag under 100 bytes, encoded and framed in one local
 * buffer: every nested length then fits one varint byte.  Same bytes as the
 * general path below; a job logging as fast as it can spends noticeably
 * less time here than in a dozen small appends.
 */
static int add_scalar_short(struct tfevents_writer *w, const char *tag, size_t tl, int64_t step,
			    float value, double wall_time, struct tc_err *err)
{
	unsigned char e[160], head[12], tail[4];
	uint64_t u;
	uint32_t f;
	size_t n = 0, vlen = 2 + tl + 5, slen = 2 + vlen;
	e[n++] = 0x09; /* wall_time: field 1, fixed64 */
	memcpy(&u, &wall_time, sizeof(u));
	n += le_bytes(e + n, u, 8);
	if (step) { /* step: field 2, varint; proto3 leaves zero out */
		e[n++] = 0x10;
		n += varint_put(e + n, (uint64_t)step);
	}
	e[n++] = 0x2a; /* summary: field 5 */
	e[n++] = (unsigned char)slen;
	e[n++] = 0x0a; /* Summary.value: field 1 */
	e[n++] = (unsigned char)vlen;
	e[n++] = 0x0a; /* Value.tag: field 1 */
	e[n++] = (unsigned char)tl;
	memcpy(e + n, tag, tl);
	n += tl;
	e[n++] = 0x15; /* Value.simple_value: field 2, fixed32 */
	memcpy(&f, &value, sizeof(f));
	n += le_bytes(e + n, f, 4);
	le_bytes(head, n, 8);
	le_bytes(head + 8, tfevents_mask_crc(tfevents_crc32c(0, head, 8)), 4);
	le_bytes(tail, tfevents_mask_crc(tfevents_crc32c(0, e, n)), 4);
	sbuf_grow(&w->pending, sizeof(head) + n + sizeof(tail));
	sbuf_add(&w->pending, head, sizeof(head));
	sbuf_add(&w->pending, e, n);
	sbuf_add(&w->pending, tail, sizeof(tail));
	return w->pending.len >= FLUSH_AT ? tfevents_flush(w, err) : 0;
}

int tfevents_add_scalar(struct tfevents_writer *w, const char *tag, int64_t step,
			double value, double wall_time, struct tc_err *err)
{
	size_t tl = strlen(tag);
	if (tl < 100)
		return add_scalar_short(w, tag, tl, step, (float)value,
					wall_time ? wall_time : now_wall(), err);
	sbuf_reset(&w->val);
	sbuf_reset(&w->sum);
	sbuf_reset(&w->ev);
	/* Value {tag=1, simple_value=2} inside Summary.value=1 */
	put_bytes(&w->val, 1, tag, strlen(tag));
	put_float(&w->val, 2, (float)value);
	put_bytes(&w->sum, 1, w->val.buf, w->val.len);

	put_double(&w->ev, 1, wall_time ? wall_time : now_wall());
	if (step) { /* proto3 leaves zero fields out */
		put_key(&w->ev, 2, 0);
		put_varint(&w->ev, (uint64_t)step);
	}
	put_bytes(&w->ev, 5, w->sum.buf, w->sum.len);
	return add_event(w, err);
}

static char *hostname(void)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_grow(&sb, 256);
	if (gethostname(sb.buf, sb.alloc - 1) < 0)
		sbuf_adds(&sb, "localhost");
	else
		sbuf_setlen(&sb, strnlen(sb.buf, sb.alloc - 1));
	/* a '/' would make the name a path */
	for (size_t i = 0; i < sb.len; i++)
		if (sb.buf[i] == '/')
			sb.buf[i] = '_';
	if (!sb.len)
		sbuf_adds(&sb, "localhost");
	return sbuf_detach(&sb);
}

int tfevents_open(const char *dir, double wall_time, struct tfevents_writer **out,
		  struct tc_err *err)
{
	struct sbuf path = SBUF_INIT;
	char *host = NULL;
	int fd = -1, rc;

	*out = NULL;
	if (!wall_time)
		wall_time = now_wall();
	if ((rc = mkdir_p(dir, err)) < 0)
		goto out;
	host = hostname();
	for (int n = 0; fd < 0; n++) {
		sbuf_reset(&path);
		sbuf_addf(&path, "%s/events.out.tfevents.%010lld.%s", dir, (long long)wall_time,
			  host);
		if (n)
			sbuf_addf(&path, ".%d", n);
		fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && (errno != EEXIST || n > 1000)) {
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot create '%s'", path.buf);
			goto out;
		}
	}
	struct tfevents_writer *w = xcalloc(1, sizeof(*w));
	w->fd = fd;
	w->path = sbuf_detach(&path);
	sbuf_init(&w->pending, 0);
	sbuf_init(&w->ev, 0);
	sbuf_init(&w->sum, 0);
	sbuf_init(&w->val, 0);

	static const char version[] = "brain.Event:2";
	put_double(&w->ev, 1, wall_time);
	put_bytes(&w->ev, 3, version, sizeof(version) - 1);
	put_bytes(&w->sum, 1, TFEVENTS_WRITER, strlen(TFEVENTS_WRITER)); /* SourceMetadata.writer */
	put_bytes(&w->ev, 10, w->sum.buf, w->sum.len);
	frame(&w->pending, &w->ev);
	if ((rc = tfevents_flush(w, err)) < 0) {
		int keep = rc;
		(void)tfevents_close(w, NULL); /* the write error is the one to report */
		rc = keep;
		goto out;
	}
	*out = w;
out:
	free(host);
	sbuf_release(&path);
	return rc;
}

int tfevents_close(struct tfevents_writer *w, struct tc_err *err)
{
	struct tc_err ignore = TC_ERR_INIT;
	int rc;
	if (!w)
		return 0;
	if (!err)
		err = &ignore;
	rc = tfevents_flush(w, err);
	if (close(w->fd) < 0 && rc == 0)
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot close '%s'", w->path);
	free(w->path);
	sbuf_release(&w->pending);
	sbuf_release(&w->ev);
	sbuf_release(&w->sum);
	sbuf_release(&w->val);
	free(w);
	tc_err_release(&ignore);
	return rc;
}

const char *tfevents_path(const struct tfevents_writer *w)
{
	return w->path;
}
