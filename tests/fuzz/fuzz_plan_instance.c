/*
 * fuzz_plan_instance.c -- plan instances (instance.c): the input as one
 * JSON line and as a CSV file.  An accepted instance must read back the
 * same from plan_instance_to_json() (the fast reader and jansson's must
 * agree), and a small one is partitioned.
 */
#include "fuzz.h"

#include "plan/plan.h"

static void solve(const struct plan_instance *in)
{
	struct plan_result r;
	struct tc_err err = TC_ERR_INIT;
	if (in->g > 24)
		return; /* the solver is fuzzed for the input's sake, not its speed */
	memset(&r, 0, sizeof(r));
	if (plan_partition(in, PLAN_OBJ_TRAIN, 0, &r, &err) == 0)
		FUZZ_ASSERT(r.s == in->s);
	plan_result_release(&r);
	tc_err_release(&err);
	memset(&r, 0, sizeof(r));
	if (plan_partition(in, PLAN_OBJ_PIPELINE, in->micro_batches ? in->micro_batches : 4, &r,
			   &err) == 0)
		FUZZ_ASSERT(r.s == in->s);
	plan_result_release(&r);
	tc_err_release(&err);
}

static void round_trip(const struct plan_instance *in)
{
	struct sbuf text = SBUF_INIT;
	struct plan_instance back;
	struct tc_err err = TC_ERR_INIT;
	plan_instance_to_json(in, &text);
	memset(&back, 0, sizeof(back));
	int rc = plan_instance_from_json(text.buf, text.len - 1, "again", &back, &err);
	if (rc)
		fprintf(stderr, "written back: %s-> %s\n", text.buf, err.msg);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(back.g == in->g && back.s == in->s && back.micro_batches == in->micro_batches);
	FUZZ_ASSERT(!memcmp(back.x, in->x, (size_t)in->g * sizeof(double)));
	FUZZ_ASSERT(!memcmp(back.c, in->c, (size_t)(in->g - 1) * (size_t)in->s * sizeof(double)));
	plan_instance_release(&back);
	sbuf_release(&text);
	tc_err_release(&err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct plan_instance in;
	struct tc_err err = TC_ERR_INIT;
	memset(&in, 0, sizeof(in));
	if (plan_instance_from_json((const char *)data, size, "fuzz.jsonl: instance 0", &in, &err) == 0) {
		round_trip(&in);
		solve(&in);
	}
	plan_instance_release(&in);
	tc_err_release(&err);

	char *text = fuzz_cstr(data, size);
	memset(&in, 0, sizeof(in));
	if (plan_instance_from_csv(text, "fuzz.csv", &in, &err) == 0) {
		round_trip(&in);
		solve(&in);
	}
	plan_instance_release(&in);
	tc_err_release(&err);
	free(text);
	return 0;
}
