/* test_jobs_listing.c -- job_json_brief_text, the listing's text, reads back
 * as the same JSON as job_to_json(JOB_JSON_BRIEF) for every kind of row. */
#include "test.h"

#include "core/json.h"
#include "core/sbuf.h"
#include "jobs/jobs.h"

#include <jansson.h>
#include <math.h>

static void same_as_tree(const struct job_row *j)
{
	struct sbuf text = SBUF_INIT;
	sbuf_adds(&text, "[");
	job_json_brief_text(j, &text);
	sbuf_adds(&text, "]");
	json_error_t je;
	json_t *got = json_loads(text.buf, 0, &je);
	if (!got)
		fprintf(stderr, "not JSON (%s): %s\n", je.text, text.buf);
	CHECK(got != NULL);
	json_t *want = job_to_json(j, JOB_JSON_BRIEF);
	if (!json_equal(json_array_get(got, 0), want)) {
		char *w = json_dumps(want, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fprintf(stderr, "text %s\ntree %s\n", text.buf, w);
		free(w);
		CHECK(0);
	}
	/* the same keys in the same order */
	const char *k1, *k2;
	json_t *v;
	void *it = json_object_iter(want);
	json_object_foreach(json_array_get(got, 0), k1, v) {
		CHECK(it != NULL);
		k2 = json_object_iter_key(it);
		CHECK_STR(k1, k2);
		it = json_object_iter_next(want, it);
	}
	CHECK(it == NULL);
	json_decref(got);
	json_decref(want);
	sbuf_release(&text);
}

TEST(brief_text_reads_as_the_tree)
{
	struct job_row j = { .id = "20261126-073811-504-a30f", .name = "train \"x\" \\ y",
			     .state = JOB_RUNNING, .run_dir = "/tmp/runs/a", .created = 1795678691.5047348,
			     .started = 1795678691.52, .ended = 0, .exit_code = -1, .restarts = 2,
			     .world_size = 8, .sup_pid = 4242, .user = "alice", .priority = 150,
			     .preemptible = true, .device_type = "gpu", .device_count = 4,
			     .devices = "0,1,2,3", .stop_reason = JOB_STOP_PREEMPTED, .managed = true,
			     .backend = "local" };
	same_as_tree(&j);

	/* nothing set: nulls, an empty user, a zero time */
	struct job_row e = { .id = "e", .name = "e", .state = JOB_QUEUED, .run_dir = "/r" };
	same_as_tree(&e);

	/* times that print as integers or with exponents; control characters, UTF-8 */
	struct job_row t = e;
	t.created = 1700000000.0;
	t.started = 1e21;
	t.ended = INFINITY;
	t.name = "tab\there\nnew line \x01 caf\xc3\xa9 \xe6\x97\xa5";
	t.root_cause = "rank 1 exited with code 3";
	same_as_tree(&t);

	/* a root cause longer than a listing shows: cut at 300 characters, not bytes */
	struct sbuf long_cause = SBUF_INIT;
	for (int i = 0; i < 400; i++)
		sbuf_adds(&long_cause, i % 2 ? "\xc3\xa9" : "x");
	t.root_cause = long_cause.buf;
	same_as_tree(&t);
	sbuf_release(&long_cause);

	/* a Slurm job: the backend's own part */
	struct job_row s = j;
	s.backend = "slurm";
	s.slurm_job = "15";
	s.slurm_nodes = "n[1-2]";
	s.slurm_state = NULL;
	same_as_tree(&s);
	s.slurm_job = NULL;
	same_as_tree(&s);
}

/* Strings are copied whole when nothing in them needs escaping (tested 8
 * bytes at a time): the text is json_add_str's, byte for byte, whatever
 * byte sits wherever in a string of any length. */
TEST(brief_text_strings_as_json_add_str)
{
	const char *odd[] = { "\"", "\\", "\n", "\x01", "\x1f", "\x7f", " ", "~", "\xc3\xa9",
			      "\xe6\x97\xa5", "\xff", "\xc3" };
	for (size_t len = 0; len < 20; len++)
		for (size_t at = 0; at <= len; at++)
			for (size_t k = 0; k < sizeof(odd) / sizeof(odd[0]); k++) {
				struct sbuf name = SBUF_INIT, text = SBUF_INIT, want = SBUF_INIT;
				for (size_t i = 0; i < len; i++)
					sbuf_adds(&name, i == at ? odd[k] : "a");
				if (at == len)
					sbuf_adds(&name, odd[k]);
				struct job_row j = { .id = "e", .name = name.buf, .state = JOB_QUEUED,
						     .run_dir = "/r" };
				job_json_brief_text(&j, &text);
				sbuf_adds(&want, "\"name\":");
				json_add_str(&want, name.buf);
				sbuf_addch(&want, ',');
				if (!strstr(text.buf, want.buf))
					fprintf(stderr, "%s: want %s\n", text.buf, want.buf);
				CHECK(strstr(text.buf, want.buf) != NULL);
				CHECK_INT(strlen(text.buf), text.len);
				sbuf_release(&name);
				sbuf_release(&text);
				sbuf_release(&want);
			}
}

/* The listing writes times of day without printf: the text must be %.17g's
 * (with ".0" for an integer), for random times and for fractions that round
 * half way, up to the next second, or to trailing zeros. */
static void time_as_printf(double t)
{
	struct job_row j = { .id = "e", .name = "e", .state = JOB_QUEUED, .run_dir = "/r",
			     .created = t };
	struct sbuf text = SBUF_INIT;
	job_json_brief_text(&j, &text);
	char want[64];
	int n = snprintf(want, sizeof(want), "\"created\":%.17g", t);
	if (!strchr(want, '.') && !strchr(want, 'e'))
		snprintf(want + n, sizeof(want) - (size_t)n, ".0");
	if (!strstr(text.buf, want))
		fprintf(stderr, "%.17g: %s, want %s\n", t, text.buf, want);
	CHECK(strstr(text.buf, want) != NULL);
	sbuf_release(&text);
}

TEST(brief_text_times_as_printf)
{
	unsigned long long x = 88172645463325252ULL;
	/* 50,000 rounds: 4 s of CPU under ASan with 200,000 went past the runner's
	 * 60 s (wall) at load 26 */
	for (int i = 0; i < 50000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		double t = 1e9 + (double)(x >> 11) / (double)(1ULL << 53) * 8.9e9;
		time_as_printf(t);
		time_as_printf(floor(t) + (double)(x % 16) / 16.0); /* exact binary fractions */
		time_as_printf(floor(t) + 0.99999995);
		time_as_printf(floor(t) + 0.00000005);
	}
	const double edges[] = { 1e9, 1e9 - 1, 1700000000.0, 1764150000.5, 1764150000.00000005,
				 9999999998.99999995, 9999999999.0, 1e10, 123.25 };
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		time_as_printf(edges[i]);
}
