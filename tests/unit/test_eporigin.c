/* test_eporigin.c -- one host name per endpoint (src/gateway/eporigin.c): who the
 * API proxies, redirects or refuses; --endpoint-host and the JOB-NAME label; the
 * endpoint cookie (its MAC binds user, admin, expiry, token, job, endpoint and
 * label); the redirect's Location; the cookie filters of the proxy (proxy.c); and
 * the Sec-Fetch-Site rule of the API (guard.c). */
#include "test.h"

#include "api/api_int.h"
#include "server/server.h"
#include "core/sbuf.h"

#include <stdlib.h>
#include <string.h>

TEST(eporigin_decide)
{
	/* scripts (a token, the socket): proxied whoever they are, as before */
	CHECK_INT(eporigin_decide(false, AUTH_VIA_TOKEN, false), EP_PROXY);
	CHECK_INT(eporigin_decide(true, AUTH_VIA_TOKEN, true), EP_PROXY);
	CHECK_INT(eporigin_decide(true, AUTH_VIA_PEER, false), EP_PROXY);
	/* a browser: its own origin when there are ports, else the owner only */
	CHECK_INT(eporigin_decide(true, AUTH_VIA_SESSION, true), EP_REDIRECT);
	CHECK_INT(eporigin_decide(true, AUTH_VIA_SESSION, false), EP_REDIRECT);
	CHECK_INT(eporigin_decide(false, AUTH_VIA_SESSION, true), EP_PROXY);
	CHECK_INT(eporigin_decide(false, AUTH_VIA_SESSION, false), EP_REFUSE);
}

TEST(eporigin_host_names)
{
	const char *good[] = { "ep.example.org", "ep.test", "a-b.c9.example", "x.localhost" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(server_endpoint_host_ok(good[i]));
	const char *bad[] = { "", "ep", "Ep.test", "ep..test", ".ep.test", "ep.test.", "-ep.test",
			      "ep-.test", "ep.test:80", "10.0.0.1", "e_p.test", "*.ep.test",
			      "ep.test/x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!server_endpoint_host_ok(bad[i]));
	CHECK(!server_endpoint_host_ok(NULL));

	struct sbuf l = SBUF_INIT;
	CHECK_INT(eporigin_label("20261126-131500-042-7c1e", "web", &l), 0);
	CHECK_STR(l.buf, "20261126-131500-042-7c1e-web");
	sbuf_reset(&l);
	/* no DNS label: upper case, '_', too long, a trailing '-' */
	CHECK_INT(eporigin_label("20261126-131500-042-7c1e", "Web", &l), -1);
	CHECK_INT(eporigin_label("20261126-131500-042-7c1e", "my_nb", &l), -1);
	CHECK_INT(eporigin_label("20261126-131500-042-7c1e", "a-", &l), -1);
	CHECK_INT(eporigin_label("20261126-131500-042-7c1e",
				 "abcdefghijabcdefghijabcdefghijabcdefghij", &l), -1);
	CHECK_INT((int)l.len, 0);

	/* the Host header: ours (the label), the API's (0), or junk under ours (-1) */
	CHECK_INT(eporigin_host_label("J-web.ep.test:8470", "ep.test", &l), 1);
	CHECK_STR(l.buf, "j-web");
	sbuf_reset(&l);
	CHECK_INT(eporigin_host_label("j-web.EP.test", "ep.test", &l), 1);
	CHECK_STR(l.buf, "j-web");
	sbuf_reset(&l);
	CHECK_INT(eporigin_host_label("127.0.0.1:8470", "ep.test", &l), 0);
	CHECK_INT(eporigin_host_label("ep.test:8470", "ep.test", &l), 0);
	CHECK_INT(eporigin_host_label("xep.test", "ep.test", &l), 0);
	CHECK_INT(eporigin_host_label("[::1]:8470", "ep.test", &l), 0);
	CHECK_INT(eporigin_host_label(NULL, "ep.test", &l), 0);
	sbuf_reset(&l);
	CHECK_INT(eporigin_host_label("a.j-web.ep.test", "ep.test", &l), -1);
	sbuf_reset(&l);
	CHECK_INT(eporigin_host_label("j-web.ep.test:x", "ep.test", &l), -1);
	sbuf_release(&l);
}

TEST(eporigin_cookie)
{
	unsigned char key[EPORIGIN_KEY_BYTES], other[EPORIGIN_KEY_BYTES];
	memset(key, 7, sizeof(key));
	memset(other, 8, sizeof(other));
	struct sbuf c = SBUF_INIT;
	struct who alice = { .user = (char *)"alice" };
	eporigin_cookie_make(key, &alice, 2000, "job-1", "jupyter", "job-1-jupyter", &c);
	struct who w;
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "jupyter", "job-1-jupyter", 1000, &w), 0);
	CHECK_STR(w.user, "alice");
	CHECK(!w.admin);
	CHECK_STR(w.token_hash, "");
	free(w.user);
	/* another endpoint, job, host or key; expired; any byte changed: nothing */
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "web", "job-1-jupyter", 1000, &w), -1);
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-2", "jupyter", "job-1-jupyter", 1000, &w), -1);
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "jupyter", "job-1-jupyterx", 1000, &w), -1);
	CHECK_INT(eporigin_cookie_check(other, c.buf, "job-1", "jupyter", "job-1-jupyter", 1000, &w), -1);
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "jupyter", "job-1-jupyter", 2000, &w), -1);
	CHECK(w.user == NULL);
	for (size_t i = 0; i < c.len; i++) {
		char *t = strdup(c.buf);
		t[i] = t[i] == '1' ? '0' : '1';
		CHECK_INT(eporigin_cookie_check(key, t, "job-1", "jupyter", "job-1-jupyter", 1000, &w), -1);
		free(t);
	}
	/* admin is in the MAC: a user's cookie does not become an admin's */
	char *t = strdup(c.buf);
	char *dot = strchr(t, '.');
	dot[1] = '1';
	CHECK_INT(eporigin_cookie_check(key, t, "job-1", "jupyter", "job-1-jupyter", 1000, &w), -1);
	free(t);
	const char *junk[] = { "", "x", ".....", "61.1.5", "616.1.2000.-.", "61.2.2000.-.00" };
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
		CHECK_INT(eporigin_cookie_check(key, junk[i], "job-1", "jupyter", "job-1-jupyter", 1000,
						&w), -1);
	CHECK_INT(eporigin_cookie_check(key, NULL, "job-1", "jupyter", "job-1-jupyter", 1000, &w), -1);
	sbuf_release(&c);
	/* an account name a cookie could not hold travels as hex; the token goes with it */
	struct who adm = { .user = (char *)"ad min;x", .admin = true };
	memset(adm.token_hash, 'a', 64);
	eporigin_cookie_make(key, &adm, 2000, "j", "n", "j-n", &c);
	CHECK(!strpbrk(c.buf, " ;,\""));
	CHECK_INT(eporigin_cookie_check(key, c.buf, "j", "n", "j-n", 10, &w), 0);
	CHECK_STR(w.user, "ad min;x");
	CHECK(w.admin);
	CHECK_STR(w.token_hash, adm.token_hash);
	free(w.user);
	/* the token is in the MAC: another one's cookie is nothing */
	char *u = strdup(c.buf);
	char *tk = strchr(strchr(strchr(u, '.') + 1, '.') + 1, '.') + 1;
	tk[0] = 'b';
	CHECK_INT(eporigin_cookie_check(key, u, "j", "n", "j-n", 10, &w), -1);
	free(u);
	sbuf_release(&c);
}

TEST(eporigin_location)
{
	static const struct {
		const char *host, *want;
	} v[] = {
		{ "127.0.0.1:8470", "http://j-n.ep.test:8470/.trainctl/enter?ticket=T" },
		{ "trainctl.example.org", "http://j-n.ep.test/.trainctl/enter?ticket=T" },
		{ "[::1]:8470", "http://j-n.ep.test:8470/.trainctl/enter?ticket=T" },
		{ NULL, "http://j-n.ep.test/.trainctl/enter?ticket=T" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct sbuf out = SBUF_INIT;
		eporigin_location(false, "j-n", "ep.test", v[i].host, "T", &out);
		CHECK_STR(out.buf, v[i].want);
		sbuf_release(&out);
	}
	struct sbuf out = SBUF_INIT;
	eporigin_location(true, "j-n", "ep.example.org", "trainctl.example.org", "T", &out);
	CHECK_STR(out.buf, "https://j-n.ep.example.org/.trainctl/enter?ticket=T");
	sbuf_release(&out);
}

/* The API takes no state-changing request from another port of its host (an endpoint's origin). */
TEST(guard_fetch_site)
{
	CHECK(api_fetch_site_ok(NULL));
	CHECK(api_fetch_site_ok("same-origin"));
	CHECK(api_fetch_site_ok("none"));
	CHECK(!api_fetch_site_ok("same-site"));
	CHECK(!api_fetch_site_ok("cross-site"));
	CHECK(!api_origin_ok("http://127.0.0.1:20001", "127.0.0.1:8470"));
}

/* Neither trainctl cookie reaches an endpoint, however its name is spelt. */
TEST(eporigin_cookie_filtered)
{
	struct sbuf out = SBUF_INIT;
	proxy_cookie_filter("_xsrf=1; trainctl_endpoint=abc; trainctl_session=s; b=2", &out);
	CHECK_STR(out.buf, "_xsrf=1; b=2");
	sbuf_reset(&out);
	proxy_cookie_filter("a=1;\ttrainctl_session\t=s; __Host-trainctl_session=h; "
			    "Trainctl_Endpoint =e; trainctl_sessionx=k", &out);
	CHECK_STR(out.buf, "a=1; trainctl_sessionx=k");
	sbuf_release(&out);
}

/* An endpoint sets no trainctl cookie and none beyond its own host (issue #23 L1). */
TEST(proxy_set_cookie)
{
	const char *ok[] = { "_xsrf=1; Path=/", "a=b", "trainctl_sessionx=1", "x=1; Max-Age=5; HttpOnly",
			     "x=domain; Path=/", "x=1; Path=/domain" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		CHECK(proxy_set_cookie_ok(ok[i]));
	const char *bad[] = { "trainctl_session=x", "trainctl_session\t=x", " trainctl_session =x",
			      "\ttrainctl_session=x; Path=/", "TRAINCTL_SESSION=x",
			      "__Host-trainctl_session=x; Path=/; Secure", "trainctl_endpoint=x",
			      "__host-Trainctl_Endpoint\t=x", "x=1; Domain=127.0.0.1",
			      "x=1; Path=/;domain=.ep.test", "x=1; \tDOMAIN = ep.test",
			      "=trainctl_session=x", " \t=trainctl_session=x; Path=/", "trainctl_session",
			      "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!proxy_set_cookie_ok(bad[i]));
}
