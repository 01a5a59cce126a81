/*
 * reply.c -- the API's answers (JSON, errors with their status, a body
 * built in an sbuf), the page headers every answer carries, and the query
 * argument readers (reply.h).
 */
#include "api/reply.h"
#include "core/json.h"
#include "core/lazylib.h"
#include "core/util.h"
#include "server/srvlog.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int reply_raw(struct MHD_Connection *con, unsigned status, const char *type, const char *body,
	      size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								  MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	api_page_headers(r);
	int ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

int reply_owned(struct MHD_Connection *con, unsigned status, const char *type,
		struct sbuf *body)
{
	size_t len = body->len;
	char *buf = sbuf_detach(body);
	struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	api_page_headers(r);
	int ret = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return ret;
}

int reply_json(struct MHD_Connection *con, unsigned status, const char *json)
{
	return reply_raw(con, status, "application/json", json, strlen(json));
}

void api_error_json(struct sbuf *out, unsigned status, const char *msg)
{
	sbuf_adds(out, "{\"error\":");
	json_add_str(out, msg);
	sbuf_addf(out, ",\"status\":%u}", status);
}

unsigned api_status_of(int code)
{
	return code == TC_ENOTFOUND ? 404
	       : (code == TC_ESPEC || code == TC_EUSAGE || code == TC_EINPUT) ? 400
	       : 500;
}

int reply_err(struct MHD_Connection *con, unsigned status, const char *fmt, ...)
{
	struct sbuf msg = SBUF_INIT, body = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&msg, fmt, ap);
	va_end(ap);
	api_error_json(&body, status, msg.buf);
	int ret = reply_json(con, status, body.buf);
	sbuf_release(&msg);
	sbuf_release(&body);
	return ret;
}

int reply_tc(struct MHD_Connection *con, const struct tc_err *err)
{
	unsigned st = api_status_of(err->code);
	const char *msg = err->msg ? err->msg : tc_code_name(err->code);
	if (st < 500)
		return reply_err(con, st, "%s", msg);
	/* the server's own failure: the details (paths of its state) go to its log */
	srvlog(SRVLOG_ERR, "%s", msg);
	return reply_err(con, st, "the server failed (%s): its log says more",
			 tc_code_name(err->code));
}

int reply_jsont(struct MHD_Connection *con, unsigned status, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return reply_err(con, 500, "cannot encode the answer");
	int ret = reply_json(con, status, text);
	free(text);
	return ret;
}

const char *arg_of(struct MHD_Connection *con, const char *key)
{
	return MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, key);
}

/* A query number within [min, max]; def when absent; false when malformed. */
bool arg_long(struct MHD_Connection *con, const char *key, long min, long max, long def,
	      long *out)
{
	return api_arg_long(arg_of(con, key), min, max, def, out);
}

bool api_arg_long(const char *v, long min, long max, long def, long *out)
{
	*out = def;
	if (!v || !*v)
		return true;
	return parse_long(v, min, max, out);
}

/*
 * The UI's pages may not be framed (clickjacking), run only our own
 * scripts, and are not sniffed into another type.  Inline style attributes
 * stay allowed: the UI sets widths in its markup.
 */
void api_page_headers(struct MHD_Response *r)
{
	MHD_add_response_header(r, "Content-Security-Policy",
				"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
				" img-src 'self' data:; connect-src 'self'; object-src 'none';"
				" base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
}
