/*
 * reply.h -- the API's answers and argument readers: a leaf of src/api/
 * and src/gateway/ that knows libmicrohttpd and JSON, not the server.
 * Every answer carries the page headers (api_page_headers); replies return
 * MHD_YES / MHD_NO.
 */
#ifndef TC_API_REPLY_H
#define TC_API_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/sbuf.h"

struct MHD_Connection;
struct MHD_Response;
struct json_t;

/* Replies return MHD_YES / MHD_NO. */
int reply_raw(struct MHD_Connection *con, unsigned status, const char *type, const char *body,
	      size_t len);
int reply_json(struct MHD_Connection *con, unsigned status, const char *json);
/* A body built in an sbuf, handed to MHD without a copy (body is left empty). */
int reply_owned(struct MHD_Connection *con, unsigned status, const char *type,
		struct sbuf *body);
int reply_err(struct MHD_Connection *con, unsigned status, const char *fmt, ...) TC_PRINTF(3, 4);
/* err as an error answer, with the status of its code (api_status_of). */
int reply_tc(struct MHD_Connection *con, const struct tc_err *err);
/* o as the JSON answer; takes the reference to o. */
int reply_jsont(struct MHD_Connection *con, unsigned status, struct json_t *o);
/* {"error": msg, "status": status}: the body of every error answer. */
void api_error_json(struct sbuf *out, unsigned status, const char *msg);
/* The HTTP status of a TC_E* code: 404 not found, 400 the caller's fault, else 500. */
unsigned api_status_of(int code);
/* A query argument (decoded by libmicrohttpd), or NULL. */
const char *arg_of(struct MHD_Connection *con, const char *key);
/* A query number within [min, max]; def when absent; false when malformed. */
bool arg_long(struct MHD_Connection *con, const char *key, long min, long max, long def,
	      long *out);
/* arg_long on a value (decoded by libmicrohttpd): pure, for the fuzzer. */
bool api_arg_long(const char *v, long min, long max, long def, long *out);
/* CSP, X-Frame-Options, nosniff, Referrer-Policy: on every answer (finding 16). */
void api_page_headers(struct MHD_Response *r);

#endif
