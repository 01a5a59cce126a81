/*
 * fuzz_safetensors.c -- safetensors files: st_parse() on the input as a
 * whole file (u64 header length, JSON header, data), then `ckpt inspect`'s
 * descriptions of what it accepted.
 */
#include "fuzz.h"

#include "ckpt/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_file *f = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = st_parse(data, size, "fuzz.safetensors", &f, &err);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && err.msg && !f);
		tc_err_release(&err);
		return 0;
	}
	uint64_t covered = 0;
	for (size_t i = 0; i < f->nt; i++) {
		const struct st_tensor *t = &f->t[i];
		FUZZ_ASSERT(t->begin <= t->end && f->data_off + t->end <= f->size);
		covered += t->end - t->begin;
		FUZZ_ASSERT(st_find(f, t->name) != NULL);
	}
	FUZZ_ASSERT(covered == f->size - f->data_off);
	struct sbuf out = SBUF_INIT;
	st_describe(f, false, &out);
	st_describe(f, true, &out);
	sbuf_release(&out);
	st_close(f);
	return 0;
}
