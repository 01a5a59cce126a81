/* assets.c -- serves the embedded web UI (assets.h); "/" is index.html. */
#include "api/api_int.h"
#include "api/assets.h"

#include "core/lazylib.h"
#include "core/sbuf.h"
#include <string.h>

int serve_asset(struct MHD_Connection *con, const char *url)
{
	if (!strcmp(url, "/") || !strncmp(url, "/job/", 5) || !strcmp(url, "/devices"))
		url = "/index.html"; /* the UI's own routes */
	for (const struct web_asset *a = web_assets; a->url; a++) {
		if (strcmp(a->url, url) != 0)
			continue;
		struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data,
									  MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, "Content-Type", a->type);
		MHD_add_response_header(r, "Cache-Control", "no-cache");
		api_page_headers(r);
		int ret = MHD_queue_response(con, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	return reply_err(con, 404, "no such page: %s", url);
}

/*
 * A login link the server refused, opened by a browser: a page that says
 * why and leads to the UI (whose login page says how to get a new link),
 * not the JSON a script gets.  Same status either way.  msg is the
 * server's own constant text; one holding markup characters is not put
 * into the page.
 */
int serve_login_refused(struct MHD_Connection *con, const char *msg)
{
	const char *accept = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Accept");
	if (!accept || !strstr(accept, "text/html"))
		return reply_err(con, 403, "%s", msg);
	struct sbuf b = SBUF_INIT;
	sbuf_adds(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
		      "<title>trainctl: login link not accepted</title>"
		      "<link rel=\"icon\" href=\"/favicon.svg\"><link rel=\"stylesheet\" href=\"/app.css\">"
		      "</head><body><main><div class=\"card\" id=\"login-refused\">"
		      "<h1>This login link was not accepted</h1><p>");
	sbuf_adds(&b, strpbrk(msg, "<>&") ? "the server refused it" : msg);
	sbuf_adds(&b, "</p><p><a class=\"button\" href=\"/\">Open trainctl</a>: "
		      "its login page says how to get a new link.</p></div></main></body></html>\n");
	return reply_owned(con, 403, "text/html; charset=utf-8", &b);
}
