/*
 * fuzz_set.c -- --set KEY=VALUE overrides (src/spec/override.c): the input
 * is one override grafted into a fixed spec that holds every key family,
 * or, when it holds NUL bytes, SPEC \0 SET \0 SET ...: the sets grafted in
 * order into SPEC (job.yaml).  Each set is checked alone (spec_set_check)
 * first; one it refuses must make spec_parse_set fail too.  A spec that
 * parses records every set's key and is written back as YAML and JSON.
 *
 * Devices come from TRAINCTL_FAKE_DEVICES, as in fuzz_spec.c.
 */
#include "fuzz.h"

#include "spec/spec.h"

static const char base_spec[] =
	"name: base\n"
	"command: [\"/bin/sh\", \"-c\", \"true\"]\n"
	"args: {lr: 0.1, verbose: null}\n"
	"env: {OMP_NUM_THREADS: \"1\"}\n"
	"devices: {type: gpu, per_node: 2}\n"
	"restart: {max_restarts: 1, grace_seconds: 5}\n"
	"checkpoint: {dir: ckpt, resume: auto, keep: 2}\n"
	"inputs: [{from: /tmp, to: data}]\n"
	"metrics: {format: auto, files: [a.json]}\n"
	"priority: 5\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("TRAINCTL_FAKE_DEVICES", "gpu:8,npu:8", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = fuzz_cstr(data, size);
	const char *nul = memchr(data, '\0', size);
	const char *spec = nul ? in : base_spec;
	size_t speclen = nul ? (size_t)(nul - (const char *)data) : strlen(base_spec);
	struct strvec sets = STRVEC_INIT;
	bool refused = false;
	/* the sets: the whole input, or each NUL-separated part after the spec */
	for (size_t at = nul ? speclen + 1 : 0; nul ? at <= size : !sets.nr;) {
		const char *set = nul ? in + at : in;
		struct tc_err err = TC_ERR_INIT;
		if (spec_set_check(set, &err)) {
			FUZZ_ASSERT(err.msg && !strncmp(err.msg, "--set ", 6));
			refused = true;
		}
		tc_err_release(&err);
		strvec_push(&sets, set);
		if (!nul)
			break;
		at += strlen(set) + 1;
	}
	struct spec *sp = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = spec_parse_set(spec, speclen, "job.yaml", "/nonexistent-fuzz", NULL, &sets, &sp, &err);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && err.msg && !sp);
	} else {
		FUZZ_ASSERT(!refused);
		FUZZ_ASSERT(sp && sp->name && sp->workdir && sp->noverrides >= 1);
		for (size_t i = 0; i < sets.nr; i++) {
			size_t klen = strcspn(sets.v[i], "=");
			bool found = false;
			for (size_t j = 0; j < sp->noverrides; j++)
				found |= strlen(sp->overrides[j].key) == klen &&
					 !memcmp(sp->overrides[j].key, sets.v[i], klen);
			FUZZ_ASSERT(found);
		}
		char *y = spec_to_yaml(sp), *j = spec_to_json(sp);
		FUZZ_ASSERT(y && j);
		free(y);
		free(j);
		spec_free(sp);
	}
	tc_err_release(&err);
	strvec_clear(&sets);
	free(in);
	return 0;
}
