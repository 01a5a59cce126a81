/*
 * test_parser_bounds.c -- parsers that take (ptr, len) read only those
 * bytes: an embedded NUL in a spec (spec_parse copied up to the NUL, then
 * walked len bytes of the copy) and long numbers at the very end of a plan
 * instance line (strtod read past the buffer).  Inputs sit right before a
 * PROT_NONE page, so one byte too far is a crash; glibc's strtod is not
 * instrumented by ASan, which is why a guard page is needed at all.
 */
#include "test.h"

#include "plan/plan.h"
#include "spec/spec.h"

#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

/* len bytes of text, ending exactly where an unreadable page starts. */
struct guarded {
	char *map;
	size_t page;
	char *p;
};

static struct guarded guard(const char *text, size_t len)
{
	struct guarded g;
	g.page = (size_t)sysconf(_SC_PAGESIZE);
	CHECK(len <= g.page);
	g.map = mmap(NULL, 2 * g.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(g.map != MAP_FAILED);
	CHECK(mprotect(g.map + g.page, g.page, PROT_NONE) == 0);
	g.p = g.map + g.page - len;
	memcpy(g.p, text, len);
	return g;
}

static void unguard(struct guarded *g)
{
	CHECK(munmap(g->map, 2 * g->page) == 0);
}

/* ---- spec_parse: embedded NUL ---- */

TEST(spec_with_a_nul_is_an_error)
{
	/* the reproducer: '{', NUL, '\n' as job.json, at a heap block's end and a page's end */
	static const char bytes[3] = { '{', '\0', '\n' };
	char *heap = malloc(3);
	CHECK(heap != NULL);
	memcpy(heap, bytes, 3);
	struct guarded g = guard(bytes, 3);
	const char *bufs[] = { heap, g.p };
	for (int i = 0; i < 2; i++) {
		struct spec *s = NULL;
		struct tc_err err = TC_ERR_INIT;
		CHECK_INT(spec_parse(bufs[i], 3, "job.json", "/tmp", &s, &err), TC_ESPEC);
		CHECK(s == NULL);
		CHECK_STR(err.msg, "job.json:1: the spec holds a NUL byte");
		tc_err_release(&err);
	}
	/* the line of the NUL is named, in YAML too */
	static const char yaml[] = "name: x\ncommand: [\"true\"]\n\0junk";
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(spec_parse(yaml, sizeof(yaml) - 1, "job.yaml", "/tmp", &s, &err), TC_ESPEC);
	CHECK_STR(err.msg, "job.yaml:3: the spec holds a NUL byte");
	tc_err_release(&err);
	unguard(&g);
	free(heap);
}

TEST(json_spec_ending_at_a_page_end_parses)
{
	static const char text[] = "{\"name\":\t\"x\",\t\"command\": [\"true\"]}";
	struct guarded g = guard(text, sizeof(text) - 1);
	struct spec *s = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse(g.p, sizeof(text) - 1, "job.json", "/tmp", &s, &err);
	if (rc)
		fprintf(stderr, "%s\n", err.msg);
	CHECK_INT(rc, 0);
	CHECK_STR(s->name, "x");
	spec_free(s);
	unguard(&g);
}

/* ---- plan instances: long numbers at the end of the buffer ---- */

static int parse_at_page_end(const char *text, struct plan_instance *in, struct tc_err *err)
{
	struct guarded g = guard(text, strlen(text));
	int rc = plan_instance_from_json(g.p, strlen(text), "line 1", in, err);
	unguard(&g);
	return rc;
}

TEST(instance_number_at_buffer_end_is_not_read_past)
{
	/* truncated lines whose last token is a number the fast path hands to strtod */
	const char *cut[] = {
		"{\"x\":[1,12345678901234567890",
		"{\"x\":[1,1234567890123456",
		"{\"x\":[1,1e400",
		"{\"x\":[1,1.5e-300",
		"{\"x\":[1,-98765432109876543210987654321",
		"{\"x\":[1,0.12345678901234567890123456789012345678901234567890123456789012345678901234567890",
		"{\"num_split\":12345678901234567890",
	};
	for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		struct plan_instance in;
		struct tc_err err = TC_ERR_INIT;
		CHECK_INT(parse_at_page_end(cut[i], &in, &err), TC_EINPUT);
		CHECK_CONTAINS(err.msg, "line 1: not JSON");
		tc_err_release(&err);
	}
}

TEST(instance_long_numbers_keep_their_value_and_sign)
{
	struct plan_instance in;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(parse_at_page_end("{\"x\":[12345678901234567890123,1.5e300,"
				    "0.1234567890123456789],\"C\":[[0],[2]],\"num_split\":1}",
				    &in, &err),
		  0);
	CHECK_INT(in.g, 3);
	CHECK(in.x[0] == 12345678901234567890123.0);
	CHECK(in.x[1] == 1.5e300);
	CHECK(in.x[2] == 0.1234567890123456789);
	plan_instance_release(&in);
	/* a long negative number stays negative (strtod read the sign, then it was negated again) */
	CHECK_INT(parse_at_page_end("{\"x\":[1,-12345678901234567890],\"C\":[[0]],\"num_split\":1}",
				    &in, &err),
		  TC_EINPUT);
	CHECK_CONTAINS(err.msg, "field 'x[1]': negative cost");
	tc_err_release(&err);
}
