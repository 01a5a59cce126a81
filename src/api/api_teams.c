/*
 * api_teams.c -- the server's teams (docs/server.md, "Teams"): GET
 * /api/v1/teams and /api/v1/teams/{team} (members, guarantee, borrow limit,
 * in use, borrowed, waiting; whether the caller is a member, and the team
 * the caller's jobs get without one named; one team's also Slurm's fair
 * share for its account, docs/slurm.md), and POST /api/v1/server/reload, which reads
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
static void add_team_slurm(json_t *o)
{
	json_t *sl = json_object_get(o, "slurm");
	const char *acct = json_string_value(json_object_get(sl, "account"));
	if (!acct)
		return;
	json_t *share = slurm_share_json(acct);
	json_object_update(sl, share);
	json_decref(share);
}

/* Each team's "member": whether the caller is in it (by name or @group): the teams they may submit to. */
static void mark_members(const struct teams *ts, json_t *team, const char *user)
{
	const struct team *t = teams_find(ts, json_string_value(json_object_get(team, "name")));
	json_object_set_new(team, "member", json_boolean(t && user && teams_member(t, user)));
}

int h_teams(struct srv *s, struct MHD_Connection *con, const char *team, const struct who *w)
{
	struct sbuf b = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	const struct team *mine = NULL;
	json_t *o = NULL;
	pthread_mutex_lock(&s->mu);
	int rc = srv_teams_json(s, team, &b);
	if (!rc)
		o = json_loadb(b.buf, b.len, 0, NULL);
	if (json_is_object(o)) {
		json_t *list = team ? NULL : json_object_get(o, "teams"), *t;
		size_t i;
		if (team)
			mark_members(&s->teams, o, w->user);
		json_array_foreach(list, i, t)
			mark_members(&s->teams, t, w->user);
		/* the team a job of the caller's gets without one named (null: none, or a choice) */
		if (!team && teams_pick(&s->teams, w->user, NULL, &mine, &err))
			mine = NULL;
		if (!team)
			json_object_set_new(o, "your_team", mine ? json_string(mine->name) : json_null());
	}
	pthread_mutex_unlock(&s->mu);
	sbuf_release(&b);
	tc_err_release(&err);
	if (rc)
		return reply_err(con, 404, "no team '%s' on this server", team);
	if (!json_is_object(o)) {
		json_decref(o);
		return reply_err(con, 500, "the teams' answer could not be built");
	}
	if (team)
		add_team_slurm(o);
	return reply_jsont(con, 200, o);
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
