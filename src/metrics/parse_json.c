/*
 * parse_json.c -- the JSON forms of the metrics lines: DLLogger's JSON
 * stream ("DLLL {...}") and tcap_dllogger's ("TCAPPDLL {...}", whose data is
 * the str() of a Python dict).  See metrics.h for the contract, parse_int.h
 * for the record helpers and jscan.h for the scanner.
 */
#include "core/enc.h"
#include "core/sbuf.h"
#include "metrics/jscan.h"
#include "metrics/parse_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- Python repr dicts (tcap_dllogger's data) ---------------------------- */

/*
 * A Python string literal at s[*i] (quote ' or ", optional u/b/r prefix),
 * unescaped into out.  Returns false on an unterminated string.
 */
static bool py_string(const char *s, size_t len, size_t *i, struct sbuf *out)
{
	bool raw = false;
	size_t j = *i;
	while (j < len && strchr("uUbBrR", s[j]) && s[j]) {
		if (s[j] == 'r' || s[j] == 'R')
			raw = true;
		j++;
	}
	if (j >= len || (s[j] != '\'' && s[j] != '"'))
		return false;
	char q = s[j++];
	sbuf_reset(out);
	while (j < len && s[j] != q) {
		char c = s[j++];
		if (c != '\\' || j >= len) {
			sbuf_addch(out, c);
			continue;
		}
		if (raw) {
			sbuf_addch(out, c);
			sbuf_addch(out, s[j++]);
			continue;
		}
		c = s[j++];
		int nhex = 0;
		switch (c) {
		case 'n': sbuf_addch(out, '\n'); break;
		case 't': sbuf_addch(out, '\t'); break;
		case 'r': sbuf_addch(out, '\r'); break;
		case 'a': sbuf_addch(out, '\a'); break;
		case 'b': sbuf_addch(out, '\b'); break;
		case 'f': sbuf_addch(out, '\f'); break;
		case 'v': sbuf_addch(out, '\v'); break;
		case '\n': break; /* line continuation */
		case 'x': nhex = 2; break;
		case 'u': nhex = 4; break;
		case 'U': nhex = 8; break;
		case '0': case '1': case '2': case '3':
		case '4': case '5': case '6': case '7': {
			unsigned v = (unsigned)(c - '0');
			for (int k = 0; k < 2 && j < len && s[j] >= '0' && s[j] <= '7'; k++)
				v = v * 8 + (unsigned)(s[j++] - '0');
			utf8_add(out, v);
			break;
		}
		default: /* \\ \' \" and unknown escapes (kept as written) */
			if (c != '\\' && c != '\'' && c != '"')
				sbuf_addch(out, '\\');
			sbuf_addch(out, c);
		}
		if (nhex) {
			unsigned long v = 0;
			int k;
			for (k = 0; k < nhex && j < len && hex_digit(s[j]) >= 0; k++)
				v = v * 16 + (unsigned long)hex_digit(s[j++]);
			if (k < nhex)
				return false;
			utf8_add(out, v);
		}
	}
	if (j >= len)
		return false;
	*i = j + 1;
	return true;
}

/* Skip a bare value (number, None, tensor(...), [..]) up to , or } at depth 0. */
static bool py_skip_bare(const char *s, size_t len, size_t *i, struct sbuf *tmp)
{
	int depth = 0;
	size_t j = *i;
	while (j < len) {
		char c = s[j];
		if (c == '\'' || c == '"') {
			if (!py_string(s, len, &j, tmp))
				return false;
			continue;
		}
		if (depth == 0 && (c == ',' || c == '}'))
			break;
		if (c == '(' || c == '[' || c == '{')
			depth++;
		else if (c == ')' || c == ']' || c == '}')
			depth--;
		j++;
	}
	*i = j;
	return j < len;
}

/* {'rank': '0', 'train.loss': '2.301'} -- str() of a dict. */
static bool py_dict(struct metrics_parser *p, const char *s, size_t len)
{
	size_t i = 0;
	mp_skip_ws(s, len, &i);
	if (i >= len || s[i++] != '{')
		return false;
	mp_skip_ws(s, len, &i);
	if (i < len && s[i] == '}')
		return true;
	for (;;) {
		mp_skip_ws(s, len, &i);
		size_t ks = i;
		if (i < len && (s[i] == '\'' || s[i] == '"')) {
			if (!py_string(s, len, &i, &p->k))
				return false;
		} else {
			/* a non-string key (int): keep its text */
			while (i < len && s[i] != ':' && s[i] != ',' && s[i] != '}')
				i++;
			const char *kt = s + ks;
			size_t kl = i - ks;
			mp_trim(&kt, &kl);
			sbuf_reset(&p->k);
			sbuf_add(&p->k, kt, kl);
		}
		mp_skip_ws(s, len, &i);
		if (i >= len || s[i++] != ':')
			return false;
		mp_skip_ws(s, len, &i);
		size_t vs = i;
		bool quoted = false;
		if (i < len && (s[i] == '\'' || s[i] == '"')) {
			if (!py_string(s, len, &i, &p->v))
				return false;
			quoted = true;
			mp_skip_ws(s, len, &i);
			if (i < len && s[i] != ',' && s[i] != '}') {
				/* not a lone string: 'a' 'b' or similar; take it raw */
				quoted = false;
				i = vs;
			}
		}
		if (!quoted) {
			if (!py_skip_bare(s, len, &i, &p->v))
				return false;
			const char *vt = s + vs;
			size_t vl = i - vs;
			mp_trim(&vt, &vl);
			sbuf_reset(&p->v);
			sbuf_add(&p->v, vt, vl);
		}
		mp_rec_text(p, p->k.buf, p->k.len, p->v.buf, p->v.len, NULL, 0);
		mp_skip_ws(s, len, &i);
		if (i >= len)
			return false;
		char c = s[i++];
		if (c == '}')
			break;
		if (c != ',')
			return false;
		mp_skip_ws(s, len, &i);
		if (i < len && s[i] == '}') /* trailing comma */
			break;
	}
	return true;
}

/* ---- JSON forms (the scanner is jscan.c) --------------------------------- */

/*
 * One value of data / metadata into a record.  j is on the value, which
 * the first pass has already checked.
 */
static void jrec(struct metrics_parser *p, struct jscan *j, struct jspan name)
{
	struct jspan sv;
	double d;
	const char *a = j->s;
	switch (*j->s) {
	case '"':
		jscan_str(j, &p->v, &sv);
		mp_rec_text(p, name.s, name.len, sv.s, sv.len, NULL, 0);
		return;
	case '[':
	case '{':
		/* kept as written: "[0.9, 0.999]" */
		jscan_skip(j, 1);
		mp_rec_str(p, name.s, name.len, a, (size_t)(j->s - a));
		return;
	case 't':
		j->s += 4;
		mp_rec_num(p, name.s, name.len, 1, NULL, 0);
		return;
	case 'f':
		j->s += 5;
		mp_rec_num(p, name.s, name.len, 0, NULL, 0);
		return;
	case 'n':
		j->s += 4;
		return;
	default:
		jscan_number(j, &d);
		mp_rec_num(p, name.s, name.len, d, NULL, 0);
	}
}

/* Every key of a checked object: a record each (meta: METADATA fields). */
static void jrecs(struct metrics_parser *p, struct jspan obj, const struct jspan *metric)
{
	struct jscan j = { obj.s, obj.s + obj.len, NULL };
	struct jspan key;
	j.s++; /* '{' */
	for (;;) {
		jscan_ws(&j);
		if (*j.s == '}')
			return;
		if (*j.s == ',') {
			j.s++;
			jscan_ws(&j);
		}
		jscan_str(&j, &p->k, &key);
		jscan_ws(&j);
		j.s++; /* ':' */
		jscan_ws(&j);
		if (metric) {
			p->meta_key = key.s;
			p->meta_key_len = key.len;
			jrec(p, &j, *metric);
			p->meta_key = NULL;
		} else {
			jrec(p, &j, key);
		}
	}
}

/* step: "PARAMETER", [], [e], [e, i, ...] or a number; kept as written. */
static void jstep(struct metrics_parser *p, struct jspan st)
{
	struct jscan j = { st.s, st.s + st.len, NULL };
	struct jspan sv;
	double d;
	long long x;
	if (*j.s == '"') {
		jscan_str(&j, &p->v, &sv);
		mp_set_step(p, sv.s, sv.len);
		if (mp_text_is(sv.s, sv.len, "PARAMETER"))
			p->kind = METRICS_PARAMETER;
		return;
	}
	mp_set_step(p, st.s, st.len);
	if (*j.s == '[') {
		size_t n = 0;
		j.s++;
		for (;;) {
			jscan_ws(&j);
			if (*j.s == ']')
				break;
			if (*j.s == ',') {
				j.s++;
				jscan_ws(&j);
			}
			if (n < 2 && (*j.s == '-' || isdigit((unsigned char)*j.s))) {
				jscan_number(&j, &d);
				if (mp_as_int(d, &x))
					*(n ? &p->iter : &p->epoch) = x;
			} else {
				jscan_skip(&j, 1);
			}
			n++;
		}
		p->kind = n == 0 ? METRICS_SUMMARY : n == 1 ? METRICS_EPOCH : METRICS_POINT;
	} else if (*j.s == '-' || isdigit((unsigned char)*j.s)) {
		jscan_number(&j, &d);
		if (mp_as_int(d, &x))
			p->iter = x;
	}
}

/* A time field: a string holding seconds, or a number. */
static bool jtime(struct metrics_parser *p, struct jscan *j, double *out)
{
	struct jspan sv;
	double d;
	if (j->s < j->end && *j->s == '"') {
		if (!jscan_str(j, &p->v, &sv))
			return false;
		if (metrics_parse_number(sv.s, sv.len, &d))
			*out = d;
		return true;
	}
	const char *a = j->s;
	if (!jscan_skip(j, 1))
		return false;
	struct jscan n = { a, j->s, NULL };
	if (a < j->end && (*a == '-' || isdigit((unsigned char)*a) || *a == 'N' || *a == 'I') &&
	    jscan_number(&n, &d))
		*out = d;
	return true;
}

enum jtype { JT_NONE, JT_LOG, JT_METADATA, JT_OTHER };

enum metrics_result mp_parse_json(struct metrics_parser *p, const char *s, size_t len)
{
	struct jscan j = { s, s + len, NULL };
	struct jspan key, sv, step = { 0 }, data = { 0 }, metric = { 0 }, meta = { 0 };
	enum jtype type = JT_NONE;
	bool metric_str = false;

	/* Pass 1: check the whole object, note where the parts lie. */
	jscan_ws(&j);
	if (j.s >= j.end || *j.s != '{')
		return mp_malformed(p, "JSON is not an object");
	j.s++;
	jscan_ws(&j);
	if (j.s < j.end && *j.s == '}')
		j.s++;
	else
		for (;;) {
			jscan_ws(&j);
			if (j.s >= j.end || *j.s != '"' || !jscan_str(&j, &p->k, &key))
				return mp_malformed(p, j.err ? j.err : "expected a key");
			jscan_ws(&j);
			if (j.s >= j.end || *j.s++ != ':')
				return mp_malformed(p, "expected ':'");
			jscan_ws(&j);
			const char *a = j.s;
			struct jspan *keep = NULL;
			if (mp_text_is(key.s, key.len, "type")) {
				if (j.s < j.end && *j.s == '"') {
					if (!jscan_str(&j, &p->v, &sv))
						return mp_malformed(p, j.err);
					type = mp_text_is(sv.s, sv.len, "LOG")        ? JT_LOG
					       : mp_text_is(sv.s, sv.len, "METADATA") ? JT_METADATA
										   : JT_OTHER;
					goto next;
				}
			} else if (mp_text_is(key.s, key.len, "timestamp")) {
				if (!jtime(p, &j, &p->wall))
					return mp_malformed(p, j.err);
				goto next;
			} else if (mp_text_is(key.s, key.len, "elapsedtime")) {
				if (!jtime(p, &j, &p->elapsed))
					return mp_malformed(p, j.err);
				goto next;
			} else if (mp_text_is(key.s, key.len, "step")) {
				keep = &step;
			} else if (mp_text_is(key.s, key.len, "data")) {
				keep = &data;
			} else if (mp_text_is(key.s, key.len, "metric")) {
				keep = &metric;
				metric_str = j.s < j.end && *j.s == '"';
			} else if (mp_text_is(key.s, key.len, "metadata")) {
				keep = &meta;
			}
			if (!jscan_skip(&j, 1))
				return mp_malformed(p, j.err);
			if (keep) {
				keep->s = a;
				keep->len = (size_t)(j.s - a);
			}
		next:
			jscan_ws(&j);
			if (j.s >= j.end)
				return mp_malformed(p, "unterminated JSON");
			char c = *j.s++;
			if (c == '}')
				break;
			if (c != ',')
				return mp_malformed(p, "expected ',' or '}'");
		}
	jscan_ws(&j);
	if (j.s != j.end)
		return mp_malformed(p, "text after the JSON object");
	if (type == JT_NONE)
		return mp_malformed(p, "no \"type\"");

	/* Pass 2: records. */
	if (type == JT_METADATA) {
		if (!metric_str || (meta.s && *meta.s != '{' && !mp_text_is(meta.s, meta.len, "null")))
			return mp_malformed(p, "METADATA without \"metric\" or \"metadata\" object");
		p->kind = METRICS_METADATA;
		struct jscan m = { metric.s, metric.s + metric.len, NULL };
		struct jspan name;
		jscan_str(&m, &p->js, &name);
		if (meta.s && *meta.s == '{')
			jrecs(p, meta, &name);
		return METRICS_PARSED;
	}
	if (type != JT_LOG)
		return METRICS_PARSED; /* INFO and the like carry no metrics */
	if (step.s)
		jstep(p, step);
	if (!data.s || mp_text_is(data.s, data.len, "null"))
		return METRICS_PARSED;
	if (*data.s == '{') {
		jrecs(p, data, NULL);
	} else if (*data.s == '"') {
		/* tcap_dllogger: data = str(dict) */
		struct jscan d = { data.s, data.s + data.len, NULL };
		jscan_str(&d, &p->js, &sv);
		if (!py_dict(p, sv.s, sv.len))
			return mp_malformed(p, "\"data\" is not a Python dict");
	} else {
		return mp_malformed(p, "\"data\" is not an object");
	}
	return METRICS_PARSED;
}
