/*
 * api_teams.c -- the server's teams (docs/server.md, "Teams"): GET
 * /api/v1/teams and /api/v1/teams/{team} (members, guarantee, borrow limit,
 * in use, borrowed, waiting; one team's also Slurm's fair share for its
 * account, docs/slurm.md), and POST /api/v1/server/reload, which reads
 * the settings file's teams again (as SIGHUP does) or says why it kept them;
 * and GET /api/v1/queue, the local queue in order with why each job waits.
 */
#include "api/api_int.h"
#include "api/reply.h"
#include "backend/slurm_acct.h"
#include "server/server_int.h"

#include <jansson.h>
#include <pthread.h>

/*
 * One team with a Slurm account: Slurm's fair share for it joins its
 * "slurm" object, asked with sshare after the lock is let go (it may take
 * SLURM_ACCT_TIMEOUT_MS).
 */
static int reply_team_slurm(struct MHD_Connection *con, const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	json_t *sl = json_object_get(o, "slurm");
	const char *acct = json_string_value(json_object_get(sl, "account"));
	if (!acct) {
		json_decref(o);
		return reply_json(con, 200, text);
	}
	json_t *share = slurm_share_json(acct);
	json_object_update(sl, share);
	json_decref(share);
	return reply_jsont(con, 200, o);
}

int h_teams(struct srv *s, struct MHD_Connection *con, const char *team)
{
	struct sbuf b = SBUF_INIT;
	pthread_mutex_lock(&s->mu);
	int rc = srv_teams_json(s, team, &b);
	pthread_mutex_unlock(&s->mu);
	int ret = rc ? reply_err(con, 404, "no team '%s' on this server", team)
		     : team ? reply_team_slurm(con, b.buf) : reply_json(con, 200, b.buf);
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
