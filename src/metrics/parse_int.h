/*
 * parse_int.h -- private to the metrics line parsers: the parser's state and
 * the record helpers that parse.c (the text forms, MindFormers, dispatch)
 * shares with parse_json.c (the JSON forms and the Python-repr dicts in
 * them).  The scanner under the JSON forms is jscan.h.
 *
 * Every parser sets the line context (kind, step, epoch, iteration, times)
 * and adds records by name with mp_rec_num() / mp_rec_text().  Strings go
 * into one arena per parser and are addressed by offset while the line is
 * parsed (the arena may move); parse.c's finish() turns offsets into
 * pointers and copies the line context into every record.
 */
#ifndef TC_METRICS_PARSE_INT_H
#define TC_METRICS_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/sbuf.h"
#include "metrics/metrics.h"

#define NOOFF ((size_t)-1)

struct rec_offs {
	size_t name, key, str, unit;
};

struct metrics_parser {
	struct metric_rec *recs;
	struct rec_offs *offs;
	size_t n, alloc;
	struct sbuf arena;  /* NUL-separated strings of the current line */
	struct sbuf k, v;   /* scratch: unescaped Python keys and values */
	struct sbuf js;     /* scratch: decoded JSON strings (tcap data, metric) */
	const char *reason; /* static text; why the last line was malformed */

	/* context of the line being parsed, shared by all its records */
	enum metrics_kind kind;
	enum metrics_format format;
	int rank;
	long long epoch, iter;
	size_t step;
	double wall, elapsed;
	const char *meta_key; /* METADATA: current key, in the line */
	size_t meta_key_len;
};

static inline bool mp_is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* Is [s, s+len) exactly lit? */
static inline bool mp_text_is(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && !memcmp(s, lit, n);
}

/* Drop blanks at both ends of [*s, *s + *len). */
void mp_trim(const char **s, size_t *len);
/* Advance *i past blanks. */
void mp_skip_ws(const char *s, size_t len, size_t *i);
/* d as an integer when it is one (and fits). */
bool mp_as_int(double d, long long *out);

/* The step text of the line, kept as written. */
void mp_set_step(struct metrics_parser *p, const char *s, size_t len);
/* A numeric record (a "rank" key sets the line's rank instead). */
void mp_rec_num(struct metrics_parser *p, const char *name, size_t nlen, double v,
		const char *unit, size_t ulen);
/* A text record, kept as written. */
void mp_rec_str(struct metrics_parser *p, const char *name, size_t nlen, const char *s,
		size_t slen);
/* A value given as text: numeric when it is a number (metrics.h note 5), dropped when None. */
void mp_rec_text(struct metrics_parser *p, const char *name, size_t nlen, const char *s,
		 size_t len, const char *unit, size_t ulen);
/* The line is malformed for `why` (static text): its records are dropped. */
enum metrics_result mp_malformed(struct metrics_parser *p, const char *why);

/* parse_json.c: a DLLL or TCAPPDLL JSON object. */
enum metrics_result mp_parse_json(struct metrics_parser *p, const char *s, size_t len);

#endif
