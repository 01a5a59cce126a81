/*
 * fuzz_plan_yaml.c -- the planner's YAML: the input as a model file
 * (layers with params, time_ms, ...) and as a cluster file (strategy.c).
 * An accepted model is asked what the strategy search asks of it.
 */
#include "fuzz.h"

#include "plan/plan.h"
#include "plan/plan_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct tc_err err = TC_ERR_INIT;
	struct plan_model *m = NULL;
	if (plan_model_parse(text, size, "model.yaml", &m, &err) == 0) {
		FUZZ_ASSERT(plan_model_layers(m) >= 1);
		fuzz_touch(plan_model_name(m));
		for (int tp = 0; tp <= 17; tp++)
			plan_model_tp_ok(m, tp);
		plan_model_free(m);
	}
	tc_err_release(&err);

	struct plan_cluster c;
	plan_cluster_defaults(&c);
	if (plan_cluster_parse(text, size, "cluster.yaml", &c, &err) == 0)
		FUZZ_ASSERT(c.nodes >= 1 && c.devices_per_node >= 1);
	tc_err_release(&err);
	return 0;
}
