/*
 * s3_xml.c -- S3's XML answers read as bytes: object listings, errors,
 * multipart upload ids.  Not a general XML parser: S3's answers are flat
 * enough that finding <Tag>text</Tag> and decoding the entities in between
 * reads every field trainctl uses.  No libcurl; see s3_int.h.
 */
#include "core/enc.h"
#include "core/xalloc.h"
#include "storage/s3_int.h"
#include "storage/storage_int.h"
#include "storage/storage.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Append [p, end) to out with the five XML entities and &#N; / &#xN; decoded. */
static void decode_entities(const char *p, const char *end, struct sbuf *out)
{
	static const struct {
		const char *ent;
		char c;
	} ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' },
	};
	for (; p < end; p++) {
		if (*p != '&') {
			sbuf_addch(out, *p);
			continue;
		}
		bool done = false;
		for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]) && !done; i++) {
			size_t l = strlen(ents[i].ent);
			if ((size_t)(end - p) >= l && !strncmp(p, ents[i].ent, l)) {
				sbuf_addch(out, ents[i].c);
				p += l - 1;
				done = true;
			}
		}
		if (!done && p + 2 < end && p[1] == '#') {
			/* end is on the closing tag's '<', so strtoul stops before it */
			const char *semi = memchr(p, ';', (size_t)(end - p));
			char *e;
			unsigned long cp = p[2] == 'x' ? strtoul(p + 3, &e, 16) : strtoul(p + 2, &e, 10);
			if (semi && e == semi && cp && cp < 0x110000) {
				utf8_add(out, cp);
				p = semi;
				done = true;
			}
		}
		if (!done)
			sbuf_addch(out, '&');
	}
}

bool s3_xml_text(const char *xml, const char *end, const char *tag, struct sbuf *out)
{
	struct sbuf open = SBUF_INIT, close_ = SBUF_INIT;
	sbuf_addf(&open, "<%s>", tag);
	sbuf_addf(&close_, "</%s>", tag);
	bool found = false;
	const char *a = memmem(xml, (size_t)(end - xml), open.buf, open.len);
	const char *b = NULL;
	if (a) {
		a += open.len;
		b = memmem(a, (size_t)(end - a), close_.buf, close_.len);
	}
	if (b) {
		found = true;
		sbuf_reset(out);
		decode_entities(a, b, out);
	}
	sbuf_release(&open);
	sbuf_release(&close_);
	return found;
}

int64_t s3_parse_iso_date(const char *v)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	int64_t frac = 0, scale = NS_PER_SEC / 10;
	if (*end == '.') /* digits past the nanosecond are dropped */
		for (end++; *end >= '0' && *end <= '9'; end++, scale /= 10)
			frac += (*end - '0') * scale;
	int64_t ns = secs_to_ns((int64_t)timegm(&tm));
	return ns ? ns + frac : 0;
}

/* One <Contents> element [a, b) into o; false when it is not an object under prefix. */
static bool list_entry(const char *a, const char *b, const char *prefix, struct sbuf *f,
		       struct s3_xml_obj *o)
{
	size_t pl = strlen(prefix);
	/* a NUL (never in XML 1.0) would cut the key short, to "" at worst: not an object */
	if (!s3_xml_text(a, b, "Key", f) || f->len <= pl || memchr(f->buf, '\0', f->len) ||
	    strncmp(f->buf, prefix, pl) || f->buf[f->len - 1] == '/')
		return false;
	memset(o, 0, sizeof(*o));
	o->key = xstrdup(f->buf + pl);
	if (s3_xml_text(a, b, "Size", f))
		o->size = strtoull(f->buf, NULL, 10);
	if (s3_xml_text(a, b, "LastModified", f))
		o->mtime_ns = s3_parse_iso_date(f->buf);
	if (s3_xml_text(a, b, "ETag", f)) {
		const char *v = f->buf;
		size_t l = f->len;
		if (l >= 2 && v[0] == '"' && v[l - 1] == '"') {
			v++;
			l -= 2;
		}
		o->etag = xstrndup(v, l);
	}
	return true;
}

void s3_xml_parse_list(const char *xml, size_t len, const char *prefix, struct s3_xml_list *out)
{
	const char *p = xml, *end = xml + len;
	struct sbuf f = SBUF_INIT;
	for (;;) {
		const char *a = memmem(p, (size_t)(end - p), "<Contents>", 10);
		if (!a)
			break;
		const char *b = memmem(a, (size_t)(end - a), "</Contents>", 11);
		if (!b)
			break;
		struct s3_xml_obj o;
		if (list_entry(a, b, prefix, &f, &o)) {
			XGROW(out->obj, out->n + 1, out->alloc);
			out->obj[out->n++] = o;
		}
		p = b + 11;
	}
	out->truncated = s3_xml_text(xml, end, "IsTruncated", &f) && !strcmp(f.buf, "true");
	free(out->next_token);
	out->next_token = NULL;
	if (out->truncated) {
		/* an empty token (or one a NUL cuts short) would ask for the first page again */
		if (s3_xml_text(xml, end, "NextContinuationToken", &f) && f.len &&
		    !memchr(f.buf, '\0', f.len))
			out->next_token = xstrdup(f.buf);
		else
			out->truncated = false;
	}
	sbuf_release(&f);
}

void s3_xml_list_release(struct s3_xml_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->obj[i].key);
		free(l->obj[i].etag);
	}
	free(l->obj);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}

bool s3_xml_parse_error(const char *xml, size_t len, char **code, char **message)
{
	struct sbuf f = SBUF_INIT;
	*code = s3_xml_text(xml, xml + len, "Code", &f) ? xstrdup(f.buf) : NULL;
	*message = s3_xml_text(xml, xml + len, "Message", &f) ? xstrdup(f.buf) : NULL;
	sbuf_release(&f);
	return *code || *message;
}

bool s3_xml_is_error(const char *xml, size_t len)
{
	return len && memmem(xml, len, "<Error>", 7);
}

char *s3_xml_upload_id(const char *xml, size_t len)
{
	struct sbuf id = SBUF_INIT;
	if (s3_xml_text(xml, xml + len, "UploadId", &id))
		return sbuf_detach(&id);
	sbuf_release(&id);
	return NULL;
}
