/*
 * fuzz_torchzip.c -- what torch.save writes (src/ckpt/torchzip.c):
 * ckpt_zip_parse() on the input as a whole zip archive (end record, zip64
 * records, central directory), then `ckpt inspect`'s descriptions.
 */
#include "fuzz.h"

#include "ckpt/ckpt.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ckpt_zip *z = NULL;
	struct tc_err err = TC_ERR_INIT;
	int rc = ckpt_zip_parse(data, size, "fuzz.pt", &z, &err);
	if (rc) {
		FUZZ_ASSERT(rc < 0 && err.msg && !z);
		tc_err_release(&err);
		return 0;
	}
	FUZZ_ASSERT(z->storages <= z->nrec && z->size == size);
	for (size_t i = 0; i < z->nrec; i++)
		for (const char *c = z->rec[i].name; *c; c++)
			FUZZ_ASSERT(*c >= 0x20 && *c < 0x7f);
	struct sbuf out = SBUF_INIT;
	ckpt_zip_describe(z, false, &out);
	ckpt_zip_describe(z, true, &out);
	FUZZ_ASSERT(strlen(out.buf) == out.len);
	sbuf_release(&out);
	ckpt_zip_free(z);
	return 0;
}
