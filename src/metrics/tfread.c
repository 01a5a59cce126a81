/*
 * tfread.c -- TensorBoard event-file reader: record framing with masked
 * CRC32C (shared with the writer, tfevents.c) and the protobuf fields of
 * scalars; see tfread.h for the rules.
 */
#include "metrics/tfread.h"
#include "metrics/tfevents.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct tfread {
	struct sbuf buf;      /* bytes fed and not consumed: buf[pos..len) */
	size_t pos;
	uint64_t base;        /* stream offset of buf.buf[0] */
	bool resync;          /* after a header that did not check (note 2) */
	/* the last Event decoded */
	struct sbuf names;    /* its tags, each NUL-terminated */
	struct sbuf version;  /* its file_version */
	struct tfread_scalar *sc;
	size_t *tagoff;       /* offsets into names, made pointers at the end */
	size_t nsc, asc;
	/* the last corruption */
	struct sbuf reason;
	uint64_t corrupt_at;
};

struct tfread *tfread_new(void)
{
	struct tfread *r = xcalloc(1, sizeof(*r));
	sbuf_init(&r->buf, 0);
	sbuf_init(&r->names, 0);
	sbuf_init(&r->version, 0);
	sbuf_init(&r->reason, 0);
	return r;
}

void tfread_free(struct tfread *r)
{
	if (!r)
		return;
	sbuf_release(&r->buf);
	sbuf_release(&r->names);
	sbuf_release(&r->version);
	sbuf_release(&r->reason);
	free(r->sc);
	free(r->tagoff);
	free(r);
}

void tfread_feed(struct tfread *r, const void *data, size_t len)
{
	if (r->pos) { /* what was consumed goes first: at most one record is kept */
		sbuf_remove_front(&r->buf, r->pos);
		r->base += r->pos;
		r->pos = 0;
	}
	sbuf_add(&r->buf, data, len);
}

const char *tfread_reason(const struct tfread *r)
{
	return r->reason.len ? r->reason.buf : "corrupt record";
}

uint64_t tfread_corrupt_offset(const struct tfread *r)
{
	return r->corrupt_at;
}

/* ---- protobuf ------------------------------------------------------------ */

static uint64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

struct pb {
	const unsigned char *p, *end;
};

/* One field's value: u for wire types 0, 1 and 5; s/n for 2. */
struct pbval {
	uint64_t u;
	const unsigned char *s;
	size_t n;
};

static bool pb_varint(struct pb *b, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (b->p >= b->end)
			return false;
		unsigned char c = *b->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false; /* more than 10 bytes */
}

/* The next field of b: false at the end (*ok true) or when it does not decode (*ok false). */
static bool pb_field(struct pb *b, unsigned *field, unsigned *wire, struct pbval *v, bool *ok)
{
	uint64_t key;
	*ok = true;
	if (b->p >= b->end)
		return false;
	*ok = false;
	if (!pb_varint(b, &key) || key >> 3 == 0 || key >> 3 > 0x1fffffff)
		return false;
	*field = (unsigned)(key >> 3);
	*wire = (unsigned)(key & 7);
	memset(v, 0, sizeof(*v));
	switch (*wire) {
	case 0:
		if (!pb_varint(b, &v->u))
			return false;
		break;
	case 1:
	case 5: {
		size_t w = *wire == 1 ? 8 : 4;
		if ((size_t)(b->end - b->p) < w)
			return false;
		v->u = le(b->p, (int)w);
		b->p += w;
		break;
	}
	case 2:
		if (!pb_varint(b, &v->u) || v->u > (uint64_t)(b->end - b->p))
			return false;
		v->s = b->p;
		v->n = (size_t)v->u;
		b->p += v->n;
		break;
	default: /* groups (3, 4) are long gone from protobuf; 6, 7 do not exist */
		return false;
	}
	*ok = true;
	return true;
}

static bool is_text(const struct pbval *v, const char *s)
{
	size_t n = strlen(s);
	return v->n == n && !memcmp(v->s, s, n);
}

static float f32_of(uint64_t u)
{
	uint32_t x = (uint32_t)u;
	float f;
	memcpy(&f, &x, sizeof(f));
	return f;
}

static double f64_of(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

/* ---- TensorProto --------------------------------------------------------- */

enum { DT_FLOAT = 1, DT_DOUBLE = 2, DT_INT32 = 3, DT_INT64 = 9 };

/* Values of one repeated number field, packed (wire 2) or not. */
struct nums {
	size_t n;
	uint64_t first; /* raw: bits of the float/double, or the varint */
};

static bool count_nums(struct nums *x, unsigned wire, unsigned want, const struct pbval *v)
{
	if (wire == want) {
		if (!x->n++)
			x->first = v->u;
		return true;
	}
	if (wire != 2)
		return true; /* a wire type this field never has: skipped */
	if (want == 0) {
		struct pb in = { v->s, v->s + v->n };
		uint64_t u;
		while (in.p < in.end) {
			if (!pb_varint(&in, &u))
				return false;
			if (!x->n++)
				x->first = u;
		}
		return true;
	}
	size_t w = want == 1 ? 8 : 4;
	if (v->n % w)
		return false;
	if (v->n && !x->n)
		x->first = le(v->s, (int)w);
	x->n += v->n / w;
	return true;
}

/*
 * A TensorProto holding one number of dtype float, double, int32 or int64:
 * *out and true; false (and *ok true) for any other tensor.
 */
static bool tensor_scalar(const unsigned char *s, size_t n, double *out, bool *ok)
{
	struct pb b = { s, s + n };
	struct nums f = { 0 }, d = { 0 }, i32 = { 0 }, i64 = { 0 };
	struct pbval v, content = { 0 };
	unsigned field, wire;
	uint64_t dtype = 0;
	while (pb_field(&b, &field, &wire, &v, ok)) {
		switch (field) {
		case 1:
			if (wire == 0)
				dtype = v.u;
			break;
		case 4:
			if (wire == 2)
				content = v;
			break;
		case 5:
			*ok = count_nums(&f, wire, 5, &v);
			break;
		case 6:
			*ok = count_nums(&d, wire, 1, &v);
			break;
		case 7:
			*ok = count_nums(&i32, wire, 0, &v);
			break;
		case 10:
			*ok = count_nums(&i64, wire, 0, &v);
			break;
		}
		if (!*ok)
			return false;
	}
	if (!*ok)
		return false;
	struct nums *x;
	size_t w;
	switch (dtype) {
	case DT_FLOAT: x = &f; w = 4; break;
	case DT_DOUBLE: x = &d; w = 8; break;
	case DT_INT32: x = &i32; w = 4; break;
	case DT_INT64: x = &i64; w = 8; break;
	default: return false;
	}
	if (content.n % w || x->n + content.n / w != 1)
		return false;
	uint64_t u = x->n ? x->first : le(content.s, (int)w);
	switch (dtype) {
	case DT_FLOAT: *out = f32_of(u); break;
	case DT_DOUBLE: *out = f64_of(u); break;
	case DT_INT32: *out = (double)(int32_t)(uint32_t)u; break;
	default: *out = (double)(int64_t)u; break;
	}
	return true;
}

/* ---- Summary ------------------------------------------------------------- */

/* SummaryMetadata {plugin_data=1 {plugin_name=1}}: the plugin's name, if any. */
static bool plugin_name(const struct pbval *md, struct pbval *name)
{
	struct pb b = { md->s, md->s + md->n }, in;
	struct pbval v, w;
	unsigned field, wire;
	bool ok;
	while (pb_field(&b, &field, &wire, &v, &ok)) {
		if (field != 1 || wire != 2)
			continue;
		in = (struct pb){ v.s, v.s + v.n };
		while (pb_field(&in, &field, &wire, &w, &ok))
			if (field == 1 && wire == 2)
				*name = w;
		if (!ok)
			return false;
	}
	return ok;
}

static void add_scalar(struct tfread *r, const struct pbval *tag, double value)
{
	if (r->nsc == r->asc) {
		r->asc = r->asc ? 2 * r->asc : 8;
		r->sc = xrealloc(r->sc, r->asc * sizeof(*r->sc));
		r->tagoff = xrealloc(r->tagoff, r->asc * sizeof(*r->tagoff));
	}
	r->tagoff[r->nsc] = r->names.len;
	sbuf_add(&r->names, tag->s, tag->n);
	sbuf_addch(&r->names, '\0');
	r->sc[r->nsc++].value = value;
}

static bool parse_value(struct tfread *r, const struct pbval *val)
{
	struct pb b = { val->s, val->s + val->n };
	struct pbval v, tag = { .s = (const unsigned char *)"" }, tensor = { 0 }, plugin = { 0 };
	unsigned field, wire;
	bool ok, simple = false, has_tensor = false;
	double x = NAN;
	while (pb_field(&b, &field, &wire, &v, &ok)) {
		if (field == 1 && wire == 2) {
			tag = v;
		} else if (field == 2 && wire == 5) {
			simple = true;
			x = f32_of(v.u);
		} else if (field == 8 && wire == 2) {
			tensor = v;
			has_tensor = true;
		} else if (field == 9 && wire == 2) {
			if (!plugin_name(&v, &plugin))
				return false;
		}
	}
	if (!ok)
		return false;
	if (!simple && has_tensor && (!plugin.s || is_text(&plugin, "scalars"))) {
		simple = tensor_scalar(tensor.s, tensor.n, &x, &ok);
		if (!ok)
			return false;
	}
	if (simple)
		add_scalar(r, &tag, x);
	return true;
}

static bool parse_summary(struct tfread *r, const struct pbval *sum)
{
	struct pb b = { sum->s, sum->s + sum->n };
	struct pbval v;
	unsigned field, wire;
	bool ok;
	while (pb_field(&b, &field, &wire, &v, &ok))
		if (field == 1 && wire == 2 && !parse_value(r, &v))
			return false;
	return ok;
}

/* SourceMetadata {writer=1}: is it trainctl's (tfread.h note 4)? */
static bool ours(const struct pbval *sm, bool *trainctl)
{
	struct pb b = { sm->s, sm->s + sm->n };
	struct pbval v;
	unsigned field, wire;
	bool ok;
	while (pb_field(&b, &field, &wire, &v, &ok))
		if (field == 1 && wire == 2)
			*trainctl = is_text(&v, TFEVENTS_WRITER);
	return ok;
}

bool tfread_parse_event(struct tfread *r, const void *data, size_t len, struct tfread_event *ev)
{
	struct pb b = { data, (const unsigned char *)data + len };
	struct pbval v;
	unsigned field, wire;
	bool ok, version = false;
	memset(ev, 0, sizeof(*ev));
	r->nsc = 0;
	sbuf_reset(&r->names);
	sbuf_reset(&r->version);
	while (pb_field(&b, &field, &wire, &v, &ok)) {
		if (field == 1 && wire == 1) {
			ev->wall_time = f64_of(v.u);
		} else if (field == 2 && wire == 0) {
			ev->step = (int64_t)v.u;
		} else if (field == 3 && wire == 2) {
			sbuf_reset(&r->version);
			sbuf_add(&r->version, v.s, v.n);
			version = true;
		} else if (field == 5 && wire == 2) {
			if (!parse_summary(r, &v))
				return false;
		} else if (field == 10 && wire == 2) {
			if (!ours(&v, &ev->trainctl))
				return false;
		}
	}
	if (!ok)
		return false;
	for (size_t i = 0; i < r->nsc; i++)
		r->sc[i].tag = r->names.buf + r->tagoff[i];
	ev->scalars = r->sc;
	ev->nscalars = r->nsc;
	ev->file_version = version ? r->version.buf : NULL;
	return true;
}

/* ---- records ------------------------------------------------------------- */

static bool header_ok(const unsigned char *p)
{
	return le(p + 8, 4) == tfevents_mask_crc(tfevents_crc32c(0, p, 8)) &&
	       le(p, 8) <= TFREAD_MAX_RECORD;
}

static enum tfread_result corrupt(struct tfread *r, const char *fmt, ...) TC_PRINTF(2, 3);

/* The record at pos is damaged: why, and where. */
static enum tfread_result corrupt(struct tfread *r, const char *fmt, ...)
{
	va_list ap;
	r->corrupt_at = r->base + r->pos;
	sbuf_reset(&r->reason);
	va_start(ap, fmt);
	sbuf_vaddf(&r->reason, fmt, ap);
	va_end(ap);
	sbuf_addf(&r->reason, " at offset %llu", (unsigned long long)r->corrupt_at);
	return TFREAD_CORRUPT;
}

enum tfread_result tfread_next(struct tfread *r, bool at_end, struct tfread_event *ev)
{
	const unsigned char *buf = (const unsigned char *)r->buf.buf;
	size_t len = r->buf.len;
	enum tfread_result res;
	if (r->resync) { /* note 2: the next offset whose header checks */
		while (len - r->pos >= 12 && !header_ok(buf + r->pos))
			r->pos++;
		if (len - r->pos < 12) {
			if (at_end)
				r->pos = len; /* counted already */
			return TFREAD_MORE;
		}
		r->resync = false;
	}
	size_t avail = len - r->pos;
	if (!avail)
		return TFREAD_MORE;
	if (avail < 12) {
		if (!at_end)
			return TFREAD_MORE;
		res = corrupt(r, "truncated record: %zu of 12 header bytes", avail);
		r->pos = len;
		return res;
	}
	const unsigned char *p = buf + r->pos;
	uint64_t n = le(p, 8);
	if (!header_ok(p)) {
		if (le(p + 8, 4) != tfevents_mask_crc(tfevents_crc32c(0, p, 8)))
			res = corrupt(r, "length CRC mismatch");
		else
			res = corrupt(r, "record length %llu over the limit", (unsigned long long)n);
		r->pos++;
		r->resync = true;
		return res;
	}
	if (avail - 12 < n + 4) {
		if (!at_end)
			return TFREAD_MORE;
		res = corrupt(r, "truncated record of %llu bytes", (unsigned long long)n);
		r->pos = len;
		return res;
	}
	size_t whole = 12 + (size_t)n + 4;
	if (le(p + 12 + n, 4) != tfevents_mask_crc(tfevents_crc32c(0, p + 12, (size_t)n)))
		res = corrupt(r, "data CRC mismatch in a record of %llu bytes", (unsigned long long)n);
	else if (!tfread_parse_event(r, p + 12, (size_t)n, ev))
		res = corrupt(r, "record of %llu bytes is not a TensorBoard Event", (unsigned long long)n);
	else {
		ev->offset = r->base + r->pos;
		res = TFREAD_EVENT;
	}
	r->pos += whole;
	return res;
}
