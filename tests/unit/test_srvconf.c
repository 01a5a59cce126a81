/*
 * test_srvconf.c -- the server's settings file (server/config.h): keys by
 * kind into option words with their lines, errors with file, line and key.
 */
#include "test.h"
#include "server/config.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct srvconf_key keys[] = {
	{ "listen", SRVCONF_VALUE, 'l' }, { "quiet", SRVCONF_FLAG, 'q' },
	{ "allow-root-jobs", SRVCONF_FLAG, 'R' }, { "host-name", SRVCONF_LIST, 'H' },
	{ "quota", SRVCONF_PAIRS, 'Q' }, { "state", SRVCONF_PATH, 'S' },
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
