/* test_secret.c -- the secret store, names, masking, the handover, and env: value forms in specs */
#include "test.h"

#include "core/sbuf.h"
#include "core/util.h"
#include "launch/launch.h"
#include "secret/secret.h"
#include "spec/spec.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(names)
{
	const char *good[] = { "a", "TOKEN", "hf_token", "aws.key-2", "0", NULL };
	const char *bad[] = { "", ".", "..", "../x", "a/b", "/abs", ".hidden", "a b", "a\nb",
			      "é", "a=b", "a;b", NULL };
	for (int i = 0; good[i]; i++)
		CHECK(secret_name_ok(good[i]));
	for (int i = 0; bad[i]; i++)
		CHECK(!secret_name_ok(bad[i]));
	char longname[SECRET_NAME_MAX + 2];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[SECRET_NAME_MAX + 1] = '\0';
	CHECK(!secret_name_ok(longname));
	longname[SECRET_NAME_MAX] = '\0';
	CHECK(secret_name_ok(longname));
}

TEST(store_round_trip)
{
	struct sbuf dir = SBUF_INIT, v = SBUF_INIT;
	sbuf_addf(&dir, "%s/home/secrets", test_tmpdir());
	CHECK_INT(mkdir(test_tmpdir(), 0755) == 0 || 1, 1);
	struct sbuf home = SBUF_INIT;
	sbuf_addf(&home, "%s/home", test_tmpdir());
	CHECK_INT(mkdir(home.buf, 0755), 0);
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(secret_put(dir.buf, "b", "two", 3, &err), 0);
	CHECK_INT(secret_put(dir.buf, "a", "one", 3, &err), 0);
	CHECK_INT(secret_put(dir.buf, "a", "uno", 3, &err), 0); /* replaced */
	struct stat sb;
	CHECK_INT(stat(dir.buf, &sb), 0);
	CHECK_INT(sb.st_mode & 0777, 0700);
	struct sbuf f = SBUF_INIT;
	sbuf_addf(&f, "%s/a", dir.buf);
	CHECK_INT(stat(f.buf, &sb), 0);
	CHECK_INT(sb.st_mode & 0777, 0600);
	CHECK_INT(secret_get(dir.buf, "a", &v, &err), 0);
	CHECK_STR(v.buf, "uno");
	struct strvec names = STRVEC_INIT;
	CHECK_INT(secret_list(dir.buf, &names, &err), 0);
	CHECK_INT(names.nr, 2);
	CHECK_STR(names.v[0], "a");
	CHECK_STR(names.v[1], "b");
	CHECK_INT(secret_remove(dir.buf, "b", &err), 0);
	CHECK_INT(secret_remove(dir.buf, "b", &err), TC_ENOTFOUND);
	CHECK(!secret_exists(dir.buf, "b"));
	CHECK_INT(secret_put(dir.buf, "../x", "v", 1, &err), TC_EINPUT);
	/* a first use: the state folder made on the way, private */
	struct sbuf deep = SBUF_INIT;
	sbuf_addf(&deep, "%s/new/state/secrets", test_tmpdir());
	CHECK_INT(secret_put(deep.buf, "a", "v", 1, &err), 0);
	sbuf_reset(&deep);
	sbuf_addf(&deep, "%s/new/state", test_tmpdir());
	CHECK_INT(stat(deep.buf, &sb), 0);
	CHECK_INT(sb.st_mode & 0777, 0700);
	sbuf_release(&deep);
	CHECK_INT(secret_put(dir.buf, "n", "a\0b", 3, &err), TC_EINPUT);
	/* a link planted in the store is not followed */
	struct sbuf target = SBUF_INIT, link = SBUF_INIT;
	sbuf_addf(&target, "%s/outside", test_tmpdir());
	CHECK_INT(write_file_atomic(target.buf, "leak", 4, &err), 0);
	sbuf_addf(&link, "%s/evil", dir.buf);
	CHECK_INT(symlink(target.buf, link.buf), 0);
	sbuf_reset(&v);
	CHECK_INT(secret_get(dir.buf, "evil", &v, &err), TC_ENOTFOUND);
	strvec_clear(&names);
	CHECK_INT(secret_list(dir.buf, &names, &err), 0);
	CHECK_INT(names.nr, 1); /* "a": the link is not listed */
	/* a missing store lists nothing and gets nothing */
	strvec_clear(&names);
	CHECK_INT(secret_list("/nonexistent/secrets", &names, &err), 0);
	CHECK_INT(names.nr, 0);
	CHECK_INT(secret_get("/nonexistent/secrets", "a", &v, &err), TC_ENOTFOUND);
	strvec_clear(&names);
	sbuf_release(&dir);
	sbuf_release(&home);
	sbuf_release(&v);
	sbuf_release(&f);
	sbuf_release(&target);
	sbuf_release(&link);
	tc_err_release(&err);
}

TEST(trim)
{
	const char *in[] = { "abc\n", "abc\r\n", "abc", "abc\n\n", "\n", NULL };
	const char *out[] = { "abc", "abc", "abc", "abc\n", "" };
	for (int i = 0; in[i]; i++) {
		struct sbuf v = SBUF_INIT;
		sbuf_adds(&v, in[i]);
		secret_trim(&v);
		CHECK_STR(v.buf ? v.buf : "", out[i]);
		sbuf_release(&v);
	}
}

TEST(mask)
{
	struct strvec m = STRVEC_INIT;
	strvec_push(&m, "hunter22");
	strvec_push(&m, "hunter2233"); /* the longest at one place wins */
	struct sbuf out = SBUF_INIT;
	const char *line = "pw=hunter22 and hunter2233!\n";
	CHECK(secret_mask(&m, line, strlen(line), &out));
	CHECK_STR(out.buf, "pw=*** and ***!\n");
	CHECK(!secret_mask(&m, "nothing here\n", 13, &out));
	CHECK_INT(out.len, 0);
	struct strvec none = STRVEC_INIT;
	CHECK(!secret_mask(&none, line, strlen(line), &out));
	sbuf_release(&out);
	strvec_clear(&m);
}

TEST(handover_round_trip)
{
	const char *text = "command: [x]\nenv: {A: {secret: s1}, B: plain, C: {secret: s2}}\n";
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_parse(text, strlen(text), "job.yaml", "/tmp", &s, &err), 0);
	struct sbuf dir = SBUF_INIT;
	sbuf_addf(&dir, "%s/st", test_tmpdir());
	CHECK_INT(secret_put(dir.buf, "s1", "va=l;ue\x01", 8, &err), 0);
	char *missing = secret_missing(s, dir.buf);
	CHECK_STR(missing, "s2 (did you mean 's1'?)"); /* the closest name the store has */
	free(missing);
	char *hand = NULL;
	CHECK_INT(secret_handover(s, dir.buf, &hand, &err), TC_ESTORAGE);
	CHECK_CONTAINS(err.msg, "env C: no secret 's2'");
	CHECK_INT(secret_put(dir.buf, "s2", "second value", 12, &err), 0);
	CHECK_INT(secret_handover(s, dir.buf, &hand, &err), 0);
	CHECK(!strstr(hand, "second"));
	CHECK_INT(setenv(SECRET_ENV_VAR, hand, 1), 0);
	free(hand);
	struct strvec given = STRVEC_INIT;
	CHECK(secret_take_env(&given));
	CHECK(!getenv(SECRET_ENV_VAR));
	CHECK_STR(env_get(&given, "s1"), "va=l;ue\x01");
	CHECK_STR(env_get(&given, "s2"), "second value");
	/* resolved from what was handed over; never from a local store then */
	struct secret_src src = { .given = &given, .local_dir = "/nonexistent" };
	struct secret_vals vals = SECRET_VALS_INIT;
	CHECK_INT(secret_resolve(s, &src, &vals, &err), 0);
	CHECK_STR(env_get(&vals.env, "A"), "va=l;ue\x01");
	CHECK_STR(env_get(&vals.env, "C"), "second value");
	CHECK(!env_get(&vals.env, "B"));
	CHECK_INT(vals.mask.nr, 2);
	secret_vals_release(&vals);
	strvec_clear(&given);
	struct secret_src none = { .given = &given };
	CHECK_INT(secret_resolve(s, &none, &vals, &err), TC_ESTORAGE);
	CHECK_CONTAINS(err.msg, "env A: secret 's1' was not handed to the job");
	CHECK_INT(vals.env.nr, 0);
	spec_free(s);
	sbuf_release(&dir);
	tc_err_release(&err);
}

TEST(file_values)
{
	struct sbuf path = SBUF_INIT, text = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	sbuf_addf(&path, "%s/tok.txt", test_tmpdir());
	CHECK_INT(write_file_atomic(path.buf, "file-secret\n", 12, &err), 0);
	sbuf_addf(&text, "command: [x]\nenv: {T: {file: tok.txt}, M: {file: missing.txt}}\n");
	struct spec *s = NULL;
	CHECK_INT(spec_parse(text.buf, text.len, "job.yaml", test_tmpdir(), &s, &err), 0);
	CHECK_STR(s->env[0].val, path.buf); /* relative to the spec's folder */
	CHECK_INT(s->env[0].from, ENV_FROM_FILE);
	struct secret_src src = { .local_dir = "/nonexistent" };
	struct secret_vals vals = SECRET_VALS_INIT;
	CHECK_INT(secret_resolve(s, &src, &vals, &err), TC_ESTORAGE);
	CHECK_CONTAINS(err.msg, "env M: {file: ");
	CHECK_CONTAINS(err.msg, "missing.txt");
	spec_free(s);
	s = NULL;
	sbuf_reset(&text);
	sbuf_addf(&text, "command: [x]\nenv: {T: {file: tok.txt}}\n");
	CHECK_INT(spec_parse(text.buf, text.len, "job.yaml", test_tmpdir(), &s, &err), 0);
	CHECK_INT(secret_resolve(s, &src, &vals, &err), 0);
	CHECK_STR(env_get(&vals.env, "T"), "file-secret");
	secret_vals_release(&vals);
	spec_free(s);
	sbuf_release(&path);
	sbuf_release(&text);
	tc_err_release(&err);
}

TEST(spec_forms)
{
	const char *text = "command: [x]\nenv: {A: {secret: tok}, B: {file: /etc/hostname}, C: v}\n";
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_parse(text, strlen(text), "job.yaml", "/tmp", &s, &err), 0);
	CHECK_INT(s->env[0].from, ENV_FROM_SECRET);
	CHECK_STR(s->env[0].val, "tok");
	CHECK_INT(s->env[2].from, ENV_FROM_VALUE);
	char *json = spec_to_json(s);
	CHECK_CONTAINS(json, "\"secret\": \"tok\"");
	CHECK_CONTAINS(json, "\"file\": \"/etc/hostname\"");
	struct spec *back = NULL;
	CHECK_INT(spec_from_json(json, &back, &err), 0);
	CHECK_INT(back->env[0].from, ENV_FROM_SECRET);
	CHECK_STR(back->env[1].val, "/etc/hostname");
	CHECK_INT(back->env[1].from, ENV_FROM_FILE);
	/* job.yaml loads again with its sources */
	char *yaml = spec_to_yaml(s);
	struct spec *again = NULL;
	CHECK_INT(spec_parse(yaml, strlen(yaml), "job.yaml", "/tmp", &again, &err), 0);
	CHECK_INT(again->env[0].from, ENV_FROM_SECRET);
	CHECK_STR(again->env[0].val, "tok");
	/* job.env: the value of a secret never, resolved or not */
	struct strvec resolved = STRVEC_INIT;
	env_set(&resolved, "A", "the-real-value");
	struct env_plan plan = { .spec = s, .job_id = "j", .output_dir = "/o", .ckpt_dir = "/c",
				 .data_dir = "/d", .log_dir = "/l", .tb_dir = "/t", .master_addr = "h",
				 .master_port = 1, .nnodes = 1, .secret_env = &resolved };
	char *envtext = env_file_text(&plan);
	CHECK(!strstr(envtext, "the-real-value"));
	CHECK_CONTAINS(envtext, "export A='***'");
	struct strvec common = STRVEC_INIT;
	env_common(&plan, &common);
	CHECK_STR(env_get(&common, "A"), "the-real-value");
	CHECK_STR(env_get(&common, "C"), "v");
	strvec_clear(&common);
	strvec_clear(&resolved);
	free(envtext);
	free(yaml);
	free(json);
	spec_free(again);
	spec_free(back);
	spec_free(s);
	tc_err_release(&err);
}

TEST(spec_errors)
{
	const char *cases[][2] = {
		{ "command: [x]\nenv: {A: {secret: ../x}}\n", "job.yaml:2: env: 'A': '../x' is not a secret name" },
		{ "command: [x]\nenv: {A: {vault: x}}\n", "env: 'A' must be a single value, {secret: NAME} or {file: PATH}" },
		{ "command: [x]\nenv: {A: {secret: x, file: y}}\n", "env: 'A' must be a single value, {secret: NAME}" },
		{ "command: [x]\nenv: {A: {secret: }}\n", "env: 'A' must be a single value, {secret: NAME}" },
		{ "command: [x]\nenv: {MASTER_PORT: {secret: p}}\n", "MASTER_PORT must be a port number" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct spec *s = NULL;
		struct tc_err err = TC_ERR_INIT;
		CHECK_INT(spec_parse(cases[i][0], strlen(cases[i][0]), "job.yaml", "/tmp", &s, &err), TC_ESPEC);
		CHECK_CONTAINS(err.msg, cases[i][1]);
		tc_err_release(&err);
	}
}
