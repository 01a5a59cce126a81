/*
 * fuzz_mbatch.c -- the metrics batch a supervisor (the job's account)
 * sends its root hub in a "metrics" event: store_mbatch_unpack()
 * (src/store/store_metrics.c) on the raw bytes, as hub/event.c calls it
 * after the base64.  An accepted batch packs again (store_mbatch_pack),
 * and that packs to the same bytes once more: the form is canonical.
 */
#include "fuzz.h"

#include "core/err.h"
#include "core/sbuf.h"
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_mbatch *b = store_mbatch_new("20261128-000000-000-f0zz");
	struct tc_err err = TC_ERR_INIT;
	int rc = store_mbatch_unpack(b, data, size, &err);
	if (rc) {
		FUZZ_ASSERT(rc == TC_EUSAGE && err.msg && *err.msg);
	} else {
		struct sbuf p1 = SBUF_INIT, p2 = SBUF_INIT;
		store_mbatch_pack(b, &p1);
		struct store_mbatch *c = store_mbatch_new("20261128-000000-000-f0zz");
		FUZZ_ASSERT(store_mbatch_unpack(c, p1.buf, p1.len, &err) == 0);
		store_mbatch_pack(c, &p2);
		FUZZ_ASSERT(p1.len == p2.len && !memcmp(p1.buf, p2.buf, p1.len));
		store_mbatch_free(c);
		sbuf_release(&p1);
		sbuf_release(&p2);
	}
	tc_err_release(&err);
	store_mbatch_free(b);
	return 0;
}
