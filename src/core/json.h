/*
 * json.h -- the small JSON pieces every module shares: one string escaper
 * for the places that write JSON text by hand (event streams, listings,
 * the planner's output), and jansson values for numbers that may not be
 * finite (JSON has no NaN or Infinity).
 */
#ifndef TC_CORE_JSON_H
#define TC_CORE_JSON_H

#include <jansson.h>

#include "core/sbuf.h"

/*
 * Append s as a JSON string literal: quotes around it, '"' and '\\'
 * escaped, control characters as \n, \t, \r or \u00XX.  A byte that is not
 * part of valid UTF-8 becomes \ufffd, so the output is always valid JSON.
 * NULL appends null.
 */
void json_add_str(struct sbuf *sb, const char *s);

/*
 * v in the shortest decimal form that reads back (strtod) as the same double:
 * the first of %.15g, %.16g and %.17g that does, so 0.05 is "0.05", not
 * "0.050000000000000003".  buf holds at least 32 bytes; NaN and infinities
 * come out as printf writes them (callers decide what they mean).
 */
void fmt_shortest(char *buf, size_t size, double v);
/* v as a JSON number in that form; null when not finite. */
void json_add_number(struct sbuf *sb, double v);
/*
 * json_dumps for trees that hold reals: the same text as jansson's (flags
 * JSON_INDENT(n), JSON_COMPACT, JSON_ENCODE_ANY; keys in insertion order),
 * but each real in the shortest form that reads back, with ".0" when it would
 * otherwise read back as an integer.  NULL when v is NULL or a real is not
 * finite.  The caller frees the text.
 */
char *json_dumps_shortest(const json_t *v, size_t flags);

/* A jansson real, or null when v is NaN or infinite; a new reference. */
json_t *json_real_or_null(double v);
/* A jansson string, or null when s is NULL; a new reference. */
json_t *json_string_or_null(const char *s);

#endif
