/*
 * fuzz_spec.c -- job specs: spec_parse() on the input as job.json when it
 * starts with '{' (blanks aside), else as job.yaml.  A spec that parses is
 * written back as YAML and JSON (spec/serialize.c).
 *
 * Devices come from TRAINCTL_FAKE_DEVICES, so that no input probes the
 * machine's GPUs; relative paths resolve under a folder that does not exist.
 */
#include "fuzz.h"

#include "spec/spec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8,npu:8", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	size_t i = 0;
	while (i < size && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	const char *name = i < size && s[i] == '{' ? "job.json" : "job.yaml";
	struct spec *sp = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse(s, size, name, "/nonexistent-fuzz", &sp, &err);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && err.msg && !sp);
	} else {
		FUZZ_ASSERT(sp && sp->name && sp->workdir);
		char *y = spec_to_yaml(sp), *j = spec_to_json(sp);
		FUZZ_ASSERT(y && j);
		free(y);
		free(j);
		spec_free(sp);
	}
	tc_err_release(&err);
	return 0;
}
