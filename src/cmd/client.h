/*
 * client.h -- the CLI's side of the API (libcurl): the tool's, never the
 * library's (like curl's tool beside libcurl).  The remote job source
 * (source_remote.c) and the verbs that post to a server use it.
 */
#ifndef TC_CMD_CLIENT_H
#define TC_CMD_CLIENT_H

#include <jansson.h>
#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"

struct client;

/*
 * url: --server's value or NULL for $TRAINCTL_SERVER; the token comes from
 * $TRAINCTL_TOKEN.  TC_EUSAGE when neither names a server.
 */
int client_open(const char *url, struct client **out, struct tc_err *err);
void client_close(struct client *c);
/*
 * One request; body is JSON or NULL.  Returns 0 with *status and the
 * response in resp, or TC_EBACKEND when the server cannot be reached.
 */
int client_call(struct client *c, const char *method, const char *path, const char *body,
		long *status, struct sbuf *resp, struct tc_err *err);
/*
 * A request whose answer is a JSON object: a status >= 400 becomes an error
 * carrying the server's message (404 TC_ENOTFOUND, other 4xx TC_EUSAGE,
 * 5xx TC_EBACKEND).
 */
int client_json(struct client *c, const char *method, const char *path, const char *body,
		struct sbuf *resp, struct tc_err *err);
/*
 * GET path of the server (url as client_open's) for a read verb: with
 * as_json the answer is printed as it came and *out is NULL; else *out is
 * the parsed object (the caller's; TC_EBACKEND when it is not JSON).
 */
int client_get_json(const char *url, const char *path, bool as_json, json_t **out,
		    struct tc_err *err);
/* Stream a server-sent-events answer; on_data gets each "data:" payload. */
int client_events(struct client *c, const char *path,
		  int (*on_data)(void *arg, const char *event, const char *data), void *arg,
		  struct tc_err *err);
/* Is a server configured (--server in argv, or $TRAINCTL_SERVER)? */
bool client_configured(int argc, char **argv);

#endif
