/*
 * fuzz_api.c -- the HTTP API's requests (src/api/): the input is
 *
 *     METHOD PATH[?QUERY]\n
 *     BODY
 *
 * The path goes through the route table (route_match, api_id_ok on a
 * {job}); the query is split and percent-decoded as libmicrohttpd does
 * before a handler sees it (a copy of its rules below: that decoding is
 * the library's, not trainctl's), and each argument a handler reads gets
 * that handler's check; the body is read as POST /api/v1/jobs reads it
 * (api_submit_parse) and the spec in it parsed as submit_spec parses it.
 */
#include "fuzz.h"

#include "core/util.h"
#include "api/api_int.h"
#include "api/route.h"
#include "spec/spec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8,npu:8", 1);
	return 0;
}

/* libmicrohttpd's MHD_unescape_plus + MHD_http_unescape, in place. */
static void mhd_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		unsigned hi, lo;
		if (*r == '+') {
			*w++ = ' ';
		} else if (*r == '%' && r[1] && r[2] && sscanf(r + 1, "%1x%1x", &hi, &lo) == 2) {
			*w++ = (char)(hi << 4 | lo);
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* What the handlers check of the arguments they read (api.c, stream.c). */
static void check_arg(const char *key, const char *v)
{
	static const struct {
		const char *key;
		long min, max, def;
	} nums[] = {
		{ "limit", 1, 100000, 100 },   { "offset", 0, 1L << 40, 0 }, { "rank", -1, 1 << 20, -1 },
		{ "tail", -1, 10000000, -1 },  { "points", 4, 100000, 2000 }, { "after", 0, 1L << 62, -1 },
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (!strcmp(key, nums[i].key)) {
			long out;
			if (api_arg_long(v, nums[i].min, nums[i].max, nums[i].def, &out))
				FUZZ_ASSERT(out == nums[i].def || (out >= nums[i].min && out <= nums[i].max));
		}
	double d;
	if (!strcmp(key, "xmin") || !strcmp(key, "xmax") || !strcmp(key, "since"))
		parse_double(v, &d);
	unsigned set;
	const char *bad;
	int badlen;
	if (!strcmp(key, "state") && !api_parse_states(v, &set, &bad, &badlen))
		FUZZ_ASSERT(bad >= v && bad + badlen <= v + strlen(v));
}

static void query(char *q)
{
	for (char *arg = q; arg;) {
		char *amp = strchr(arg, '&');
		if (amp)
			*amp = '\0';
		char *eq = strchr(arg, '=');
		if (eq)
			*eq = '\0';
		mhd_unescape(arg);
		if (eq)
			mhd_unescape(eq + 1);
		check_arg(arg, eq ? eq + 1 : "");
		arg = amp ? amp + 1 : NULL;
	}
}

static void route(const char *method, char *path)
{
	struct route_match m;
	mhd_unescape(path); /* libmicrohttpd decodes the path too */
	route_match(api_routes, api_nroutes, method, path, &m);
	FUZZ_ASSERT(m.status == 0 || m.status == 404 || m.status == 405);
	FUZZ_ASSERT(m.status != 0 || m.route);
	const char *job = route_param(&m, "job");
	if (job)
		api_id_ok(job);
	struct sbuf allow = SBUF_INIT;
	route_allow_text(m.allow, &allow);
	sbuf_release(&allow);
	route_match_release(&m);
}

static void body(const char *b, size_t len)
{
	struct api_submit a;
	struct sbuf why = SBUF_INIT;
	unsigned st = api_submit_parse(b, len, &a, &why);
	FUZZ_ASSERT(st == 0 || (st == 400 && why.len && !a.text));
	if (!st) {
		FUZZ_ASSERT(a.text && (!a.base || a.base[0] == '/'));
		struct spec *sp = NULL;
		struct tc_err err = TC_ERR_INIT;
		if (spec_parse_backend(a.text, strlen(a.text), a.file ? a.file : "spec",
				       a.base ? a.base : "/nonexistent-fuzz", NULL, &sp, &err) == 0)
			spec_free(sp);
		tc_err_release(&err);
	}
	api_submit_release(&a);
	sbuf_release(&why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	size_t head = nl ? (size_t)(nl - (const char *)data) : size;
	char *line = fuzz_cstr(data, head);
	char *sp = strchr(line, ' ');
	if (sp) {
		*sp = '\0';
		char *path = sp + 1, *q = strchr(path, '?');
		if (q)
			*q++ = '\0';
		route(line, path);
		if (q)
			query(q);
	}
	free(line);
	if (nl)
		body((const char *)data + head + 1, size - head - 1);
	return 0;
}
