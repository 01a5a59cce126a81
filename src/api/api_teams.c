/*
 * api_teams.c -- the server's teams (docs/server.md, "Teams"): GET
 * /api/v1/teams and /api/v1/teams/{team} (members, guarantee, borrow limit,
 * in use, borrowed, waiting), and POST /api/v1/server/reload, which reads
 * the settings file's teams again (as SIGHUP does) or says why it kept them;
 * and GET /api/v1/queue, the local queue in order with why each job waits.
 */
#include "api/api_int.h"
#include "api/reply.h"
#include "server/server_int.h"

#include <jansson.h>
#include <pthread.h>

int h_teams(struct srv *s, struct MHD_Connection *con, const char *team)
{
	struct sbuf b = SBUF_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = srv_teams_json(s, team, &b);
	pthread_mutex_unlock(&s->mu);
	int ret = rc ? reply_err(con, 404, "no team '%s' on this server", team)
		     : reply_json(con, 200, b.buf);
	sbuf_release(&b);
	return ret;
}

int h_reload(struct srv *s, struct MHD_Connection *con)
{
	struct tc_err err = TC_ERR_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = srv_teams_reload(s, &err);
	size_t n = s->teams.n;
	pthread_mutex_unlock(&s->mu);
	int ret;
	if (rc) {
		ret = reply_err(con, 400, "kept the old settings: %s", err.msg);
	} else {
		struct sbuf b = SBUF_INIT;
		sbuf_addf(&b, "{\"reloaded\":true,\"teams\":%zu}", n);
		ret = reply_json(con, 200, b.buf);
		sbuf_release(&b);
	}
	tc_err_release(&err);
	return ret;
}

int h_queue(struct srv *s, struct MHD_Connection *con, const struct who *w)
{
	pthread_mutex_lock(&s->mu);
	json_t *o = srv_queue_json(s, w->user, w->admin || w->local);
	pthread_mutex_unlock(&s->mu);
	return reply_jsont(con, 200, o);
}
