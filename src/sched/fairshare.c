/* fairshare.c -- the fair-share factor from decayed usage; see fairshare.h. */
#include "sched/fairshare.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One (type, team, user) with its decayed usage; user NULL: the team's own sum. */
struct fs_ent {
	char *type, *team, *user;
	double usage;
	double raw;    /* teams: raw share (guarantee, or FS_NOSHARE of the type's) */
	size_t nusers; /* teams: users seen */
};

struct fs_type {
	char *type;
	double total; /* what u divides by: the capacity, else the decayed usage of everyone */
	double guar;  /* sum of the guarantees of the rows */
	double rawsum; /* sum of raw shares of the teams with a row or usage */
};

struct fs_table {
	struct fs_ent *users, *teams; /* sorted by (type, team, user) */
	size_t nusers, nteams;
	struct fs_type *types;        /* sorted by type */
	size_t ntypes;
};

double fs_decayed(int count, double opened, double stop, double now, double half_life)
{
	if (stop > now)
		stop = now;
	if (!(stop > opened) || count <= 0 || !(half_life > 0))
		return 0;
	/* the integral of 2^(-(now - t)/h) over [opened, stop) */
	double k = M_LN2 / half_life;
	return count * (exp(-k * (now - stop)) - exp(-k * (now - opened))) / k;
}

static int cmp3(const char *ta, const char *ea, const char *ua, const char *tb, const char *eb,
		const char *ub)
{
	int c = strcmp(ta, tb);
	if (!c)
		c = strcmp(ea, eb);
	if (!c)
		c = strcmp(ua ? ua : "", ub ? ub : "");
	return c;
}

static int cmp_ent(const void *x, const void *y)
{
	const struct fs_ent *a = x, *b = y;
	return cmp3(a->type, a->team, a->user, b->type, b->team, b->user);
}

static int cmp_type(const void *x, const void *y)
{
	return strcmp(((const struct fs_type *)x)->type, ((const struct fs_type *)y)->type);
}

/* Merge equal neighbours of sorted v[0..*n) (summing usage, freeing the copies). */
static void merge(struct fs_ent *v, size_t *n)
{
	size_t k = 0;
	for (size_t i = 0; i < *n; i++) {
		if (k && !cmp_ent(&v[k - 1], &v[i])) {
			v[k - 1].usage += v[i].usage;
			if (v[i].raw > v[k - 1].raw)
				v[k - 1].raw = v[i].raw;
			free(v[i].type);
			free(v[i].team);
			free(v[i].user);
			continue;
		}
		v[k++] = v[i];
	}
	*n = k;
}

static struct fs_type *type_of(const struct fs_table *t, const char *type)
{
	struct fs_type key = { (char *)type, 0, 0, 0 };
	return t->ntypes ? bsearch(&key, t->types, t->ntypes, sizeof(key), cmp_type) : NULL;
}

static struct fs_ent *ent_of(struct fs_ent *v, size_t n, const char *type, const char *team,
			     const char *user)
{
	struct fs_ent key = { (char *)type, (char *)team, (char *)user, 0, 0, 0 };
	return n ? bsearch(&key, v, n, sizeof(key), cmp_ent) : NULL;
}

struct fs_table *fs_build(const struct fs_interval *iv, size_t n,
			  const struct sched_team_limit *rows, size_t nrows,
			  const struct sched_dev *devs, size_t ndevs, double now, double half_life)
{
	struct fs_table *t = xcalloc(1, sizeof(*t));
	/* users: one entry per interval, merged */
	t->users = xcalloc(n ? n : 1, sizeof(*t->users));
	for (size_t i = 0; i < n; i++)
		t->users[t->nusers++] = (struct fs_ent){
			xstrdup(iv[i].type), xstrdup(iv[i].team ? iv[i].team : ""), xstrdup(iv[i].user),
			fs_decayed(iv[i].count, iv[i].opened, iv[i].stop, now, half_life), 0, 0
		};
	qsort(t->users, t->nusers, sizeof(*t->users), cmp_ent);
	merge(t->users, &t->nusers);
	/* teams: the users' sums, and the rows (usage 0) */
	t->teams = xcalloc(t->nusers + nrows + 1, sizeof(*t->teams));
	for (size_t i = 0; i < t->nusers; i++)
		t->teams[t->nteams++] = (struct fs_ent){ xstrdup(t->users[i].type),
							 xstrdup(t->users[i].team), NULL,
							 t->users[i].usage, 0, 1 };
	for (size_t r = 0; r < nrows; r++)
		t->teams[t->nteams++] = (struct fs_ent){ xstrdup(rows[r].type), xstrdup(rows[r].team),
							 NULL, 0, rows[r].guarantee, 0 };
	qsort(t->teams, t->nteams, sizeof(*t->teams), cmp_ent);
	/* merge, counting the users: nusers 1 from each user entry, 0 from a row */
	size_t k = 0;
	for (size_t i = 0; i < t->nteams; i++) {
		if (k && !cmp_ent(&t->teams[k - 1], &t->teams[i])) {
			struct fs_ent *m = &t->teams[k - 1];
			m->usage += t->teams[i].usage;
			m->nusers += t->teams[i].nusers;
			if (t->teams[i].raw > m->raw)
				m->raw = t->teams[i].raw;
			free(t->teams[i].type);
			free(t->teams[i].team);
			continue;
		}
		t->teams[k++] = t->teams[i];
	}
	t->nteams = k;
	/* types: totals and guarantees, then each team's raw share */
	t->types = xcalloc(t->nteams + 1, sizeof(*t->types));
	for (size_t i = 0; i < t->nteams; i++) {
		struct fs_ent *e = &t->teams[i];
		if (!t->ntypes || strcmp(t->types[t->ntypes - 1].type, e->type))
			t->types[t->ntypes++] = (struct fs_type){ xstrdup(e->type), 0, 0, 0 };
		struct fs_type *ty = &t->types[t->ntypes - 1];
		ty->total += e->usage;
		ty->guar += e->raw; /* raw holds the guarantee until here */
	}
	for (size_t i = 0; i < t->nteams; i++) {
		struct fs_ent *e = &t->teams[i];
		struct fs_type *ty = type_of(t, e->type);
		e->raw = e->raw > 0 ? e->raw : ty->guar > 0 ? FS_NOSHARE * ty->guar : 1;
		ty->rawsum += e->raw;
	}
	/* the capacity of each type the machine has: all of it busy, decayed alike */
	for (size_t i = 0; i < t->ntypes; i++) {
		size_t nd = 0;
		for (size_t d = 0; d < ndevs; d++)
			nd += !strcmp(devs[d].type, t->types[i].type);
		if (nd && half_life > 0)
			t->types[i].total = (double)nd * half_life / M_LN2;
	}
	return t;
}

void fs_free(struct fs_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nusers; i++) {
		free(t->users[i].type);
		free(t->users[i].team);
		free(t->users[i].user);
	}
	for (size_t i = 0; i < t->nteams; i++) {
		free(t->teams[i].type);
		free(t->teams[i].team);
	}
	for (size_t i = 0; i < t->ntypes; i++)
		free(t->types[i].type);
	free(t->users);
	free(t->teams);
	free(t->types);
	free(t);
}

void fs_factor(const struct fs_table *t, const char *team, const char *user, const char *type,
	       struct fs_factor *out)
{
	if (!team)
		team = "";
	const struct fs_type *ty = t ? type_of(t, type) : NULL;
	const struct fs_ent *te = ty ? ent_of(t->teams, t->nteams, type, team, NULL) : NULL;
	const struct fs_ent *ue = te ? ent_of(t->users, t->nusers, type, team, user) : NULL;
	double guar = ty ? ty->guar : 0, rawsum = ty ? ty->rawsum : 0, total = ty ? ty->total : 0;
	double raw = te ? te->raw : guar > 0 ? FS_NOSHARE * guar : 1;
	if (!te)
		rawsum += raw; /* a team not seen yet joins the sum */
	size_t nusers = (te ? te->nusers : 0) + (ue ? 0 : 1);
	out->team_share = raw / rawsum;
	out->user_share = out->team_share / (double)nusers;
	out->team_usage = te && total > 0 ? te->usage / total : 0;
	out->user_usage = ue && total > 0 ? ue->usage / total : 0;
	double ue_eff = out->user_usage + (out->team_usage - out->user_usage) / (double)nusers;
	out->factor = exp2(-ue_eff / out->user_share);
}
