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

/* A jansson real, or null when v is NaN or infinite; a new reference. */
json_t *json_real_or_null(double v);
/* A jansson string, or null when s is NULL; a new reference. */
json_t *json_string_or_null(const char *s);

#endif
