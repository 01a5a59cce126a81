/*
 * fuzz_zoo.c -- zoo model.yaml (a list of cases: case_name, desc,
 * params): zoo_cases_parse() against a root folder that does not exist.
 */
#include "fuzz.h"

#include "zoo/zoo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zoo_case *v = NULL;
	size_t n = 0;
	struct tc_err err = TC_ERR_INIT;
	int rc = zoo_cases_parse((const char *)data, size, "model.yaml", "/nonexistent-fuzz", &v, &n,
				 &err);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && err.msg && !v && !n);
	} else {
		FUZZ_ASSERT(n >= 1);
		for (size_t i = 0; i < n; i++) {
			FUZZ_ASSERT(v[i].name && v[i].run_dir && v[i].run_file);
			FUZZ_ASSERT(v[i].nproc_per_node >= 1);
			for (size_t k = 0; k < v[i].nparams; k++)
				fuzz_touch(v[i].params[k].val);
		}
	}
	zoo_cases_free(v, n);
	tc_err_release(&err);
	return 0;
}
