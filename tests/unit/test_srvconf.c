/*
 * test_srvconf.c -- the server's settings file (server/config.h): keys by
 * kind into option words with their lines, errors with file, line and key.
 */
#include "test.h"
#include "server/config.h"
#include "server/teams.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct srvconf_key keys[] = {
	{ "listen", SRVCONF_VALUE, 'l' }, { "quiet", SRVCONF_FLAG, 'q' },
	{ "allow-root-jobs", SRVCONF_FLAG, 'R' }, { "host-name", SRVCONF_LIST, 'H' },
	{ "quota", SRVCONF_PAIRS, 'Q' }, { "state", SRVCONF_PATH, 'S' },
	{ "teams", SRVCONF_SECTION, 0 },
	{ NULL, 0, 0 },
};

/* Load text as a file in a fresh folder; its path in path (of size 64). */
static int load(const char *text, char *path, struct srvconf *c, struct tc_err *err)
{
	char dir[] = "/tmp/tc-srvconf-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, 64, "%s/s.yaml", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK(fclose(f) == 0);
	int rc = srvconf_load(path, keys, c, err);
	unlink(path);
	rmdir(dir);
	return rc;
}

TEST(srvconf_words_and_lines)
{
	struct srvconf c = SRVCONF_INIT;
	struct tc_err err = TC_ERR_INIT;
	char path[64];
	CHECK_INT(load("# comment\nlisten: 0.0.0.0:1\nquiet: true\nallow-root-jobs: false\n"
		       "host-name: [a, b]\nquota:\n  alice: 4\n  '*': 2\nstate: st\n", path, &c, &err), 0);
	CHECK_INT(c.n, 7);
	CHECK_STR(c.w[0].arg, "--listen=0.0.0.0:1");
	CHECK_INT(c.w[0].line, 2);
	CHECK_INT(c.w[0].val, 'l');
	CHECK_STR(c.w[1].arg, "--quiet");
	CHECK_STR(c.w[2].arg, "--host-name=a");
	CHECK_STR(c.w[3].arg, "--host-name=b");
	CHECK_STR(c.w[4].arg, "--quota=alice=4");
	CHECK_INT(c.w[4].line, 7);
	CHECK_STR(c.w[5].arg, "--quota=*=2");
	/* a relative path is the file's folder's */
	char want[80];
	snprintf(want, sizeof(want), "--state=%.*s/st", (int)(strrchr(path, '/') - path), path);
	CHECK_STR(c.w[6].arg, want);
	/* a word its parser refused: blamed on its line and key */
	tc_error(&err, TC_EUSAGE, "server: --quota takes USER=N");
	srvconf_blame(&c, 5, &err);
	CHECK(strstr(err.msg, "s.yaml:8: quota: --quota takes USER=N") != NULL);
	CHECK_INT(err.code, TC_ESPEC);
	tc_err_release(&err);
	srvconf_free(&c);
}

TEST(srvconf_empty_file_sets_nothing)
{
	struct srvconf c = SRVCONF_INIT;
	struct tc_err err = TC_ERR_INIT;
	char path[64];
	CHECK_INT(load("# only comments\n#listen: x\n", path, &c, &err), 0);
	CHECK_INT(c.n, 0);
	srvconf_free(&c);
}

TEST(srvconf_errors)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{ "listn: x\n", ":1: unknown key 'listn' (did you mean 'listen'?)" },
		{ "zzz: x\n", ":1: unknown key 'zzz' (the keys are" },
		{ "listen: [a]\n", ":1: listen: must be a single value, not a list" },
		{ "listen:\n", ":1: listen: has no value" },
		{ "quiet: 1\n", ":1: quiet: must be true or false, not '1'" },
		{ "host-name: {a: b}\n", ":1: host-name: must be a value or a list of them" },
		{ "quota: x\n", ":1: quota: must be a mapping (NAME: N) or a list of NAME=N" },
		{ "listen: a\nquiet: true\nlisten: b\n", ":3: key 'listen' is given twice" },
		{ "[1]\n", ":1: the file must be a mapping" },
		{ "listen: a\n\tquiet: true\n", ":2: a tab" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct srvconf c = SRVCONF_INIT;
		struct tc_err err = TC_ERR_INIT;
		char path[64];
		CHECK_INT(load(cases[i].text, path, &c, &err), TC_ESPEC);
		CHECK_CONTAINS(err.msg, cases[i].msg);
		tc_err_release(&err);
		srvconf_free(&c);
	}
}


/* ---- the teams: section (server/teams.h) ---- */

/* teams_load of text; *msg: its error (heap) or NULL. */
static int load_teams(const char *text, struct teams *ts, char **msg)
{
	char dir[] = "/tmp/tc-teams-XXXXXX";
	char path[64];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/s.yaml", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK(fclose(f) == 0);
	struct tc_err err = TC_ERR_INIT;
	int rc = teams_load(path, ts, &err);
	*msg = rc && err.msg ? strdup(err.msg) : NULL;
	tc_err_release(&err);
	unlink(path);
	rmdir(dir);
	return rc;
}

static const char TEAMS[] = "listen: 127.0.0.1:1\n"
			    "teams:\n"
			    "  vision:\n"
			    "    members: [alice, bob]\n"
			    "    guarantee: {gpu: 4, cpu: 2}\n"
			    "    borrow: {gpu: 2}\n"
			    "    default: true\n"
			    "  nlp:\n"
			    "    members: alice\n"
			    "    guarantee: {gpu: 2}\n";

TEST(teams_section_is_no_option_word)
{
	struct srvconf c = SRVCONF_INIT;
	struct tc_err err = TC_ERR_INIT;
	char path[64];
	CHECK_INT(load(TEAMS, path, &c, &err), 0);
	CHECK_INT(c.n, 1);
	CHECK_STR(c.w[0].arg, "--listen=127.0.0.1:1");
	srvconf_free(&c);
	tc_err_release(&err);
}

TEST(teams_load_members_guarantees_and_default)
{
	struct teams ts = { 0 };
	char *msg = NULL;
	CHECK_INT(load_teams(TEAMS, &ts, &msg), 0);
	CHECK_INT(ts.n, 2);
	const struct team *v = teams_find(&ts, "vision");
	CHECK(v && v->is_default && v->nmembers == 2);
	CHECK_INT(teams_share(v, "gpu")->guarantee, 4);
	CHECK_INT(teams_share(v, "gpu")->borrow, 2);
	CHECK_INT(teams_share(v, "cpu")->guarantee, 2);
	CHECK_INT(teams_share(v, "cpu")->borrow, 0);
	CHECK(teams_share(v, "npu") == NULL);
	CHECK(teams_member(v, "bob") && !teams_member(v, "carol"));
	/* alice is in both: her default; bob in one; carol in none */
	const struct team *t = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(teams_pick(&ts, "alice", NULL, &t, &err), 0);
	CHECK_STR(t->name, "vision");
	CHECK_INT(teams_pick(&ts, "alice", "nlp", &t, &err), 0);
	CHECK_STR(t->name, "nlp");
	CHECK(teams_pick(&ts, "bob", "nlp", &t, &err) == TC_EUSAGE);
	CHECK(strstr(err.msg, "user 'bob' is not a member of team 'nlp' (vision)") != NULL);
	CHECK(teams_pick(&ts, "carol", NULL, &t, &err) == TC_EUSAGE);
	CHECK(strstr(err.msg, "user 'carol' is in no team") != NULL);
	CHECK(teams_pick(&ts, "bob", "nosuch", &t, &err) == TC_EUSAGE);
	CHECK(strstr(err.msg, "team 'nosuch' does not exist (the teams: vision, nlp)") != NULL);
	/* guarantees against the machine */
	const char *types[] = { "gpu", "cpu" };
	int have[] = { 6, 2 };
	CHECK_INT(teams_check_devices(&ts, types, have, 2, &err), 0);
	have[0] = 5;
	CHECK(teams_check_devices(&ts, types, have, 2, &err) == TC_ESPEC);
	CHECK(strstr(err.msg, "s.yaml:5: teams.vision.guarantee.gpu: the teams are guaranteed 6 gpu"
			      " devices in all, but this machine has 5") != NULL);
	tc_err_release(&err);
	teams_free(&ts);
	/* no teams: no team, and none may be asked for */
	CHECK_INT(load_teams("listen: x\n", &ts, &msg), 0);
	CHECK_INT(teams_pick(&ts, "alice", NULL, &t, &err), 0);
	CHECK(t == NULL);
	CHECK(teams_pick(&ts, "alice", "vision", &t, &err) == TC_EUSAGE);
	tc_err_release(&err);
	teams_free(&ts);
}

TEST(teams_slurm_account_and_qos)
{
	struct teams ts = { 0 };
	char *msg = NULL;
	CHECK_INT(load_teams("teams:\n  a:\n    members: [x]\n    slurm: {account: acct-a, qos: high}\n"
			     "  b:\n    members: [y]\n    slurm: {qos: low}\n"
			     "  c:\n    members: [z]\n", &ts, &msg), 0);
	const struct team *a = teams_find(&ts, "a"), *b = teams_find(&ts, "b"), *c = teams_find(&ts, "c");
	CHECK_STR(a->slurm_account, "acct-a");
	CHECK_STR(a->slurm_qos, "high");
	CHECK_STR(b->slurm_account, "b"); /* the account defaults to the team's name */
	CHECK_STR(b->slurm_qos, "low");
	CHECK(c->slurm_account == NULL && c->slurm_qos == NULL); /* no slurm: no --account */
	teams_free(&ts);
}

TEST(teams_max_runtime_and_retention)
{
	struct teams ts = { 0 };
	char *msg = NULL;
	CHECK_INT(load_teams("teams:\n  a:\n    members: [x]\n    max_runtime: 90m\n"
			     "    retention: 30d\n  b:\n    members: [y]\n", &ts, &msg), 0);
	const struct team *a = teams_find(&ts, "a"), *b = teams_find(&ts, "b");
	CHECK(a->max_runtime == 90 * 60 && a->retention == 30 * 86400.0);
	CHECK(b->max_runtime == 0 && b->retention == 0); /* the server's defaults */
	teams_free(&ts);
}

TEST(teams_errors_name_file_line_and_key)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "teams:\n  v:\n    members: [a]\n    colour: red\n",
		  ":4: teams.v: unknown key 'colour'" },
		{ "teams:\n  a:\n    members: [x]\n  b:\n    members: [x]\n",
		  ":2: teams: user 'x' is in team 'a' and team 'b' with neither marked default" },
		{ "teams:\n  a:\n    members: [x]\n    default: true\n  b:\n    members: [x]\n"
		  "    default: true\n", "with more than one marked default" },
		{ "teams:\n  a:\n    members: [x]\n    guarantee: {gpx: 1}\n",
		  ":4: teams.a.guarantee: 'gpx' is not a device type" },
		{ "teams:\n  a:\n    members: [x]\n    borrow: {gpu: -1}\n",
		  ":4: teams.a.borrow: gpu: must be a count of devices" },
		{ "teams:\n  a:\n    guarantee: {gpu: 1}\n", ":2: teams.a: has no members" },
		{ "teams:\n  a b:\n    members: [x]\n", ":2: teams: 'a b' is not a team name" },
		{ "teams: [a]\n", ":1: teams: must be a mapping" },
		{ "teams:\n  a:\n    members: [x]\n  a:\n    members: [y]\n",
		  ":4: teams: team 'a' is given twice" },
		{ "teams:\n  a:\n    members: [x]\n    slurm:\n      acount: a\n",
		  ":5: teams.a.slurm: unknown key 'acount' (slurm: has account, qos)" },
		{ "teams:\n  a:\n    members: [x]\n    slurm: {account: 'a b'}\n",
		  ":4: teams.a.slurm: account: 'a b' is not a Slurm account name" },
		{ "teams:\n  a:\n    members: [x]\n    slurm: ml\n",
		  ":4: teams.a.slurm: must be a mapping" },
		{ "teams:\n  a:\n    members: [x]\n    max_runtime: 90\n",
		  ":4: teams.a.max_runtime: must be a duration with a unit up to 365d" },
		{ "teams:\n  a:\n    members: [x]\n    max_runtime: 400d\n",
		  ":4: teams.a.max_runtime: must be a duration" },
		{ "teams:\n  a:\n    members: [x]\n    retention: soon\n",
		  ":4: teams.a.retention: must be a duration with a unit (90m, 24h, 30d), not 'soon'" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct teams ts = { 0 };
		char *msg = NULL;
		CHECK_INT(load_teams(cases[i].text, &ts, &msg), TC_ESPEC);
		if (!msg || !strstr(msg, cases[i].want))
			fprintf(stderr, "case %zu: %s\n", i, msg ? msg : "(none)");
		CHECK(msg && strstr(msg, cases[i].want));
		free(msg);
		teams_free(&ts);
	}
}
