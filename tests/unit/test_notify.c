/* test_notify.c -- src/notify/: HMAC-SHA256, signatures, bodies, URLs; the spec's notify: */
#include "test.h"

#include "core/enc.h"
#include "core/err.h"
#include "core/sbuf.h"
#include "notify/notify.h"
#include "spec/spec.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void hex_of(const unsigned char *mac, char out[65])
{
	hex_encode(out, mac, 32);
	out[64] = '\0';
}

/* RFC 4231, test cases 1, 2 and 6 (a key longer than the block is hashed first) */
TEST(hmac_rfc4231)
{
	unsigned char mac[32], key[131];
	char hex[65];
	memset(key, 0x0b, 20);
	notify_hmac_sha256(key, 20, "Hi There", 8, mac);
	hex_of(mac, hex);
	CHECK_STR(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	notify_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
	hex_of(mac, hex);
	CHECK_STR(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	memset(key, 0xaa, sizeof(key));
	const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
	notify_hmac_sha256(key, sizeof(key), m, strlen(m), mac);
	hex_of(mac, hex);
	CHECK_STR(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(signature_header_value)
{
	struct sbuf sb = SBUF_INIT;
	notify_signature("Jefe", "what do ya want for nothing?", 28, &sb);
	CHECK_STR(sb.buf, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	sbuf_release(&sb);
}

TEST(event_names_both_ways)
{
	for (int e = 0; e < NOTIFY_NEVENTS; e++)
		CHECK_INT(notify_event_parse(notify_event_name(e)), e);
	CHECK_INT(notify_event_parse("log_match"), NOTIFY_LOG_MATCH);
	CHECK_INT(notify_event_parse("nope"), -1);
	CHECK_CONTAINS(notify_event_names(), "preempted");
}

TEST(json_body)
{
	struct notify_msg m = { .event = NOTIFY_FAILED, .job_id = "J1", .job_name = "digits",
				.state = "failed", .reason = "rank 1 exited 3", .user = "ann",
				.host = "n1", .attempt = 2, .exit_code = 1, .time = 0 };
	char *b = notify_body(&m, NOTIFY_JSON);
	json_t *o = json_loads(b, 0, NULL);
	CHECK(o);
	CHECK_STR(json_string_value(json_object_get(o, "event")), "failed");
	json_t *job = json_object_get(o, "job");
	CHECK_STR(json_string_value(json_object_get(job, "id")), "J1");
	CHECK_STR(json_string_value(json_object_get(job, "name")), "digits");
	CHECK_STR(json_string_value(json_object_get(job, "state")), "failed");
	CHECK_STR(json_string_value(json_object_get(job, "user")), "ann");
	CHECK_STR(json_string_value(json_object_get(o, "reason")), "rank 1 exited 3");
	CHECK_STR(json_string_value(json_object_get(o, "time")), "1970-01-01T00:00:00Z");
	CHECK_INT(json_integer_value(json_object_get(o, "attempt")), 2);
	CHECK_INT(json_integer_value(json_object_get(o, "exit_code")), 1);
	json_decref(o);
	free(b);
	/* no reason, not ended: the keys are left out */
	m.reason = NULL;
	m.exit_code = -1;
	m.attempt = -1;
	b = notify_body(&m, NOTIFY_JSON);
	o = json_loads(b, 0, NULL);
	CHECK(o && !json_object_get(o, "reason") && !json_object_get(o, "exit_code") &&
	      !json_object_get(o, "attempt"));
	json_decref(o);
	free(b);
}

TEST(slack_body)
{
	struct notify_msg m = { .event = NOTIFY_HANG, .job_id = "J2", .job_name = "big",
				.reason = "no step for 600 s \"quoted\"", .host = "n3",
				.attempt = 0, .exit_code = -1 };
	char *b = notify_body(&m, NOTIFY_SLACK);
	json_t *o = json_loads(b, 0, NULL);
	CHECK(o);
	CHECK_INT(json_object_size(o), 1);
	CHECK_STR(json_string_value(json_object_get(o, "text")),
		  "trainctl: job J2 (big) hang on n3: no step for 600 s \"quoted\"");
	json_decref(o);
	free(b);
}

TEST(urls_checked_and_redacted)
{
	CHECK(!notify_url_problem("http://127.0.0.1:8080/hook"));
	CHECK(!notify_url_problem("https://hooks.slack.com/services/T/B/x"));
	CHECK(notify_url_problem("ftp://x/y"));
	CHECK(notify_url_problem("http:///y"));
	CHECK(notify_url_problem("http://a b/"));
	char *s = notify_url_shown("https://hooks.slack.com/services/T000/B000/XXXX");
	CHECK_STR(s, "https://hooks.slack.com/...");
	free(s);
	s = notify_url_shown("http://user:pw@127.0.0.1:9/");
	CHECK_STR(s, "http://127.0.0.1:9/");
	free(s);
	s = notify_url_shown("http://host");
	CHECK_STR(s, "http://host");
	free(s);
}

TEST(missing_secret_names_the_variable_not_a_value)
{
	struct notify_hook h = { .url = "http://127.0.0.1:9/", .events = NOTIFY_ALL,
				 .secret_env = "TC_TEST_NO_SUCH_SECRET" };
	struct notifier *nf = NULL;
	struct tc_err err = TC_ERR_INIT;
	unsetenv("TC_TEST_NO_SUCH_SECRET");
	struct notify_opts o = { 0 };
	CHECK(notify_start(&h, 1, &o, &nf, &err) == TC_EUSAGE);
	CHECK(!nf);
	CHECK_CONTAINS(err.msg, "TC_TEST_NO_SUCH_SECRET");
	tc_err_release(&err);
	/* no events wanted: no notifier at all */
	h.events = 0;
	h.secret_env = NULL;
	CHECK(notify_start(&h, 1, &o, &nf, &err) == 0 && !nf);
	notify_finish(NULL, 0);
}

/* issue 23, M2: a secret file is a regular file of a bounded size; secret_env can be refused */
TEST(secret_file_regular_capped_env_refusable)
{
	char dir[] = "/tmp/tc-notify-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct sbuf p = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	char *v = NULL;
	struct notify_hook h = { .secret_file = dir };
	/* a folder, then a FIFO (which must not block), are no secret files */
	CHECK(notify_secret_read(&h, 0, &v, &err) == TC_EUSAGE && !v);
	CHECK_CONTAINS(err.msg, "not a regular file");
	tc_err_release(&err);
	sbuf_addf(&p, "%s/fifo", dir);
	CHECK(mkfifo(p.buf, 0600) == 0);
	h.secret_file = p.buf;
	CHECK(notify_secret_read(&h, 0, &v, &err) == TC_EUSAGE && !v);
	CHECK_CONTAINS(err.msg, "not a regular file");
	tc_err_release(&err);
	unlink(p.buf);
	/* over the cap: refused, the value never in the message */
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/big", dir);
	FILE *f = fopen(p.buf, "w");
	CHECK(f != NULL);
	for (int i = 0; i <= NOTIFY_SECRET_MAX; i++)
		fputc('k', f);
	CHECK(fclose(f) == 0);
	CHECK(notify_secret_read(&h, 0, &v, &err) == TC_EUSAGE && !v);
	CHECK_CONTAINS(err.msg, "larger than");
	CHECK(!strstr(err.msg, "kkkk"));
	tc_err_release(&err);
	/* a good one: its trailing newline dropped */
	f = fopen(p.buf, "w");
	CHECK(f != NULL);
	fputs("s3cret\n", f);
	CHECK(fclose(f) == 0);
	CHECK(notify_secret_read(&h, NOTIFY_NO_ENV, &v, &err) == 0);
	CHECK_STR(v, "s3cret");
	free(v);
	unlink(p.buf);
	rmdir(dir);
	/* secret_env with NOTIFY_NO_ENV: refused, naming the variable */
	setenv("TC_TEST_HOOK_SECRET", "from-the-environment", 1);
	struct notify_hook e = { .secret_env = "TC_TEST_HOOK_SECRET" };
	CHECK(notify_secret_read(&e, NOTIFY_NO_ENV, &v, &err) == TC_EUSAGE && !v);
	CHECK_CONTAINS(err.msg, "TC_TEST_HOOK_SECRET");
	CHECK(!strstr(err.msg, "from-the-environment"));
	tc_err_release(&err);
	CHECK(notify_secret_read(&e, 0, &v, &err) == 0);
	CHECK_STR(v, "from-the-environment");
	free(v);
	unsetenv("TC_TEST_HOOK_SECRET");
	sbuf_release(&p);
}

/* a notifier whose thread never started (nothing posted) goes at once */
TEST(finish_without_posts)
{
	struct notify_hook h = { .url = "http://127.0.0.1:9/", .events = 1u << NOTIFY_FAILED };
	struct notifier *nf = NULL;
	struct tc_err err = TC_ERR_INIT;
	struct notify_opts o = { 0 };
	CHECK(notify_start(&h, 1, &o, &nf, &err) == 0 && nf);
	CHECK(notify_wants(nf, NOTIFY_FAILED));
	CHECK(!notify_wants(nf, NOTIFY_STARTED));
	struct notify_msg m = { .event = NOTIFY_STARTED, .job_id = "J" };
	notify_post(nf, &m); /* not wanted: nothing queued, no thread */
	notify_finish(nf, 0);
}

static const char spec_head[] = "name: n\ncommand: [\"true\"]\n";

static int parse(const char *tail, struct spec **s, struct tc_err *err)
{
	struct sbuf text = SBUF_INIT;
	sbuf_adds(&text, spec_head);
	sbuf_adds(&text, tail);
	int rc = spec_parse(text.buf, text.len, "job.yaml", "/tmp", s, err);
	sbuf_release(&text);
	return rc;
}

TEST(spec_notify_round_trip)
{
	struct spec *s = NULL, *back = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = parse("notify:\n"
		       "  - url: http://127.0.0.1:9/a\n"
		       "    events: [failed, hang, log_match]\n"
		       "    secret_env: HOOK_SECRET\n"
		       "  - url: https://hooks.slack.com/services/x\n"
		       "    format: slack\n",
		       &s, &err);
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	CHECK(rc == 0);
	CHECK_INT(s->nnotify, 2);
	CHECK_INT(s->notify[0].events,
		  (1u << NOTIFY_FAILED) | (1u << NOTIFY_HANG) | (1u << NOTIFY_LOG_MATCH));
	CHECK_STR(s->notify[0].secret_env, "HOOK_SECRET");
	CHECK_INT(s->notify[1].format, NOTIFY_SLACK);
	CHECK_INT(s->notify[1].events, NOTIFY_DEFAULT_EVENTS);
	char *json = spec_to_json(s);
	CHECK(spec_from_json(json, &back, &err) == 0);
	CHECK_INT(back->nnotify, 2);
	CHECK_STR(back->notify[0].url, "http://127.0.0.1:9/a");
	CHECK_INT(back->notify[0].events, s->notify[0].events);
	CHECK_STR(back->notify[0].secret_env, "HOOK_SECRET");
	CHECK_INT(back->notify[1].format, NOTIFY_SLACK);
	CHECK_INT(back->notify[1].events, NOTIFY_DEFAULT_EVENTS);
	free(json);
	spec_free(back);
	spec_free(s);
	/* a spec without notify: has no key in its JSON */
	CHECK(parse("", &s, &err) == 0);
	json = spec_to_json(s);
	CHECK(!strstr(json, "notify"));
	free(json);
	spec_free(s);
}

TEST(spec_notify_errors)
{
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK(parse("notify:\n  - url: http://h/\n    secret: abc\n", &s, &err) == TC_ESPEC);
	CHECK_CONTAINS(err.msg, "secret_env or secret_file");
	tc_err_release(&err);
	CHECK(parse("notify:\n  - url: ftp://h/\n", &s, &err) == TC_ESPEC);
	CHECK_CONTAINS(err.msg, "job.yaml:4: notify[].url");
	tc_err_release(&err);
	CHECK(parse("notify:\n  - url: http://h/\n    events: [nap]\n", &s, &err) == TC_ESPEC);
	CHECK_CONTAINS(err.msg, "unknown event 'nap'");
	tc_err_release(&err);
	CHECK(parse("notify:\n  - events: [failed]\n", &s, &err) == TC_ESPEC);
	CHECK_CONTAINS(err.msg, "notify[].url: is required");
	tc_err_release(&err);
	CHECK(parse("notify:\n  - url: http://h/\n    secret_env: A\n    secret_file: /x\n", &s,
		    &err) == TC_ESPEC);
	tc_err_release(&err);
	CHECK(parse("notify: {url: http://h/}\n", &s, &err) == TC_ESPEC);
	tc_err_release(&err);
}
