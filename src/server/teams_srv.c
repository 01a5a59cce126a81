/*
 * teams_srv.c -- the server's teams (server/teams.h) in the running server:
 * loaded at start and on reload (SIGHUP, POST /api/v1/server/reload) from
 * the settings file, turned into the scheduler's rows (sched.h rules 9-11),
 * a job's team picked at admission, and the teams as JSON for the API.
 * Callers hold s->mu unless a function says otherwise.
 */
#include "server/server_int.h"
#include "core/json.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "server/srvlog.h"

#include <stdlib.h>
#include <string.h>

/* The scheduler's rows of ts (pointing into ts). */
static void limits_of(const struct teams *ts, struct sched_team_limit **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	size_t alloc = 0;
	for (size_t a = 0; a < ts->n; a++)
		for (size_t i = 0; i < ts->t[a].nshare; i++) {
			const struct team_share *sh = &ts->t[a].share[i];
			XGROW(*out, *n + 1, alloc);
			(*out)[(*n)++] = (struct sched_team_limit){ ts->t[a].name, sh->type, sh->guarantee,
								    sh->borrow };
		}
}

int srv_teams_load(struct srv *s, struct tc_err *err)
{
	if (!s->o.config)
		return 0;
	struct teams ts = { 0 };
	int rc = teams_load(s->o.config, &ts, err);
	if (!rc) {
		/* the machine's devices per type, as the scheduler has them */
		const char *types[16];
		int have[16];
		size_t nt = 0;
		for (size_t i = 0; i < s->ndevs; i++) {
			size_t t = 0;
			while (t < nt && strcmp(types[t], s->devs[i].type))
				t++;
			if (t == nt && nt < 16) {
				types[nt] = s->devs[i].type;
				have[nt++] = 0;
			}
			if (t < nt)
				have[t]++;
		}
		rc = teams_check_devices(&ts, types, have, nt, err);
	}
	if (rc) {
		teams_free(&ts);
		return rc; /* the old teams stay */
	}
	teams_free(&s->teams);
	free(s->team_limits);
	s->teams = ts;
	limits_of(&s->teams, &s->team_limits, &s->nteam_limits);
	/* jobs keep the names of their teams: a team gone from the file has no row left */
	s->dirty = true;
	/* the fair-share table holds the old rows' shares (and the old half-life): read it again */
	srv_fairshare_end(s);
	s->fs_next = 0;
	/* a team's retention: may have changed: apply it at the next round, not in an hour */
	s->next_retention = 0;
	return 0;
}

int srv_teams_reload(struct srv *s, struct tc_err *err)
{
	int rc = srv_teams_load(s, err);
	if (rc)
		srvlog(SRVLOG_WARNING, "reload: kept the old settings: %s", err->msg);
	else
		srvlog_act(s->o.quiet, "reload: %s: %zu team%s", s->o.config ? s->o.config : "no file",
			   s->teams.n, s->teams.n == 1 ? "" : "s");
	srv_wake(s);
	return rc;
}

void srv_teams_end(struct srv *s)
{
	srv_fairshare_end(s);
	teams_free(&s->teams);
	free(s->team_limits);
	s->team_limits = NULL;
	s->nteam_limits = 0;
}

int srv_team_pick(struct srv *s, const char *user, const char *asked, bool locked, char **team,
		  long *max_runtime, struct tc_err *err)
{
	const struct team *t = NULL;
	if (!locked)
		pthread_mutex_lock(&s->mu);
	int rc = teams_pick(&s->teams, user, asked, &t, err);
	*team = t ? xstrdup(t->name) : NULL;
	*max_runtime = t ? t->max_runtime : 0;
	if (!locked)
		pthread_mutex_unlock(&s->mu);
	return rc;
}

double srv_team_retention(const struct srv *s, const char *team)
{
	const struct team *t = team ? teams_find(&s->teams, team) : NULL;
	return t && t->retention > 0 ? t->retention : s->o.retention;
}

/* {"gpu": N, ...} of a per-type count over the team's rows and the types its jobs use. */
static void add_counts(struct sbuf *b, const char *key, const char *const *types, const int *v,
		       size_t n)
{
	sbuf_addf(b, ",\"%s\":{", key);
	for (size_t i = 0; i < n; i++) {
		if (i)
			sbuf_addch(b, ',');
		json_add_str(b, types[i]);
		sbuf_addf(b, ":%d", v[i]);
	}
	sbuf_addch(b, '}');
}

#define TEAM_WAITING_MAX 100 /* waiting jobs listed per team, first in queue order */

/* The scheduler's view of the jobs now (as server.c's round builds it), for sched_why. */
struct schedview {
	struct sched_job *sj;
	size_t *queue, nqueue;
	struct sched_in in;
};

static void schedview_make(struct srv *s, struct schedview *v)
{
	v->sj = srv_sched_view(s);
	v->queue = xcalloc(s->njobs ? s->njobs : 1, sizeof(*v->queue));
	v->nqueue = 0;
	for (size_t i = 0; i < s->njobs; i++)
		if (v->sj[i].state == SJ_QUEUED)
			v->queue[v->nqueue++] = i;
	sched_sort(v->sj, v->queue, v->nqueue);
	v->in = (struct sched_in){ v->sj, s->njobs, v->queue, v->nqueue, s->devs, s->ndevs,
				   s->quotas, s->nquotas, now_wall(), s->team_limits,
				   s->nteam_limits };
}

/* ,"waiting":[{"id", "name", "user", "type", "count", "why"}, ...] of team t, in queue order */
static void waiting_json(const struct schedview *v, const struct team *t, struct sbuf *b)
{
	sbuf_adds(b, ",\"waiting\":[");
	size_t n = 0;
	for (size_t q = 0; q < v->nqueue && n < TEAM_WAITING_MAX; q++) {
		const struct sched_job *j = &v->sj[v->queue[q]];
		if (!j->team || strcmp(j->team, t->name))
			continue;
		sbuf_adds(b, n++ ? ",{\"id\":" : "{\"id\":");
		json_add_str(b, j->id);
		sbuf_adds(b, ",\"user\":");
		json_add_str(b, j->user);
		sbuf_adds(b, ",\"type\":");
		json_add_str(b, j->type);
		sbuf_addf(b, ",\"count\":%d,\"why\":", j->count);
		json_add_str(b, sched_wait_name(sched_why(&v->in, v->queue[q])));
		sbuf_addch(b, '}');
	}
	sbuf_addch(b, ']');
}

void srv_team_counts(const struct srv *s, const struct team *t, struct team_counts *c)
{
	memset(c, 0, sizeof(*c));
	double now = now_wall();
	for (size_t i = 0; i < t->nshare && c->ntypes < TEAM_TYPES; i++, c->ntypes++) {
		c->types[c->ntypes] = t->share[i].type;
		c->guarantee[c->ntypes] = t->share[i].guarantee;
		c->borrow[c->ntypes] = t->share[i].borrow;
	}
	c->nshare = c->ntypes;
	for (size_t k = 0; k < s->njobs; k++) {
		const struct sjob *j = &s->jobs[k];
		if (!j->team || strcmp(j->team, t->name))
			continue;
		size_t i = 0;
		while (i < c->ntypes && strcmp(c->types[i], j->type))
			i++;
		if (i == c->ntypes && c->ntypes < TEAM_TYPES)
			c->types[c->ntypes++] = j->type; /* a type it has no row for: guarantee 0, no limit */
		if (i == c->ntypes)
			continue;
		if (j->st == SJ_RUNNING || j->st == SJ_STOPPING) {
			c->in_use[i] += j->count;
			c->running++;
		} else if (j->st == SJ_QUEUED) {
			c->waiting[i] += j->count;
			c->queued++;
			double since = j->queued_at > 0 ? j->queued_at : j->created;
			if (since > 0 && now - since > c->oldest_wait)
				c->oldest_wait = now - since;
		}
	}
	for (size_t i = 0; i < c->ntypes; i++)
		c->borrowed[i] = c->in_use[i] > c->guarantee[i] ? c->in_use[i] - c->guarantee[i] : 0;
}

static void team_json(struct srv *s, const struct schedview *v, const struct team *t,
		      struct sbuf *b)
{
	struct team_counts c;
	srv_team_counts(s, t, &c);
	sbuf_adds(b, "{\"name\":");
	json_add_str(b, t->name);
	sbuf_adds(b, ",\"members\":[");
	for (size_t m = 0; m < t->nmembers; m++) {
		if (m)
			sbuf_addch(b, ',');
		json_add_str(b, t->members[m]);
	}
	sbuf_addf(b, "],\"default\":%s", t->is_default ? "true" : "false");
	add_counts(b, "guarantee", c.types, c.guarantee, c.nshare);
	add_counts(b, "borrow", c.types, c.borrow, c.nshare);
	add_counts(b, "in_use", c.types, c.in_use, c.ntypes);
	add_counts(b, "borrowed", c.types, c.borrowed, c.ntypes);
	add_counts(b, "waiting_devices", c.types, c.waiting, c.ntypes);
	sbuf_addf(b, ",\"running_jobs\":%d,\"waiting_jobs\":%d", c.running, c.queued);
	if (t->slurm_account) { /* its Slurm jobs' account (docs/slurm.md); h_teams adds sshare's numbers */
		sbuf_adds(b, ",\"slurm\":{\"account\":");
		json_add_str(b, t->slurm_account);
		sbuf_adds(b, ",\"qos\":");
		if (t->slurm_qos)
			json_add_str(b, t->slurm_qos);
		else
			sbuf_adds(b, "null");
		sbuf_addch(b, '}');
	}
	waiting_json(v, t, b);
	sbuf_addch(b, '}');
}

int srv_teams_json(struct srv *s, const char *name, struct sbuf *out)
{
	const struct team *t = name ? teams_find(&s->teams, name) : NULL;
	if (name && !t)
		return -1;
	struct schedview v;
	schedview_make(s, &v);
	if (t) {
		team_json(s, &v, t, out);
	} else {
		sbuf_adds(out, "{\"teams\":[");
		for (size_t a = 0; a < s->teams.n; a++) {
			if (a)
				sbuf_addch(out, ',');
			team_json(s, &v, &s->teams.t[a], out);
		}
		sbuf_adds(out, "]}");
	}
	free(v.sj);
	free(v.queue);
	return 0;
}
