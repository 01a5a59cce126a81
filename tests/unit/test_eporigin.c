/* test_eporigin.c -- one origin per endpoint (src/server/eporigin.c): who the
 * API origin proxies, redirects or refuses; the endpoint cookie (its MAC binds
 * user, admin, expiry, job, endpoint and port); the redirect's Location; the
 * --endpoint-ports range; and the Sec-Fetch-Site rule of the API (guard.c). */
#include "test.h"

#include "server/api_int.h"
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

TEST(eporigin_ports)
{
	int lo = 0, hi = 0;
	CHECK(server_parse_endpoint_ports("20000-20099", &lo, &hi));
	CHECK_INT(lo, 20000);
	CHECK_INT(hi, 20099);
	CHECK(server_parse_endpoint_ports("30000-30000", &lo, &hi));
	CHECK_INT(lo, 30000);
	const char *bad[] = { "", "20000", "-20000", "20000-", "20099-20000", "80-90",
			      "20000-70000", "a-b", "20000-20099x", "20000--20099" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!server_parse_endpoint_ports(bad[i], &lo, &hi));
	CHECK(!server_parse_endpoint_ports(NULL, &lo, &hi));
}

TEST(eporigin_cookie)
{
	unsigned char key[EPORIGIN_KEY_BYTES], other[EPORIGIN_KEY_BYTES];
	memset(key, 7, sizeof(key));
	memset(other, 8, sizeof(other));
	struct sbuf c = SBUF_INIT;
	eporigin_cookie_make(key, "alice", false, 2000, "job-1", "jupyter", 20001, &c);
	char *user = NULL;
	bool admin = true;
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "jupyter", 20001, 1000, &user, &admin), 0);
	CHECK_STR(user, "alice");
	CHECK(!admin);
	free(user);
	/* another endpoint, job, port or key; expired; any byte changed: nothing */
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "web", 20001, 1000, &user, &admin), -1);
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-2", "jupyter", 20001, 1000, &user, &admin), -1);
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "jupyter", 20002, 1000, &user, &admin), -1);
	CHECK_INT(eporigin_cookie_check(other, c.buf, "job-1", "jupyter", 20001, 1000, &user, &admin), -1);
	CHECK_INT(eporigin_cookie_check(key, c.buf, "job-1", "jupyter", 20001, 2000, &user, &admin), -1);
	CHECK(user == NULL);
	for (size_t i = 0; i < c.len; i++) {
		char *t = strdup(c.buf);
		t[i] = t[i] == '1' ? '0' : '1';
		CHECK_INT(eporigin_cookie_check(key, t, "job-1", "jupyter", 20001, 1000, &user, &admin), -1);
		free(t);
	}
	/* admin is in the MAC: a user's cookie does not become an admin's */
	char *t = strdup(c.buf);
	char *dot = strchr(t, '.');
	dot[1] = '1';
	CHECK_INT(eporigin_cookie_check(key, t, "job-1", "jupyter", 20001, 1000, &user, &admin), -1);
	free(t);
	const char *junk[] = { "", "x", "....", "61.1.5", "616.1.2000." , "61.2.2000.00" };
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
		CHECK_INT(eporigin_cookie_check(key, junk[i], "job-1", "jupyter", 20001, 1000, &user,
						&admin), -1);
	CHECK_INT(eporigin_cookie_check(key, NULL, "job-1", "jupyter", 20001, 1000, &user, &admin), -1);
	sbuf_release(&c);
	/* an account name a cookie could not hold travels as hex */
	eporigin_cookie_make(key, "ad min;x", true, 2000, "j", "n", 1, &c);
	CHECK(!strpbrk(c.buf, " ;,\""));
	CHECK_INT(eporigin_cookie_check(key, c.buf, "j", "n", 1, 10, &user, &admin), 0);
	CHECK_STR(user, "ad min;x");
	CHECK(admin);
	free(user);
	sbuf_release(&c);
}

TEST(eporigin_location)
{
	static const struct {
		const char *host, *want;
	} v[] = {
		{ "127.0.0.1:8470", "http://127.0.0.1:20001/.trainctl/enter?ticket=T" },
		{ "localhost:8470", "http://localhost:20001/.trainctl/enter?ticket=T" },
		{ "trainctl.example.org", "http://trainctl.example.org:20001/.trainctl/enter?ticket=T" },
		{ "[::1]:8470", "http://[::1]:20001/.trainctl/enter?ticket=T" },
		{ NULL, "http://127.0.0.1:20001/.trainctl/enter?ticket=T" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct sbuf out = SBUF_INIT;
		eporigin_location(v[i].host, 20001, "T", &out);
		CHECK_STR(out.buf, v[i].want);
		sbuf_release(&out);
	}
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

/* Neither trainctl cookie reaches an endpoint. */
TEST(eporigin_cookie_filtered)
{
	struct sbuf out = SBUF_INIT;
	proxy_cookie_filter("_xsrf=1; trainctl_endpoint=abc; trainctl_session=s; b=2", &out);
	CHECK_STR(out.buf, "_xsrf=1; b=2");
	sbuf_release(&out);
}
