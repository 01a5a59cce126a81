/*
 * teams.c -- the teams: section of the server's settings file (teams.h).
 */
#include "server/teams.h"
#include "server/config.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/usage.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

struct tload {
	yaml_document_t *doc;
	const char *file;
	struct teams *out;
	struct tc_err *err;
};


static bool name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 64)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-' || *p == '_' || *p == '.'))
			return false;
	return true;
}

static struct team_share *share_of(struct team *t, const char *type, int line)
{
	for (size_t i = 0; i < t->nshare; i++)
		if (!strcmp(t->share[i].type, type))
			return &t->share[i];
	t->share = xrealloc(t->share, (t->nshare + 1) * sizeof(*t->share));
	t->share[t->nshare] = (struct team_share){ xstrdup(type), 0, 0, line };
	return &t->share[t->nshare++];
}

/* guarantee: or borrow: -- a mapping of device type to a count. */
static int take_counts(struct tload *l, struct team *t, const char *key, yaml_node_t *v)
{
	bool guarantee = !strcmp(key, "guarantee");
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, "teams.%s.%s", t->name, key);
	int rc = 0;
	if (v->type != YAML_MAPPING_NODE) {
		rc = srvconf_error(l->err, l->file, srvconf_line(v), k.buf,
				   "must be a mapping of device type to count ({gpu: 4, cpu: 2})");
		goto out;
	}
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *pk = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *pv = yaml_document_get_node(l->doc, p->value);
		const char *type = srvconf_scalar(pk), *num = srvconf_scalar(pv);
		long n;
		if (!type || !device_kind_find(type)) {
			rc = srvconf_error(l->err, l->file, srvconf_line(pk ? pk : v), k.buf,
					   "'%s' is not a device type (%s)", type ? type : "?", device_kind_names());
			goto out;
		}
		if (!num || !parse_long(num, 0, 1 << 20, &n)) {
			rc = srvconf_error(l->err, l->file, srvconf_line(pv ? pv : pk), k.buf,
					   "%s: must be a count of devices (0 or more), not '%s'", type,
					   num ? num : "a list or mapping");
			goto out;
		}
		struct team_share *sh = share_of(t, type, srvconf_line(pk));
		if (guarantee) {
			sh->guarantee = (int)n;
			sh->line = srvconf_line(pk);
		} else {
			sh->borrow = (int)n;
		}
	}
out:
	sbuf_release(&k);
	return rc;
}

static int take_members(struct tload *l, struct team *t, yaml_node_t *v)
{
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, "teams.%s.members", t->name);
	int rc = 0;
	yaml_node_t *one[1] = { v };
	size_t n = 1;
	yaml_node_item_t *items = NULL;
	if (v->type == YAML_SEQUENCE_NODE) {
		items = v->data.sequence.items.start;
		n = (size_t)(v->data.sequence.items.top - items);
	} else if (v->type != YAML_SCALAR_NODE) {
		rc = srvconf_error(l->err, l->file, srvconf_line(v), k.buf,
				   "must be a list of Unix user names (@group for a Unix group)");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *e = items ? yaml_document_get_node(l->doc, items[i]) : one[0];
		const char *s = srvconf_scalar(e);
		if (!s || !name_ok(s[0] == '@' ? s + 1 : s)) {
			rc = srvconf_error(l->err, l->file, srvconf_line(e ? e : v), k.buf,
					   "'%s' is not a user name or @group", s ? s : "a list or mapping");
			goto out;
		}
		t->members = xrealloc(t->members, (t->nmembers + 1) * sizeof(char *));
		t->members[t->nmembers++] = xstrdup(s);
	}
	if (!t->nmembers)
		rc = srvconf_error(l->err, l->file, srvconf_line(v), k.buf, "a team needs at least one member");
out:
	sbuf_release(&k);
	return rc;
}

/*
 * slurm: {account: A, qos: Q} -- where the team's Slurm jobs are charged;
 * account defaults to the team's name.  Values are Slurm names: they go on
 * an #SBATCH line.
 */
static int take_slurm(struct tload *l, struct team *t, yaml_node_t *v)
{
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, "teams.%s.slurm", t->name);
	int rc = 0;
	if (v->type == YAML_SCALAR_NODE && !*srvconf_scalar(v))
		; /* slurm: with nothing: the account is the team's name */
	else if (v->type != YAML_MAPPING_NODE)
		rc = srvconf_error(l->err, l->file, srvconf_line(v), k.buf,
				   "must be a mapping ({account: NAME, qos: NAME})");
	for (yaml_node_pair_t *p = v->type == YAML_MAPPING_NODE ? v->data.mapping.pairs.start : NULL;
	     !rc && p && p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *pk = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *pv = yaml_document_get_node(l->doc, p->value);
		const char *name = srvconf_scalar(pk), *val = srvconf_scalar(pv);
		bool acct = name && !strcmp(name, "account"), qos = name && !strcmp(name, "qos");
		if (!acct && !qos)
			rc = srvconf_error(l->err, l->file, srvconf_line(pk ? pk : v), k.buf,
					   "unknown key '%s' (slurm: has account, qos)", name ? name : "?");
		else if (!name_ok(val))
			rc = srvconf_error(l->err, l->file, srvconf_line(pv ? pv : pk), k.buf,
					   "%s: '%s' is not a Slurm %s name (letters, digits, '-', '_', '.')",
					   name, val ? val : "a list or mapping", name);
		else if (acct && !t->slurm_account)
			t->slurm_account = xstrdup(val);
		else if (qos && !t->slurm_qos)
			t->slurm_qos = xstrdup(val);
		else
			rc = srvconf_error(l->err, l->file, srvconf_line(pk), k.buf, "%s: given twice", name);
	}
	if (!rc && !t->slurm_account)
		t->slurm_account = xstrdup(t->name);
	sbuf_release(&k);
	return rc;
}

/* max_runtime: (a duration up to 365d, as --default-max-runtime) or retention: (an age). */
static int take_time(struct tload *l, struct team *t, bool limit, yaml_node_t *v)
{
	const char *val = srvconf_scalar(v);
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, "teams.%s.%s", t->name, limit ? "max_runtime" : "retention");
	int rc = 0;
	if (limit ? !val || !parse_duration(val, 365L * 86400, &t->max_runtime)
		  : !val || !usage_parse_age(val, &t->retention))
		rc = srvconf_error(l->err, l->file, srvconf_line(v), k.buf,
				   "must be a duration with a unit%s (90m, 24h, 30d), not '%s'",
				   limit ? " up to 365d" : "", val ? val : "a list or mapping");
	sbuf_release(&k);
	return rc;
}

static int take_team(struct tload *l, struct team *t, yaml_node_t *v)
{
	static const char *const keys[] = { "members",	  "guarantee", "borrow",   "default",
					    "slurm",	  "max_runtime", "retention" };
	const size_t nkeys = sizeof(keys) / sizeof(keys[0]);
	struct sbuf k = SBUF_INIT;
	sbuf_addf(&k, "teams.%s", t->name);
	int rc = 0;
	bool have_members = false;
	if (v->type != YAML_MAPPING_NODE) {
		rc = srvconf_error(l->err, l->file, srvconf_line(v), k.buf,
				   "must be a mapping (members:, guarantee:, borrow:, default:, slurm:,"
				   " max_runtime:, retention:)");
		goto out;
	}
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top && !rc;
	     p++) {
		yaml_node_t *pk = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *pv = yaml_document_get_node(l->doc, p->value);
		const char *name = srvconf_scalar(pk);
		size_t which = nkeys;
		for (size_t i = 0; name && i < nkeys; i++)
			if (!strcmp(name, keys[i]))
				which = i;
		if (which == nkeys || !pv) {
			rc = srvconf_error(l->err, l->file, srvconf_line(pk ? pk : v), k.buf,
					   "unknown key '%s' (a team has members, guarantee, borrow, default,"
					   " slurm, max_runtime, retention)",
					   name ? name : "?");
			break;
		}
		if (which == 0) {
			rc = take_members(l, t, pv);
			have_members = true;
		} else if (which == 3) {
			const char *b = srvconf_scalar(pv);
			if (!b || (strcmp(b, "true") && strcmp(b, "false")))
				rc = srvconf_error(l->err, l->file, srvconf_line(pv), k.buf,
						   "default: must be true or false");
			else
				t->is_default = !strcmp(b, "true");
		} else if (which == 4) {
			rc = take_slurm(l, t, pv);
		} else if (which == 5 || which == 6) {
			rc = take_time(l, t, which == 5, pv);
		} else {
			rc = take_counts(l, t, keys[which], pv);
		}
	}
	if (!rc && !have_members)
		rc = srvconf_error(l->err, l->file, t->line, k.buf, "has no members: (Unix users, @group)");
out:
	sbuf_release(&k);
	return rc;
}

/* The users a member entry names: itself, or a group's listed members. */
static void expand(const char *m, char ***users, size_t *n)
{
	if (m[0] != '@') {
		*users = xrealloc(*users, (*n + 1) * sizeof(char *));
		(*users)[(*n)++] = xstrdup(m);
		return;
	}
	struct group *g = getgrnam(m + 1);
	for (char **u = g ? g->gr_mem : NULL; u && *u; u++) {
		*users = xrealloc(*users, (*n + 1) * sizeof(char *));
		(*users)[(*n)++] = xstrdup(*u);
	}
}

/* A user in two teams needs exactly one of them marked default. */
static int check_overlap(const struct teams *ts, struct tc_err *err)
{
	int rc = 0;
	for (size_t a = 0; a < ts->n && !rc; a++) {
		char **users = NULL;
		size_t nu = 0;
		for (size_t m = 0; m < ts->t[a].nmembers; m++)
			expand(ts->t[a].members[m], &users, &nu);
		for (size_t u = 0; u < nu && !rc; u++) {
			size_t in = 0, defaults = 0;
			const struct team *other = NULL;
			for (size_t b = 0; b < ts->n; b++)
				if (teams_member(&ts->t[b], users[u])) {
					in++;
					defaults += ts->t[b].is_default;
					if (b != a && !other)
						other = &ts->t[b];
				}
			if (in > 1 && defaults != 1)
				rc = srvconf_error(err, ts->file, ts->t[a].line, "teams", "user '%s' is in team '%s' and"
						   " team '%s' with %s marked default: true; mark exactly one of"
						   " the user's teams default", users[u], ts->t[a].name,
						   other ? other->name : "?", defaults ? "more than one" : "neither");
		}
		for (size_t u = 0; u < nu; u++)
			free(users[u]);
		free(users);
	}
	return rc;
}

/* fair_share: {enabled: BOOL, half_life: DURATION} (teams.h). */
static int take_fair_share(struct tload *l, yaml_node_t *v)
{
	if (v->type == YAML_SCALAR_NODE && !*srvconf_scalar(v))
		return 0; /* an empty section: the defaults */
	if (v->type != YAML_MAPPING_NODE)
		return srvconf_error(l->err, l->file, srvconf_line(v), "fair_share",
				     "must be a mapping (enabled:, half_life:)");
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
		yaml_node_t *pk = yaml_document_get_node(l->doc, p->key);
		yaml_node_t *pv = yaml_document_get_node(l->doc, p->value);
		const char *name = srvconf_scalar(pk), *val = srvconf_scalar(pv);
		int line = srvconf_line(pv ? pv : pk ? pk : v);
		if (name && !strcmp(name, "enabled")) {
			if (!val || (strcmp(val, "true") && strcmp(val, "false")))
				return srvconf_error(l->err, l->file, line, "fair_share.enabled",
						     "must be true or false, not '%s'",
						     val ? val : "a list or mapping");
			l->out->fs_enabled_set = true;
			l->out->fs_enabled = !strcmp(val, "true");
		} else if (name && !strcmp(name, "half_life")) {
			if (!val || !usage_parse_age(val, &l->out->fs_half_life))
				return srvconf_error(l->err, l->file, line, "fair_share.half_life",
						     "must be a duration such as 7d, 12h, 90m or 30s,"
						     " not '%s'", val ? val : "a list or mapping");
		} else {
			return srvconf_error(l->err, l->file, srvconf_line(pk ? pk : v), "fair_share",
					     "unknown key '%s' (fair_share has enabled, half_life)",
					     name ? name : "?");
		}
	}
	return 0;
}

int teams_load(const char *path, struct teams *out, struct tc_err *err)
{
	teams_free(out);
	out->file = xstrdup(path);
	yaml_document_t doc;
	int rc = srvconf_parse(path, &doc, err);
	if (rc)
		return rc;
	struct tload l = { &doc, path, out, err };
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	yaml_node_t *sec = NULL, *fs = NULL;
	for (yaml_node_pair_t *p = root && root->type == YAML_MAPPING_NODE
					   ? root->data.mapping.pairs.start : NULL;
	     p && p < root->data.mapping.pairs.top; p++) {
		const char *k = srvconf_scalar(yaml_document_get_node(&doc, p->key));
		if (k && !strcmp(k, "teams"))
			sec = yaml_document_get_node(&doc, p->value);
		if (k && !strcmp(k, "fair_share"))
			fs = yaml_document_get_node(&doc, p->value);
	}
	if (fs)
		rc = take_fair_share(&l, fs);
	if (!rc && sec && !(sec->type == YAML_SCALAR_NODE && !*srvconf_scalar(sec))) {
		if (sec->type != YAML_MAPPING_NODE)
			rc = srvconf_error(err, path, srvconf_line(sec), "teams",
					   "must be a mapping of team names to teams");
		for (yaml_node_pair_t *p = sec->type == YAML_MAPPING_NODE
						   ? sec->data.mapping.pairs.start : NULL;
		     !rc && p && p < sec->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(&doc, p->key);
			yaml_node_t *v = yaml_document_get_node(&doc, p->value);
			const char *name = srvconf_scalar(k);
			if (!name_ok(name) || !v) {
				rc = srvconf_error(err, path, srvconf_line(k ? k : sec), "teams",
						   "'%s' is not a team name (letters, digits, '-', '_', '.')",
						   name ? name : "?");
				break;
			}
			if (teams_find(out, name)) {
				rc = srvconf_error(err, path, srvconf_line(k), "teams", "team '%s' is given twice", name);
				break;
			}
			out->t = xrealloc(out->t, (out->n + 1) * sizeof(*out->t));
			struct team *t = &out->t[out->n++];
			memset(t, 0, sizeof(*t));
			t->name = xstrdup(name);
			t->line = srvconf_line(k);
			rc = take_team(&l, t, v);
		}
	}
	yaml_document_delete(&doc);
	if (!rc)
		rc = check_overlap(out, err);
	return rc;
}

int teams_check_devices(const struct teams *ts, const char *const *types, const int *have,
			size_t ntypes, struct tc_err *err)
{
	for (size_t a = 0; a < ts->n; a++)
		for (size_t s = 0; s < ts->t[a].nshare; s++) {
			const struct team_share *sh = &ts->t[a].share[s];
			int sum = 0, machine = 0;
			for (size_t b = 0; b < ts->n; b++) {
				const struct team_share *o = teams_share(&ts->t[b], sh->type);
				sum += o ? o->guarantee : 0;
			}
			for (size_t i = 0; i < ntypes; i++)
				if (!strcmp(types[i], sh->type))
					machine = have[i];
			if (sum > machine && sh->guarantee > 0) {
				struct sbuf k = SBUF_INIT;
				sbuf_addf(&k, "teams.%s.guarantee.%s", ts->t[a].name, sh->type);
				int rc = srvconf_error(err, ts->file, sh->line, k.buf,
						       "the teams are guaranteed %d %s device%s in all, but this"
						       " machine has %d; lower the guarantees", sum, sh->type,
						       sum == 1 ? "" : "s", machine);
				sbuf_release(&k);
				return rc;
			}
		}
	return 0;
}

void teams_free(struct teams *ts)
{
	for (size_t a = 0; a < ts->n; a++) {
		struct team *t = &ts->t[a];
		free(t->name);
		for (size_t m = 0; m < t->nmembers; m++)
			free(t->members[m]);
		free(t->members);
		for (size_t s = 0; s < t->nshare; s++)
			free(t->share[s].type);
		free(t->share);
		free(t->slurm_account);
		free(t->slurm_qos);
	}
	free(ts->t);
	free(ts->file);
	memset(ts, 0, sizeof(*ts));
}

bool teams_member(const struct team *t, const char *user)
{
	for (size_t m = 0; m < t->nmembers; m++) {
		const char *e = t->members[m];
		if (e[0] != '@') {
			if (!strcmp(e, user))
				return true;
			continue;
		}
		struct group *g = getgrnam(e + 1);
		if (!g)
			continue;
		for (char **u = g->gr_mem; *u; u++)
			if (!strcmp(*u, user))
				return true;
		struct passwd *pw = getpwnam(user);
		if (pw && pw->pw_gid == g->gr_gid)
			return true;
	}
	return false;
}

const struct team *teams_find(const struct teams *ts, const char *name)
{
	for (size_t a = 0; name && a < ts->n; a++)
		if (!strcmp(ts->t[a].name, name))
			return &ts->t[a];
	return NULL;
}

const struct team_share *teams_share(const struct team *t, const char *type)
{
	for (size_t s = 0; t && s < t->nshare; s++)
		if (!strcmp(t->share[s].type, type))
			return &t->share[s];
	return NULL;
}

static void names_of(const struct teams *ts, const char *user, struct sbuf *out)
{
	for (size_t a = 0; a < ts->n; a++)
		if (!user || teams_member(&ts->t[a], user))
			sbuf_addf(out, "%s%s", out->len ? ", " : "", ts->t[a].name);
}

int teams_pick(const struct teams *ts, const char *user, const char *asked,
	       const struct team **out, struct tc_err *err)
{
	*out = NULL;
	if (!ts->n) {
		if (asked && *asked)
			return tc_error(err, TC_EUSAGE, "team '%s': this server has no teams", asked);
		return 0;
	}
	struct sbuf names = SBUF_INIT;
	int rc = 0;
	if (asked && *asked) {
		const struct team *t = teams_find(ts, asked);
		if (!t) {
			names_of(ts, NULL, &names);
			rc = tc_error(err, TC_EUSAGE, "team '%s' does not exist (the teams: %s)", asked,
				      names.buf);
		} else if (!teams_member(t, user)) {
			names_of(ts, user, &names);
			rc = tc_error(err, TC_EUSAGE, "user '%s' is not a member of team '%s' (%s)", user,
				      asked, names.len ? names.buf : "the user is in no team");
		} else {
			*out = t;
		}
		sbuf_release(&names);
		return rc;
	}
	const struct team *one = NULL, *def = NULL;
	size_t in = 0;
	for (size_t a = 0; a < ts->n; a++)
		if (teams_member(&ts->t[a], user)) {
			in++;
			one = &ts->t[a];
			if (ts->t[a].is_default)
				def = &ts->t[a];
		}
	if (in == 1)
		*out = one;
	else if (in > 1 && def)
		*out = def;
	else if (in > 1) {
		names_of(ts, user, &names);
		rc = tc_error(err, TC_EUSAGE, "user '%s' is in several teams (%s) and none is its"
			      " default: name one with --team", user, names.buf);
	} else {
		names_of(ts, NULL, &names);
		rc = tc_error(err, TC_EUSAGE, "user '%s' is in no team of this server (the teams: %s);"
			      " ask the operator to add it to one", user, names.buf);
	}
	sbuf_release(&names);
	return rc;
}
