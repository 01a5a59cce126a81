/*
 * jscan.h -- private to src/metrics: a small JSON scanner for one line,
 * used by the DLLogger and tcap_dllogger JSON forms (parse.c).
 *
 * Why not jansson: json_loadb() alone manages ~325,000 DLLL lines/s (a tree
 * of heap nodes per line) against the 500,000/s the supervisor needs, and
 * it rejects the NaN / Infinity / -Infinity tokens that Python's json.dumps
 * writes.  This one walks the text in place: strings without escapes are
 * used where they lie, escaped ones are decoded into a scratch buffer,
 * nothing is allocated per line.  It is strict JSON apart from those three
 * tokens; nesting is limited to JSCAN_DEPTH levels so a line of "[[[[..."
 * cannot exhaust the stack.
 *
 * Every function starts at j->s, moves it past what it read, and on a
 * syntax error returns false with the first error's static text in j->err.
 */
#ifndef TC_METRICS_JSCAN_H
#define TC_METRICS_JSCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "core/sbuf.h"

#define JSCAN_DEPTH 64

struct jscan {
	const char *s, *end;
	const char *err; /* first error; static text */
};

/* Where a piece of text lies: in the line, or in a scratch buffer. */
struct jspan {
	const char *s;
	size_t len;
};

/* Skip white space. */
void jscan_ws(struct jscan *j);
/* Record why (unless an error is already there); returns false. */
bool jscan_fail(struct jscan *j, const char *why);
/* Consume lit when the text starts with it. */
bool jscan_lit(struct jscan *j, const char *lit);
/*
 * A string at j->s (on '"').  *out is where its text lies: in the line when
 * it has no escapes, else decoded (UTF-8) into scratch.  out may be NULL to
 * just skip it.
 */
bool jscan_str(struct jscan *j, struct sbuf *scratch, struct jspan *out);
/* A number (JSON grammar, plus NaN / Infinity / -Infinity) at j->s. */
bool jscan_number(struct jscan *j, double *out);
/* Skip any value, checking its syntax; depth counts the enclosing containers. */
bool jscan_skip(struct jscan *j, int depth);

#endif
