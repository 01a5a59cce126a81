/* test_server.c -- src/api/ without a running server: the route table
 * and its matcher (route.h), the auth decisions (auth.c), and the answers
 * built without libmicrohttpd (api.c, stream.c) */
#include "test.h"

#include "api/api_int.h"
#include "api/route.h"
#include "core/sbuf.h"
#include "core/version.h"
#include "core/strvec.h"
#include "launch/launch.h"
#include "notify/notify.h"

#include <jansson.h>
#include <stdbool.h>

/* ---- the route table ---- */

static const struct route *find_route(unsigned methods, const char *pattern)
{
	for (size_t i = 0; i < api_nroutes; i++)
		if (api_routes[i].methods == methods && !strcmp(api_routes[i].pattern, pattern))
			return &api_routes[i];
	fprintf(stderr, "no route %u %s in the table\n", methods, pattern);
	exit(1);
}

/* Examples: method and path -> the route (methods, pattern) that runs, and its {job}. */
static const struct example {
	const char *method, *path;
	unsigned methods;
	const char *pattern, *job;
} examples[] = {
	{ "GET", "/metrics", ROUTE_GET, "/metrics", NULL },
	{ "HEAD", "/metrics", ROUTE_GET, "/metrics", NULL },
	{ "GET", "/api/v1/whoami", ROUTE_GET, "/api/v1/whoami", NULL },
	/* the hub's routes: the job's secret, not a token (no {job}: no lookup for a user) */
	{ "POST", "/api/v1/hub/j-1/events", ROUTE_POST, "/api/v1/hub/{hubjob}/events", NULL },
	{ "GET", "/api/v1/hub/j-1/status", ROUTE_GET, "/api/v1/hub/{hubjob}/status", NULL },
	{ "POST", "/api/v1/hub/j-1/rdzv", ROUTE_POST, "/api/v1/hub/{hubjob}/rdzv", NULL },
	{ "GET", "/api/v1/hub/j-1/relay/web", ROUTE_GET, "/api/v1/hub/{hubjob}/relay/{ep}", NULL },
	{ "GET", "/api/v1/info", ROUTE_GET, "/api/v1/info", NULL },
	{ "GET", "/api/v1/devices", ROUTE_GET, "/api/v1/devices", NULL },
	{ "GET", "/api/v1/events", ROUTE_GET, "/api/v1/events", NULL },
	{ "GET", "/api/v1/jobs", ROUTE_GET, "/api/v1/jobs", NULL },
	{ "GET", "/api/v1/jobs/", ROUTE_GET, "/api/v1/jobs", NULL },
	{ "POST", "/api/v1/jobs", ROUTE_POST, "/api/v1/jobs", NULL },
	{ "GET", "/api/v1/jobs/j-1", ROUTE_GET, "/api/v1/jobs/{job}", "j-1" },
	{ "GET", "/api/v1/jobs/j-1/", ROUTE_GET, "/api/v1/jobs/{job}", "j-1" },
	{ "DELETE", "/api/v1/jobs/j-1", ROUTE_DELETE, "/api/v1/jobs/{job}", "j-1" },
	{ "POST", "/api/v1/jobs/j-1/stop", ROUTE_POST, "/api/v1/jobs/{job}/stop", "j-1" },
	{ "POST", "/api/v1/jobs/j-1/pause", ROUTE_POST, "/api/v1/jobs/{job}/pause", "j-1" },
	{ "POST", "/api/v1/jobs/j-1/resume", ROUTE_POST, "/api/v1/jobs/{job}/resume", "j-1" },
	{ "POST", "/api/v1/jobs/j-1/clone", ROUTE_POST, "/api/v1/jobs/{job}/clone", "j-1" },
	{ "GET", "/api/v1/jobs/hello/logs", ROUTE_GET, "/api/v1/jobs/{job}/logs", "hello" },
	{ "GET", "/api/v1/jobs/j-1/metrics", ROUTE_GET, "/api/v1/jobs/{job}/metrics", "j-1" },
	{ "GET", "/api/v1/jobs/j-1/metrics/points", ROUTE_GET, "/api/v1/jobs/{job}/metrics/points",
	  "j-1" },
	{ "GET", "/api/v1/jobs/j-1/metrics/records", ROUTE_GET, "/api/v1/jobs/{job}/metrics/records",
	  "j-1" },
	{ "GET", "/api/v1/jobs/j-1/metrics/series", ROUTE_GET, "/api/v1/jobs/{job}/metrics/series",
	  "j-1" },
	{ "GET", "/api/v1/jobs/j-1/checkpoints", ROUTE_GET, "/api/v1/jobs/{job}/checkpoints", "j-1" },
	{ "GET", "/api/v1/jobs/j-1/usage", ROUTE_GET, "/api/v1/jobs/{job}/usage", "j-1" },
	{ "GET", "/api/v1/jobs/j-1/report", ROUTE_GET, "/api/v1/jobs/{job}/report", "j-1" },
	{ "GET", "/api/v1/jobs/j-1/endpoints", ROUTE_GET, "/api/v1/jobs/{job}/endpoints", "j-1" },
	{ "GET", "/api/v1/usage", ROUTE_GET, "/api/v1/usage", NULL },
	{ "GET", "/api/v1/sweeps", ROUTE_GET, "/api/v1/sweeps", NULL },
	{ "POST", "/api/v1/sweeps", ROUTE_POST, "/api/v1/sweeps", NULL },
	{ "GET", "/api/v1/sweeps/s-1", ROUTE_GET, "/api/v1/sweeps/{sweep}", NULL },
	{ "POST", "/api/v1/sweeps/s-1/stop", ROUTE_POST, "/api/v1/sweeps/{sweep}/stop", NULL },
	/* teams; the reload of the settings file (an admin's) */
	{ "GET", "/api/v1/queue", ROUTE_GET, "/api/v1/queue", NULL },
	{ "GET", "/api/v1/teams", ROUTE_GET, "/api/v1/teams", NULL },
	{ "GET", "/api/v1/teams/vision", ROUTE_GET, "/api/v1/teams/{team}", NULL },
	{ "POST", "/api/v1/server/reload", ROUTE_POST, "/api/v1/server/reload", NULL },
	/* the caller's own secrets */
	{ "GET", "/api/v1/secrets", ROUTE_GET, "/api/v1/secrets", NULL },
	{ "POST", "/api/v1/secrets/hf_token", ROUTE_POST, "/api/v1/secrets/{secret}", NULL },
	{ "DELETE", "/api/v1/secrets/hf_token", ROUTE_DELETE, "/api/v1/secrets/{secret}", NULL },
	/* the catch-alls: a job's unknown parts (the job is looked up first) */
	{ "GET", "/api/v1/jobs/j-1/nothing", ROUTE_ANY, "/api/v1/jobs/{job}/*", "j-1" },
	{ "PUT", "/api/v1/jobs/j-1/logs/x", ROUTE_ANY, "/api/v1/jobs/{job}/*/*", "j-1" },
	/* libmicrohttpd hands over ..%2F..%2Fetc decoded: the id '..' is refused (400) */
	{ "GET", "/api/v1/jobs/../../etc", ROUTE_ANY, "/api/v1/jobs/{job}/*/*", ".." },
	{ "GET", "/api/v1/jobs//logs", ROUTE_GET, "/api/v1/jobs/{job}/logs", "" },
	{ "GET", "/api/v1/jobs/a/b/c/d", ROUTE_ANY, "/api/v1/**", NULL },
	{ "GET", "/api/v1/", ROUTE_ANY, "/api/v1/**", NULL },
	{ "DELETE", "/api/v1/whoami/x", ROUTE_ANY, "/api/v1/**", NULL },
	{ "GET", "/api/v2/jobs", ROUTE_ANY, "/api/**", NULL },
	{ "POST", "/api/", ROUTE_ANY, "/api/**", NULL },
	/* sessions and the login URL (docs/security.md) */
	{ "POST", "/api/v1/session", ROUTE_POST, "/api/v1/session", NULL },
	{ "DELETE", "/api/v1/session", ROUTE_DELETE, "/api/v1/session", NULL },
	{ "POST", "/api/v1/login", ROUTE_POST, "/api/v1/login", NULL },
	{ "GET", "/login", ROUTE_GET, "/login", NULL },
	/* a job's endpoints through the proxy: any method, any depth, the job looked up */
	{ "GET", "/jobs/j-1/endpoints/jupyter", ROUTE_ANY, "/jobs/{job}/endpoints/{ep}/**", "j-1" },
	{ "GET", "/jobs/j-1/endpoints/jupyter/", ROUTE_ANY, "/jobs/{job}/endpoints/{ep}/**", "j-1" },
	{ "PUT", "/jobs/nb/endpoints/jupyter/api/contents/a/b.ipynb", ROUTE_ANY,
	  "/jobs/{job}/endpoints/{ep}/**", "nb" },
	/* the web UI */
	{ "GET", "/", ROUTE_GET, "/**", NULL },
	{ "GET", "/app.js", ROUTE_GET, "/**", NULL },
	{ "GET", "/job/j-1/logs", ROUTE_GET, "/**", NULL },
	{ "GET", "/nothing-here", ROUTE_GET, "/**", NULL },
};

TEST(route_examples)
{
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
		const struct example *e = &examples[i];
		struct route_match m;
		route_match(api_routes, api_nroutes, e->method, e->path, &m);
		if (m.status || m.route != find_route(e->methods, e->pattern)) {
			fprintf(stderr, "%s %s: status %u, route %s, expected %s\n", e->method, e->path,
				m.status, m.route ? m.route->pattern : "(none)", e->pattern);
			exit(1);
		}
		CHECK(m.route->fn != NULL);
		if (e->job)
			CHECK_STR(route_param(&m, "job"), e->job);
		else
			CHECK(route_param(&m, "job") == NULL);
		route_match_release(&m);
	}
}

/* Every route of the table is reached by one of the examples above. */
TEST(route_every_route_has_an_example)
{
	for (size_t i = 0; i < api_nroutes; i++) {
		bool hit = false;
		for (size_t k = 0; k < sizeof(examples) / sizeof(examples[0]) && !hit; k++)
			hit = examples[k].methods == api_routes[i].methods &&
			      !strcmp(examples[k].pattern, api_routes[i].pattern);
		if (!hit) {
			fprintf(stderr, "route %u %s has no example\n", api_routes[i].methods,
				api_routes[i].pattern);
			exit(1);
		}
	}
}

TEST(route_table_is_well_formed)
{
	for (size_t i = 0; i < api_nroutes; i++) {
		const struct route *r = &api_routes[i];
		CHECK(r->pattern[0] == '/');
		CHECK(r->fn != NULL);
		CHECK(r->methods && !(r->methods & ~(unsigned)ROUTE_ANY));
		int params = 0;
		for (const char *c = r->pattern; *c; c++)
			params += *c == '{';
		CHECK(params <= ROUTE_MAX_PARAMS);
		const char *stars = strstr(r->pattern, "**");
		CHECK(!stars || !stars[2]);
		/* one route per method and pattern */
		for (size_t k = i + 1; k < api_nroutes; k++)
			CHECK(strcmp(api_routes[k].pattern, r->pattern) || !(api_routes[k].methods & r->methods));
		/*
		 * the API wants a caller, the server's own settings an admin;
		 * /metrics, the version check, the UI and the hub's routes (the
		 * job's secret: hub/hub.h) do not
		 */
		bool api = (!strncmp(r->pattern, "/api/v1/", 8) && strncmp(r->pattern, "/api/v1/hub/", 12)) ||
			   !strncmp(r->pattern, "/jobs/", 6); /* a job's endpoints */
		bool admin = !strncmp(r->pattern, "/api/v1/server/", 15);
		CHECK_INT(r->need, admin ? NEED_ADMIN : api ? NEED_USER : NEED_NONE);
	}
}

/* A wrong method is 405 naming the methods there are; the {job} is still captured. */
TEST(route_wrong_method)
{
	static const struct {
		const char *method, *path, *allow, *job;
	} v[] = {
		{ "POST", "/metrics", "GET", NULL },
		{ "DELETE", "/api/v1/whoami", "GET", NULL },
		{ "POST", "/api/v1/events", "GET", NULL },
		{ "PUT", "/api/v1/jobs", "GET or POST", NULL },
		{ "DELETE", "/api/v1/jobs", "GET or POST", NULL },
		{ "POST", "/api/v1/jobs/j-1", "GET or DELETE", "j-1" },
		{ "GET", "/api/v1/jobs/j-1/stop", "POST", "j-1" },
		{ "HEAD", "/api/v1/jobs/j-1/clone", "POST", "j-1" },
		{ "POST", "/api/v1/jobs/j-1/metrics/points", "GET", "j-1" },
		{ "POST", "/app.js", "GET", NULL },
		{ "OPTIONS", "/", "GET", NULL },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct route_match m;
		route_match(api_routes, api_nroutes, v[i].method, v[i].path, &m);
		CHECK_INT(m.status, 405);
		CHECK(m.route == NULL && m.resource != NULL);
		struct sbuf t = SBUF_INIT;
		route_allow_text(m.allow, &t);
		CHECK_STR(t.buf, v[i].allow);
		sbuf_release(&t);
		if (v[i].job)
			CHECK_STR(route_param(&m, "job"), v[i].job);
		route_match_release(&m);
	}
}

static int noop(struct api_call *c)
{
	(void)c;
	return 0;
}

/* The matcher on a table of its own: 404, captures, wildcards, order. */
TEST(route_match_rules)
{
	static const struct route t[] = {
		{ ROUTE_GET, "/a/{x}/b/{y}", noop, NEED_NONE },
		{ ROUTE_GET, "/a/fixed", noop, NEED_NONE },
		{ ROUTE_GET, "/a/{x}", noop, NEED_NONE },
		{ ROUTE_POST, "/c/*", noop, NEED_ADMIN },
		{ ROUTE_GET, "/d/**", noop, NEED_NONE },
		{ ROUTE_GET | ROUTE_DELETE, "/e", noop, NEED_NONE },
		{ ROUTE_POST, "/e", noop, NEED_NONE },
	};
	size_t n = sizeof(t) / sizeof(t[0]);
	struct route_match m;

	route_match(t, n, "GET", "/a/one%20two/b/x y", &m);
	CHECK_INT(m.status, 0);
	CHECK(m.route == &t[0]);
	CHECK_INT(m.nparams, 2);
	CHECK_STR(route_param(&m, "x"), "one%20two"); /* taken as given: no second decoding */
	CHECK_STR(route_param(&m, "y"), "x y");
	CHECK(route_param(&m, "z") == NULL);
	CHECK(route_param(&m, "") == NULL);
	route_match_release(&m);

	/* a capture matches "fixed" too: the first pattern in table order wins */
	route_match(t, n, "GET", "/a/fixed", &m);
	CHECK(m.route == &t[1]);
	route_match_release(&m);
	route_match(t, n, "GET", "/a/other", &m);
	CHECK(m.route == &t[2]);
	CHECK_STR(route_param(&m, "x"), "other");
	route_match_release(&m);

	static const char *const not_found[] = { "/", "", "/a", "/a/1/b", "/a/1/b/2/3", "/b",
		"/c", "/c/1/2", "/dd", "/A/fixed", "/a//b/", "/ee" };
	for (size_t i = 0; i < sizeof(not_found) / sizeof(not_found[0]); i++) {
		route_match(t, n, "GET", not_found[i], &m);
		if (m.status != 404 || m.route || m.resource) {
			fprintf(stderr, "'%s' matched (status %u)\n", not_found[i], m.status);
			exit(1);
		}
		CHECK_INT(m.nparams, 0);
		route_match_release(&m);
	}

	/* "**" takes zero or more segments, "*" exactly one */
	static const char *const d[] = { "/d", "/d/", "/d/1", "/d/1/2/3", "/d//" };
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		route_match(t, n, "GET", d[i], &m);
		CHECK(m.route == &t[4]);
		route_match_release(&m);
	}
	route_match(t, n, "POST", "/c/x", &m);
	CHECK(m.route == &t[3]);
	CHECK_INT(m.route->need, NEED_ADMIN);
	route_match_release(&m);

	/* methods of one pattern from several rows; HEAD is GET */
	route_match(t, n, "HEAD", "/e", &m);
	CHECK(m.route == &t[5]);
	route_match_release(&m);
	route_match(t, n, "POST", "/e", &m);
	CHECK(m.route == &t[6]);
	route_match_release(&m);
	route_match(t, n, "PATCH", "/e", &m);
	CHECK_INT(m.status, 405);
	CHECK(m.resource == &t[5]);
	CHECK_INT(m.allow, ROUTE_GET | ROUTE_POST | ROUTE_DELETE);
	struct sbuf s = SBUF_INIT;
	route_allow_text(m.allow, &s);
	CHECK_STR(s.buf, "GET, POST or DELETE");
	sbuf_release(&s);
	route_match_release(&m);

	/* an empty table, and a release of a released match */
	route_match(t, 0, "GET", "/a/fixed", &m);
	CHECK_INT(m.status, 404);
	route_match_release(&m);
	route_match_release(&m);
}

TEST(route_methods)
{
	CHECK_INT(route_method_of("GET"), ROUTE_GET);
	CHECK_INT(route_method_of("HEAD"), ROUTE_GET);
	CHECK_INT(route_method_of("POST"), ROUTE_POST);
	CHECK_INT(route_method_of("DELETE"), ROUTE_DELETE);
	CHECK_INT(route_method_of("PUT"), ROUTE_OTHER);
	CHECK_INT(route_method_of("get"), ROUTE_OTHER); /* methods are case-sensitive */
	CHECK_INT(route_method_of(""), ROUTE_OTHER);
	struct sbuf s = SBUF_INIT;
	route_allow_text(0, &s);
	CHECK_STR(s.buf, "");
	route_allow_text(ROUTE_DELETE | ROUTE_OTHER, &s);
	CHECK_STR(s.buf, "DELETE");
	sbuf_release(&s);
}

/* ---- auth decisions ---- */

/* The store of the tests: two tokens. */
static int lookups;
static int fake_lookup(void *arg, const char *token, char **user, bool *admin)
{
	(void)arg;
	lookups++;
	if (!strcmp(token, "tc_alice")) {
		*user = strdup("alice");
		*admin = false;
		return 0;
	}
	if (!strcmp(token, "tc_root")) {
		*user = strdup("root");
		*admin = true;
		return 0;
	}
	return -1;
}

/* Sessions of the tests: "s_bob" is bob's; accounts: alice, bob exist, ghost does not. */
static int fake_session(void *arg, const char *sid, struct who *w)
{
	(void)arg;
	if (strcmp(sid, "s_bob") != 0)
		return -1;
	w->user = strdup("bob");
	w->admin = false;
	return 0;
}

static char *fake_uid_name(void *arg, uid_t uid)
{
	(void)arg;
	return uid == 0 ? strdup("root") : uid == 1000 ? strdup("alice") : uid == 4242 ? strdup("srv") : NULL;
}

static int fake_account(void *arg, const char *user)
{
	(void)arg;
	return !strcmp(user, "root") ? 2 : (!strcmp(user, "alice") || !strcmp(user, "bob")) ? 0 : 1;
}

static unsigned decide_as(enum route_need need, const char *header, const char *session,
			  long peer, uid_t server_uid, struct who *w)
{
	struct auth_req a = { .need = need, .authorization = header, .session = session,
			      .peer_uid = peer, .server_uid = server_uid, .lookup = fake_lookup,
			      .session_lookup = fake_session, .uid_name = fake_uid_name,
			      .account = fake_account, .arg = NULL };
	return server_auth_decide(&a, w);
}

/* A server running unprivileged (uid 4242): every job runs as its account. */
static unsigned decide(enum route_need need, const char *header, struct who *w)
{
	return decide_as(need, header, NULL, -1, 4242, w);
}

TEST(auth_no_credentials_no_access_whatever_the_tokens)
{
	/* finding 10: there is no "no tokens, everyone is admin" any more */
	struct who w;
	for (int need = NEED_USER; need <= NEED_ADMIN; need++) {
		CHECK_INT(decide(need, NULL, &w), 401);
		CHECK(w.user == NULL && !w.admin);
	}
}

TEST(auth_open_routes_need_nothing)
{
	struct who w;
	lookups = 0;
	CHECK_INT(decide(NEED_NONE, NULL, &w), 0);
	CHECK(w.user == NULL && !w.admin);
	CHECK_INT(decide(NEED_NONE, "Bearer tc_bogus", &w), 0);
	CHECK(w.user == NULL);
	CHECK_INT(lookups, 0);
}

TEST(auth_with_tokens)
{
	struct who w;
	/* absent, empty, unknown: 401 */
	CHECK_INT(decide(NEED_USER, "Bearer ", &w), 401);
	CHECK(w.user == NULL);
	CHECK_INT(decide(NEED_USER, "Bearer tc_bogus", &w), 401);
	CHECK(w.user == NULL && !w.admin);
	CHECK_INT(decide(NEED_USER, "Basic dXNlcjpwdw==", &w), 401);
	/* a known token, in the header (any case of "Bearer") */
	CHECK_INT(decide(NEED_USER, "Bearer tc_alice", &w), 0);
	CHECK_STR(w.user, "alice");
	CHECK(!w.admin && w.via == AUTH_VIA_TOKEN);
	free(w.user);
	CHECK_INT(decide(NEED_USER, "bearer tc_alice", &w), 0);
	free(w.user);
	/* a token wins over the cookie and the socket's peer; a bad one is not passed over */
	CHECK_INT(decide_as(NEED_USER, "Bearer tc_alice", "s_bob", 0, 4242, &w), 0);
	CHECK_STR(w.user, "alice");
	free(w.user);
	CHECK_INT(decide_as(NEED_USER, "Bearer tc_bogus", "s_bob", 0, 4242, &w), 401);
}

TEST(auth_sessions_and_peers)
{
	struct who w;
	CHECK_INT(decide_as(NEED_USER, NULL, "s_bob", -1, 4242, &w), 0);
	CHECK_STR(w.user, "bob");
	CHECK(w.via == AUTH_VIA_SESSION);
	free(w.user);
	CHECK_INT(decide_as(NEED_USER, NULL, "s_stale", -1, 4242, &w), 401);
	/* the socket: root and the server's own account are admins, others users */
	CHECK_INT(decide_as(NEED_ADMIN, NULL, NULL, 0, 4242, &w), 0);
	CHECK_STR(w.user, "root");
	CHECK(w.admin && w.via == AUTH_VIA_PEER);
	free(w.user);
	CHECK_INT(decide_as(NEED_ADMIN, NULL, NULL, 4242, 4242, &w), 0);
	CHECK(w.admin);
	free(w.user);
	CHECK_INT(decide_as(NEED_USER, NULL, NULL, 1000, 0, &w), 0);
	CHECK_STR(w.user, "alice");
	CHECK(!w.admin);
	free(w.user);
	CHECK_INT(decide_as(NEED_USER, NULL, NULL, 7, 0, &w), 403); /* no name */
	CHECK(w.refusal != NULL);
	free(w.user);
}

TEST(auth_root_server_refuses_tokens_without_accounts)
{
	/* finding 2: on a root server a token's user is a real account, not root */
	struct who w;
	CHECK_INT(decide_as(NEED_USER, "Bearer tc_alice", NULL, -1, 0, &w), 0);
	free(w.user);
	CHECK_INT(decide_as(NEED_USER, "Bearer tc_root", NULL, -1, 0, &w), 403);
	CHECK(w.refusal && strstr(w.refusal, "root"));
	free(w.user);
	lookups = 0;
	/* unprivileged: any name, every job runs as the server's account */
	CHECK_INT(decide_as(NEED_USER, "Bearer tc_root", NULL, -1, 4242, &w), 0);
	free(w.user);
}

TEST(auth_admin_routes)
{
	struct who w;
	CHECK_INT(decide(NEED_ADMIN, "Bearer tc_alice", &w), 403);
	CHECK_STR(w.user, "alice"); /* the answer may say who asked */
	CHECK(w.refusal == NULL);
	free(w.user);
	CHECK_INT(decide(NEED_ADMIN, "Bearer tc_root", &w), 0);
	CHECK(w.admin);
	free(w.user);
	CHECK_INT(decide(NEED_ADMIN, NULL, &w), 401);
}

TEST(guard_host)
{
	static const char *const names[] = { "trainctl.example.org", NULL };
	CHECK(api_host_ok("127.0.0.1:8470", 8470, NULL));
	CHECK(api_host_ok("localhost:8470", 8470, NULL));
	CHECK(api_host_ok("LOCALHOST", 8470, NULL));
	CHECK(api_host_ok("[::1]:8470", 8470, NULL));
	CHECK(api_host_ok("10.1.2.3:8470", 8470, NULL));
	CHECK(!api_host_ok("127.0.0.1:8471", 8470, NULL));
	CHECK(!api_host_ok("attacker.example:8470", 8470, NULL));
	CHECK(!api_host_ok("localhost.attacker.example:8470", 8470, NULL));
	CHECK(!api_host_ok("", 8470, NULL));
	CHECK(!api_host_ok(NULL, 8470, NULL));
	CHECK(!api_host_ok("127.0.0.1:x", 8470, NULL));
	CHECK(api_host_ok("trainctl.example.org", 8470, names));
	CHECK(api_host_ok("TrainCtl.Example.org:443", 8470, names));
	CHECK(!api_host_ok("example.org", 8470, names));
}

TEST(guard_origin_and_type)
{
	CHECK(api_origin_ok(NULL, "127.0.0.1:8470"));
	CHECK(api_origin_ok("http://127.0.0.1:8470", "127.0.0.1:8470"));
	CHECK(api_origin_ok("https://t.example.org", "t.example.org"));
	CHECK(!api_origin_ok("http://evil.example", "127.0.0.1:8470"));
	CHECK(!api_origin_ok("null", "127.0.0.1:8470"));
	CHECK(!api_origin_ok("http://127.0.0.1:8471", "127.0.0.1:8470"));
	CHECK(!api_origin_ok("http://127.0.0.1:8470", NULL));
	CHECK(api_json_type_ok("application/json"));
	CHECK(api_json_type_ok("Application/JSON; charset=utf-8"));
	CHECK(!api_json_type_ok("text/plain"));
	CHECK(!api_json_type_ok("application/x-www-form-urlencoded"));
	CHECK(!api_json_type_ok("multipart/form-data; boundary=x"));
	CHECK(!api_json_type_ok("application/jsonp"));
	CHECK(!api_json_type_ok(NULL));
	CHECK(api_method_changes("POST") && api_method_changes("DELETE") && api_method_changes("PUT"));
	CHECK(!api_method_changes("GET") && !api_method_changes("HEAD"));
}

TEST(auth_sessions_store)
{
	struct sessions *ss = sessions_new();
	struct who op = { .user = "ops", .admin = true, .local = true }, w = { 0 };
	char *t = NULL, *c = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(sessions_add(ss, SESS_TICKET, &op, 0, &t, &err), 0);
	CHECK_INT(sessions_add(ss, SESS_COOKIE, &op, 60, &c, &err), 0);
	CHECK_INT((int)strlen(t), 64);
	/* a ticket is not a cookie, and is used once */
	CHECK_INT(sessions_use(ss, SESS_COOKIE, t, &w), -1);
	CHECK_INT(sessions_use(ss, SESS_TICKET, t, &w), 0);
	CHECK_STR(w.user, "ops");
	CHECK(w.admin && w.local);
	free(w.user);
	CHECK_INT(sessions_use(ss, SESS_TICKET, t, &w), -1);
	CHECK_INT(sessions_use(ss, SESS_COOKIE, c, &w), 0);
	free(w.user);
	CHECK_INT(sessions_use(ss, SESS_COOKIE, c, &w), 0); /* a cookie lasts */
	free(w.user);
	sessions_drop(ss, c);
	CHECK_INT(sessions_use(ss, SESS_COOKIE, c, &w), -1);
	free(t);
	free(c);
	sessions_free(ss);
}

TEST(auth_owner)
{
	struct who alice = { .user = "alice" }, root = { .user = "root", .admin = true },
		   nobody = { .user = NULL };
	CHECK(server_may_see(&alice, "alice"));
	CHECK(!server_may_see(&alice, "bob"));
	CHECK(!server_may_see(&alice, "alice2"));
	CHECK(!server_may_see(&alice, NULL));
	CHECK(server_may_see(&root, "bob"));
	CHECK(!server_may_see(&nobody, "alice"));
}

/* ---- answers ---- */

TEST(answer_error_json)
{
	struct sbuf b = SBUF_INIT;
	api_error_json(&b, 404, "no job 'x\"y'\n");
	json_error_t je;
	json_t *o = json_loads(b.buf, 0, &je);
	CHECK(json_is_object(o));
	CHECK_INT(json_object_size(o), 2);
	CHECK_STR(json_string_value(json_object_get(o, "error")), "no job 'x\"y'\n");
	CHECK_INT(json_integer_value(json_object_get(o, "status")), 404);
	json_decref(o);
	/* the 401 answer, byte for byte as clients have always seen it */
	sbuf_reset(&b);
	api_error_json(&b, 401, "a bearer token is required (Authorization: Bearer TOKEN)");
	CHECK_STR(b.buf, "{\"error\":\"a bearer token is required (Authorization: Bearer TOKEN)\","
			 "\"status\":401}");
	sbuf_release(&b);
}

TEST(answer_status_of_codes)
{
	CHECK_INT(api_status_of(TC_ENOTFOUND), 404);
	CHECK_INT(api_status_of(TC_ESPEC), 400);
	CHECK_INT(api_status_of(TC_EUSAGE), 400);
	CHECK_INT(api_status_of(TC_EINPUT), 400);
	CHECK_INT(api_status_of(TC_ESTORE), 500);
	CHECK_INT(api_status_of(TC_ESYS), 500);
	CHECK_INT(api_status_of(TC_EBACKEND), 500);
	CHECK_INT(api_status_of(TC_EJOB), 500);
}

TEST(answer_whoami)
{
	struct sbuf b = SBUF_INIT;
	struct who w = { .user = "alice" };
	api_whoami_json(&b, &w);
	CHECK_STR(b.buf, "{\"user\":\"alice\",\"admin\":false}");
	sbuf_reset(&b);
	w = (struct who){ .user = "r\"oot", .admin = true };
	api_whoami_json(&b, &w);
	CHECK_STR(b.buf, "{\"user\":\"r\\\"oot\",\"admin\":true}");
	sbuf_release(&b);
}

TEST(answer_job_refs)
{
	static const char *const good[] = { "j-20261126-abc", "hello", "a.b_c-d", "0", "A" };
	static const char *const bad[] = { "", ".", "..", "a b", "a/b", "../etc", "x%2F", "é",
		"a\nb", "a;b" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(api_id_ok(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!api_id_ok(bad[i]));
	char longest[202];
	memset(longest, 'a', sizeof(longest));
	longest[200] = '\0';
	CHECK(api_id_ok(longest));
	longest[200] = 'a';
	longest[201] = '\0';
	CHECK(!api_id_ok(longest));
}

TEST(answer_sse_events)
{
	struct sbuf b = SBUF_INIT;
	sse_log_line(&b, 3, "step \"1\"\tok and more", 11);
	CHECK_STR(b.buf, "data: {\"rank\":3,\"line\":\"step \\\"1\\\"\\tok\"}\n\n");
	sbuf_reset(&b);
	struct store_event ev = { 42, "j-1", JOB_RUNNING, "started on gpu 0", "alice", 1700000000.25 };
	sse_state_event(&b, &ev);
	CHECK_STR(b.buf, "id: 42\nevent: state\ndata: {\"id\":42,\"job\":\"j-1\",\"state\":\"running\","
			 "\"reason\":\"started on gpu 0\",\"user\":\"alice\",\"time\":1700000000.250}\n\n");
	/* the data line parses as JSON */
	const char *data = strstr(b.buf, "data: ") + 6;
	json_t *o = json_loadb(data, strlen(data) - 2, 0, NULL);
	CHECK(json_is_object(o));
	CHECK_STR(json_string_value(json_object_get(o, "user")), "alice");
	CHECK(!json_object_get(o, "kind")); /* a change of state has no kind */
	json_decref(o);
	/* an event that is no change of state carries its kind, still as event: state */
	sbuf_reset(&b);
	struct store_event hang = { 43, "j-1", JOB_RUNNING, "hang: no progress for 3.0 s", "alice",
				    1700000001.5 };
	sse_state_event(&b, &hang);
	CHECK_CONTAINS(b.buf, "event: state\n");
	CHECK_CONTAINS(b.buf, "\"reason\":\"hang: no progress for 3.0 s\",\"kind\":\"hang\",\"user\"");
	sbuf_release(&b);
}

/* ---- GET /api/v1/info ---- */

static const struct api_backend_info *backend(const struct api_backend_info *b, const char *name)
{
	for (size_t i = 0; i < API_NBACKENDS; i++)
		if (!strcmp(b[i].name, name))
			return &b[i];
	fprintf(stderr, "no backend %s\n", name);
	exit(1);
}

TEST(info_backends)
{
	struct api_backend_info b[API_NBACKENDS];
	/* no --backend: local always; slurm when sbatch and a configuration are there */
	api_backends(NULL, &(struct backend_probe){ true, true }, b);
	CHECK(backend(b, "local")->available && !backend(b, "local")->multi_node);
	CHECK(backend(b, "slurm")->available && backend(b, "slurm")->multi_node);
	CHECK(backend(b, "local")->why == NULL && backend(b, "slurm")->why == NULL);
	api_backends(NULL, &(struct backend_probe){ false, true }, b);
	CHECK(backend(b, "local")->available);
	CHECK(!backend(b, "slurm")->available);
	CHECK_STR(backend(b, "slurm")->why, "sbatch is not on the server's PATH");
	api_backends(NULL, &(struct backend_probe){ true, false }, b);
	CHECK(!backend(b, "slurm")->available);
	CHECK_CONTAINS(backend(b, "slurm")->why, "no Slurm configuration");
	/* --backend: the other one is not available, whatever is installed */
	api_backends("slurm", &(struct backend_probe){ true, true }, b);
	CHECK(!backend(b, "local")->available);
	CHECK_STR(backend(b, "local")->why, "server started with --backend slurm");
	CHECK(backend(b, "slurm")->available);
	api_backends("local", &(struct backend_probe){ true, true }, b);
	CHECK(backend(b, "local")->available);
	CHECK(!backend(b, "slurm")->available);
	CHECK_STR(backend(b, "slurm")->why, "server started with --backend local");
	/* --backend slurm without Slurm: nothing can run, and each says why */
	api_backends("slurm", &(struct backend_probe){ false, false }, b);
	CHECK(!backend(b, "local")->available && !backend(b, "slurm")->available);
	CHECK(backend(b, "local")->why && backend(b, "slurm")->why);
}

TEST(info_json)
{
	struct api_backend_info b[API_NBACKENDS];
	api_backends(NULL, &(struct backend_probe){ false, false }, b);
	struct sbuf s = SBUF_INIT;
	api_info_json(&s, b, API_NBACKENDS);
	json_error_t je;
	json_t *o = json_loads(s.buf, 0, &je);
	if (!o) {
		fprintf(stderr, "%s: %s\n", s.buf, je.text);
		exit(1);
	}
	CHECK_STR(json_string_value(json_object_get(o, "version")), TRAINCTL_VERSION);
	/* every state once, in the order of the diagram; terminal as the store says */
	static const char *const names[] = { "queued", "starting", "running", "restarting",
		"paused", "preempted", "succeeded", "failed", "killed", "lost" };
	json_t *states = json_object_get(o, "states");
	CHECK_INT(json_array_size(states), sizeof(names) / sizeof(names[0]));
	for (size_t i = 0; i < json_array_size(states); i++) {
		json_t *st = json_array_get(states, i);
		const char *name = json_string_value(json_object_get(st, "name"));
		CHECK_STR(name, names[i]);
		bool terminal = json_is_true(json_object_get(st, "terminal"));
		bool active = json_is_true(json_object_get(st, "active"));
		enum job_state parsed;
		CHECK(job_state_parse(name, strlen(name), &parsed));
		CHECK(terminal == job_state_terminal(parsed));
		CHECK(!(terminal && active));
		CHECK(active == (!strcmp(name, "starting") || !strcmp(name, "running") ||
				 !strcmp(name, "restarting")));
		CHECK(json_is_true(json_object_get(st, "resumable")) == !strcmp(name, "paused"));
		CHECK(json_is_true(json_object_get(st, "success")) == !strcmp(name, "succeeded"));
	}
	/* sweeps, trials, endpoints: each state once, the ended ones terminal */
	static const struct {
		const char *key, *names;
	} more[] = {
		{ "sweep_states", "running done* failed* stopped*" },
		{ "trial_states", "pending running succeeded* failed* killed* stopped* failed-objective*" },
		{ "endpoint_states", "running failed* exited* stopped*" },
	};
	for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++) {
		json_t *v = json_object_get(o, more[k].key);
		struct sbuf got = SBUF_INIT;
		for (size_t i = 0; i < json_array_size(v); i++) {
			json_t *st = json_array_get(v, i);
			sbuf_addf(&got, "%s%s%s", i ? " " : "",
				  json_string_value(json_object_get(st, "name")),
				  json_is_true(json_object_get(st, "terminal")) ? "*" : "");
		}
		CHECK_STR(got.buf, more[k].names);
		sbuf_release(&got);
	}
	json_t *bs = json_object_get(o, "backends");
	CHECK_INT(json_array_size(bs), API_NBACKENDS);
	json_t *local = json_array_get(bs, 0), *slurm = json_array_get(bs, 1);
	CHECK_STR(json_string_value(json_object_get(local, "name")), "local");
	CHECK(json_is_true(json_object_get(local, "available")));
	CHECK(json_is_false(json_object_get(local, "multi_node")));
	CHECK(json_is_null(json_object_get(local, "why")));
	CHECK_STR(json_string_value(json_object_get(slurm, "name")), "slurm");
	CHECK(json_is_false(json_object_get(slurm, "available")));
	CHECK(json_is_true(json_object_get(slurm, "multi_node")));
	CHECK_STR(json_string_value(json_object_get(slurm, "why")), "sbatch is not on the server's PATH");
	json_decref(o);
	sbuf_release(&s);
}

/* ---- the job's environment (jobenv.c, finding 7 of issue 13) ---- */

TEST(jobenv_allowlist)
{
	static const char *const extra[] = { "MY_SITE_VAR", NULL };
	CHECK(srv_env_passes("PATH=/usr/bin", NULL));
	CHECK(srv_env_passes("LC_ALL=C", NULL));
	CHECK(srv_env_passes("NCCL_DEBUG=INFO", NULL));
	CHECK(srv_env_passes("TRAINCTL_FAKE_DEVICES=gpu:2", NULL));
	CHECK(!srv_env_passes("AWS_SECRET_ACCESS_KEY=x", NULL));
	CHECK(!srv_env_passes("HOME=/root", NULL));
	CHECK(!srv_env_passes("TRAINCTL_HOME=/srv/tc", NULL));
	CHECK(!srv_env_passes("TRAINCTL_TOKEN=tc_x", NULL));
	CHECK(!srv_env_passes("TRAINCTL_STORAGE_CONFIG=/etc/s3", NULL));
	CHECK(!srv_env_passes("PATHX=1", NULL));
	CHECK(!srv_env_passes("MY_SITE_VAR=1", NULL));
	CHECK(srv_env_passes("MY_SITE_VAR=1", extra));
	CHECK(!srv_env_passes("MY_SITE=1", extra));
	char *env[] = { "PATH=/bin", "AWS_ACCESS_KEY_ID=a", "HOOK_SECRET=s", "LANG=C", NULL };
	struct strvec out = STRVEC_INIT;
	srv_job_env(env, NULL, &out);
	CHECK_INT((int)out.nr, 2);
	CHECK_STR(env_get(&out, "LANG"), "C");
	strvec_clear(&out);
}

TEST(jobenv_hook_secrets_stay_the_servers)
{
	/* the server's webhooks' secret never reaches a supervisor (issue 23, M3) */
	struct notify_hook h = { .secret_env = "HOOK_SECRET",
				 .events = (1u << NOTIFY_STARTED) | (1u << NOTIFY_FAILED) };
	char *env[] = { "PATH=/bin", "HOOK_SECRET=s", "TRAINCTL_NOTIFY_SERVER=7", NULL };
	struct strvec out = STRVEC_INIT;
	srv_supervisor_env(env, NULL, &h, 1, &out);
	CHECK(env_get(&out, "HOOK_SECRET") == NULL);
	/* only which events the server's hooks want: the supervisor relays them */
	CHECK_INT(atoi(env_get(&out, NOTIFY_SERVER_ENV)), (int)h.events);
	CHECK_STR(env_get(&out, "TRAINCTL_SUPERVISOR_ONLY"), NOTIFY_SERVER_ENV);
	/* the workers' environment, made from the supervisor's */
	env_drop_supervisor_only(&out);
	CHECK(env_get(&out, NOTIFY_SERVER_ENV) == NULL);
	CHECK_STR(env_get(&out, "PATH"), "/bin");
	strvec_clear(&out);
	/* a server started with the variable set passes none of its own to a job */
	srv_job_env(env, NULL, &out);
	CHECK(env_get(&out, NOTIFY_SERVER_ENV) == NULL);
	strvec_clear(&out);
}

/* ---- the endpoint proxy's pure parts (proxy.c) ---- */

TEST(proxy_split_uri)
{
	static const struct {
		const char *raw, *rest;
	} v[] = {
		{ "/jobs/j-1/endpoints/jupyter", "" },
		{ "/jobs/j-1/endpoints/jupyter/", "/" },
		{ "/jobs/j-1/endpoints/jupyter?x=1", "?x=1" },
		{ "/jobs/nb/endpoints/web/a%20b/c.txt?q=%2F", "/a%20b/c.txt?q=%2F" },
		{ "/jobs/nb/endpoints/web/api/kernels/k/channels?session_id=s", "/api/kernels/k/channels?session_id=s" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *rest = NULL;
		CHECK_INT(proxy_split_uri(v[i].raw, &rest), 0);
		CHECK_STR(rest, v[i].rest);
		free(rest);
	}
	char *rest = NULL;
	CHECK_INT(proxy_split_uri("/jobs/j-1/endpoints", &rest), -1);
	CHECK_INT(proxy_split_uri("/jobs//endpoints/x/", &rest), -1);
	CHECK_INT(proxy_split_uri("jobs/j/endpoints/x/", &rest), -1);
	CHECK(rest == NULL);
}

/* The caller's credentials never reach an endpoint; its own headers do. */
TEST(proxy_headers_and_cookies)
{
	const char *dropped[] = { "Authorization", "authorization", "Cookie", "Host", "Origin",
				  "Connection", "Upgrade", "Content-Length", "Transfer-Encoding",
				  "Proxy-Authorization", "X-Forwarded-For" };
	for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
		CHECK(proxy_header_dropped(dropped[i]));
	const char *kept[] = { "Accept", "Content-Type", "Sec-WebSocket-Key", "Sec-WebSocket-Version",
			       "X-XSRFToken", "User-Agent" };
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		CHECK(!proxy_header_dropped(kept[i]));
	static const struct {
		const char *in, *out;
	} v[] = {
		{ "trainctl_session=abc", "" },
		{ "_xsrf=1; trainctl_session=abc; username-x=2", "_xsrf=1; username-x=2" },
		{ "trainctl_session=abc;a=b", "a=b" },
		{ "trainctl_sessionx=1; a=b", "trainctl_sessionx=1; a=b" },
		{ "a=b", "a=b" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct sbuf out = SBUF_INIT;
		proxy_cookie_filter(v[i].in, &out);
		CHECK_STR(out.len ? out.buf : "", v[i].out);
		sbuf_release(&out);
	}
}
