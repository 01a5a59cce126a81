/* assets.c -- serves the embedded web UI (assets.h); "/" is index.html. */
#include "server/api_int.h"
#include "server/assets.h"

#include "core/lazylib.h"
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
