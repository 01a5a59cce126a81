/* test_diagjson.c -- src/jobs/diagjson.c: the types of diagnostics.json, the
 * file a job writes into its own run folder and the server serves inside the
 * job record (jobs_diagnostics, jobs_show): what the supervisor writes comes
 * through whole; a number that is text, an unknown key, a list item that is
 * no object, an overlong text do not. */
#include "test.h"

#include "core/sbuf.h"
#include "jobs/diagjson.h"
#include "jobs/jobs.h"

#include <jansson.h>

static const char *const HOSTILE = "<meta http-equiv=refresh content=\"0;url=http://127.0.0.1:1/\">";

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *o = json_loads(text, 0, &e);
	if (!o) {
		fprintf(stderr, "test JSON: %s (line %d)\n", e.text, e.line);
		exit(1);
	}
	return o;
}

/* Does any string anywhere in v contain needle? */
static int has_text(const json_t *v, const char *needle)
{
	const char *k;
	json_t *x;
	size_t i;
	if (json_is_string(v))
		return strstr(json_string_value(v), needle) != NULL;
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			if (strstr(k, needle) || has_text(x, needle))
				return 1;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (has_text(x, needle))
				return 1;
	}
	return 0;
}

/* The shapes launch/watch.c and launch/multinode.c write. */
static const char *const GOOD =
	"{\"attempt\": 1, \"steps\": 30, \"median_step_time\": 0.105, \"hang_timeout\": 6.0,"
	" \"straggler_percent\": 25.0, \"straggler_steps\": 5,"
	" \"ranks\": [{\"rank\": 0, \"steps\": 30, \"step_time\": 0.1},"
	"             {\"rank\": 1, \"steps\": 30, \"step_time\": null}],"
	" \"stragglers\": [{\"rank\": 1, \"step_time\": 0.2, \"slower_percent\": 33.3, \"node\": 1}],"
	" \"nodes\": [{\"node\": 0, \"node_name\": \"n0\", \"median_step_time\": 0.1, \"hang_timeout\": null}],"
	" \"hangs\": [{\"attempt\": 0, \"time\": 1700000000.5, \"silent_seconds\": 6.2, \"timeout\": 6.0,"
	"   \"culprit\": 3, \"culprit_node\": 1, \"culprit_node_name\": \"n1\", \"why\": \"not in a collective\","
	"   \"message\": \"no progress\", \"device_utilization\": null, \"utilization_source\": \"nvml\","
	"   \"stacks\": [{\"rank\": 3, \"node\": 1, \"stack\": \"File x.py, line 3\"}, {\"rank\": 2, \"stack\": null}]}],"
	" \"log_matches\": [{\"attempt\": 0, \"rank\": 1, \"pattern\": \"NaN\", \"action\": \"fail\","
	"   \"line\": \"loss NaN\", \"time\": 1700000001.0, \"node\": 0}],"
	" \"resume_mismatch\": {\"attempt\": 1, \"checkpoint_step\": 10, \"epoch\": -1, \"iteration\": 12,"
	"   \"message\": \"did not resume\"}}";

TEST(diag_typed_keeps_what_the_supervisor_writes)
{
	json_t *in = parse(GOOD);
	json_t *out = jobs_diag_typed(in);
	CHECK(out != NULL);
	if (!json_equal(in, out)) {
		char *a = json_dumps(out, JSON_SORT_KEYS);
		fprintf(stderr, "changed: %s\n", a);
		free(a);
		CHECK(0);
	}
	json_decref(in);
	json_decref(out);
}

TEST(diag_typed_drops_text_where_numbers_are)
{
	struct sbuf t = SBUF_INIT;
	json_t *h = json_string(HOSTILE);
	char *q = json_dumps(h, JSON_ENCODE_ANY); /* the hostile text as a JSON string */
	json_decref(h);
	sbuf_addf(&t,
		  "{\"attempt\": %s, \"steps\": %s, \"median_step_time\": %s, \"hang_timeout\": %s,"
		  " \"straggler_percent\": %s, \"straggler_steps\": [1], %s: %s, \"evil\": {\"a\": %s},"
		  " \"ranks\": [{\"rank\": %s, \"steps\": %s, \"step_time\": %s, \"x\": %s}, %s, 7,"
		  "             {\"rank\": 2.5, \"steps\": true, \"step_time\": {}}],"
		  " \"stragglers\": [{\"rank\": %s, \"slower_percent\": %s, \"step_time\": %s}],"
		  " \"hangs\": [{\"attempt\": %s, \"silent_seconds\": %s, \"culprit\": %s, \"culprit_node\": %s,"
		  "   \"culprit_node_name\": {\"n\": %s}, \"why\": [%s], \"stacks\": [%s, {\"rank\": %s}]}],"
		  " \"log_matches\": %s, \"resume_mismatch\": [%s]}",
		  q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q, q);
	json_t *in = parse(t.buf);
	json_t *out = jobs_diag_typed(in);
	CHECK(out != NULL);
	CHECK(!has_text(out, "<meta"));
	CHECK(!has_text(out, "refresh"));
	/* what is left: the lists, their objects, and no key but the known ones */
	CHECK_INT(json_object_size(out), 3); /* ranks, stragglers, hangs: the arrays */
	CHECK(json_is_array(json_object_get(out, "ranks")));
	CHECK(!json_object_get(out, "evil") && !json_object_get(out, HOSTILE));
	CHECK(!json_object_get(out, "straggler_steps") && !json_object_get(out, "resume_mismatch"));
	CHECK(!json_object_get(out, "log_matches"));
	/* a list keeps its objects, typed, and drops what is no object */
	json_t *ranks = json_object_get(out, "ranks");
	CHECK_INT(json_array_size(ranks), 2);
	CHECK_INT(json_object_size(json_array_get(ranks, 0)), 0);
	CHECK_INT(json_object_size(json_array_get(ranks, 1)), 0); /* 2.5, true, {}: none an integer */
	json_t *hg = json_array_get(json_object_get(out, "hangs"), 0);
	CHECK(hg && !json_object_get(hg, "culprit") && !json_object_get(hg, "why") &&
	      !json_object_get(hg, "culprit_node_name"));
	CHECK_INT(json_array_size(json_object_get(hg, "stacks")), 1);
	json_decref(in);
	json_decref(out);
	free(q);
	sbuf_release(&t);
}

TEST(diag_typed_keeps_text_as_text_bounded)
{
	/* text fields stay text (the page escapes them), cut to their bound */
	struct sbuf big = SBUF_INIT;
	sbuf_adds(&big, "{\"hangs\": [{\"why\": \"");
	sbuf_adds(&big, "x");
	for (size_t i = 0; i < JOBS_DIAG_TEXT_MAX; i++)
		sbuf_adds(&big, "\\u00e9"); /* two bytes each: the cut falls inside one */
	sbuf_adds(&big, "\", \"culprit_node_name\": \"<img src=x>\"}]}");
	json_t *in = parse(big.buf);
	json_t *out = jobs_diag_typed(in);
	json_t *hg = json_array_get(json_object_get(out, "hangs"), 0);
	const char *why = json_string_value(json_object_get(hg, "why"));
	CHECK(why != NULL);
	CHECK(json_string_length(json_object_get(hg, "why")) <= JOBS_DIAG_TEXT_MAX);
	CHECK_INT(json_string_length(json_object_get(hg, "why")), JOBS_DIAG_TEXT_MAX - 1);
	CHECK_STR(json_string_value(json_object_get(hg, "culprit_node_name")), "<img src=x>");
	/* still valid UTF-8: dumping it works */
	char *d = json_dumps(out, 0);
	CHECK(d != NULL);
	free(d);
	json_decref(in);
	json_decref(out);
	sbuf_release(&big);
}

TEST(diag_typed_bounds_lists)
{
	json_t *in = json_object(), *ranks = json_array();
	for (int i = 0; i < JOBS_DIAG_LIST_MAX + 10; i++)
		json_array_append_new(ranks, json_pack("{s:i, s:i}", "rank", i, "steps", 1));
	json_object_set_new(in, "ranks", ranks);
	json_t *out = jobs_diag_typed(in);
	CHECK_INT(json_array_size(json_object_get(out, "ranks")), JOBS_DIAG_LIST_MAX);
	json_decref(in);
	json_decref(out);
	json_t *a = json_array();
	CHECK(jobs_diag_typed(a) == NULL);
	CHECK(jobs_diag_typed(NULL) == NULL);
	json_decref(a);
}

/* The road the server serves: jobs_diagnostics over a run folder the job wrote. */
TEST(jobs_diagnostics_serves_only_typed_fields)
{
	const char *dir = test_tmpdir();
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t,
		  "{\"ranks\": [{\"rank\": \"<meta http-equiv=refresh content='0;url=http://127.0.0.1:1/'>\","
		  " \"steps\": 3, \"step_time\": \"</td><script>x()</script>\"}],"
		  " \"hangs\": [{\"attempt\": 1, \"silent_seconds\": 2.5, \"culprit\": \"<img src=x onerror=y>\","
		  " \"why\": \"<b>text stays text</b>\"}], \"extra\": \"<script>\"}");
	test_put_file(dir, "diagnostics.json", t.buf);
	json_t *d = jobs_diagnostics(dir);
	CHECK(d != NULL);
	CHECK(!has_text(d, "<meta") && !has_text(d, "<script") && !has_text(d, "<img"));
	json_t *r0 = json_array_get(json_object_get(d, "ranks"), 0);
	CHECK(!json_object_get(r0, "rank") && !json_object_get(r0, "step_time"));
	CHECK_INT(json_integer_value(json_object_get(r0, "steps")), 3);
	json_t *hg = json_array_get(json_object_get(d, "hangs"), 0);
	CHECK_STR(json_string_value(json_object_get(hg, "why")), "<b>text stays text</b>");
	CHECK(json_real_value(json_object_get(hg, "silent_seconds")) == 2.5);
	json_decref(d);
	/* not an object at all: no diagnostics */
	test_put_file(dir, "diagnostics.json", "[\"<meta>\"]");
	CHECK(jobs_diagnostics(dir) == NULL);
	sbuf_release(&t);
}
