/*
 * api_int.h -- private to src/server/: what the request handlers (api.c),
 * the event streams (stream.c) and the web assets (assets.c) share.
 */
#ifndef TC_SERVER_API_INT_H
#define TC_SERVER_API_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "server/server_int.h"

struct MHD_Connection;

/* The caller of a request: token's user, or the local admin without tokens. */
struct who {
	char *user;
	bool admin;
};

/* Replies return MHD_YES / MHD_NO. */
int reply_raw(struct MHD_Connection *con, unsigned status, const char *type, const char *body,
	      size_t len);
int reply_json(struct MHD_Connection *con, unsigned status, const char *json);
int reply_err(struct MHD_Connection *con, unsigned status, const char *fmt, ...) TC_PRINTF(3, 4);
const char *arg_of(struct MHD_Connection *con, const char *key);
bool arg_long(struct MHD_Connection *con, const char *key, long min, long max, long def,
	      long *out);

/* stream.c: server-sent events */
int stream_logs(struct srv *s, struct MHD_Connection *con, const struct store_sjob *x, int rank,
		long tail);
int stream_events(struct srv *s, struct MHD_Connection *con, const struct who *w);

/* assets.c: the web UI, embedded at build time */
int serve_asset(struct MHD_Connection *con, const char *url);

#endif
