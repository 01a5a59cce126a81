/*
 * fuzz_tfread.c -- TensorBoard event files a job wrote (src/metrics/tfread.c):
 * the input as a whole stream, then fed in pieces whose sizes its first
 * byte picks, as a file read while it grows; and the input as one Event's
 * bytes without framing.
 */
#include "fuzz.h"

#include "metrics/tfread.h"

#include <math.h>

/* Every item of r; returns how many events and corrupt records it gave. */
static size_t drain(struct tfread *r, bool at_end)
{
	struct tfread_event ev;
	enum tfread_result res;
	size_t n = 0;
	while ((res = tfread_next(r, at_end, &ev)) != TFREAD_MORE) {
		FUZZ_ASSERT(res == TFREAD_EVENT || res == TFREAD_CORRUPT);
		n++;
		if (res == TFREAD_CORRUPT) {
			FUZZ_ASSERT(fuzz_touch(tfread_reason(r)) > 0);
			continue;
		}
		fuzz_touch(ev.file_version);
		FUZZ_ASSERT(ev.nscalars == 0 || ev.scalars);
		for (size_t i = 0; i < ev.nscalars; i++)
			fuzz_touch(ev.scalars[i].tag);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfread *r = tfread_new();
	struct tfread_event ev;
	tfread_feed(r, data, size);
	size_t whole = drain(r, false);
	whole += drain(r, true);
	/* every record takes 16 bytes at least, a corrupt stretch 1 */
	FUZZ_ASSERT(whole <= size);
	FUZZ_ASSERT(tfread_next(r, true, &ev) == TFREAD_MORE);
	tfread_free(r);

	size_t piece = size ? (size_t)data[0] % 64 + 1 : 1;
	r = tfread_new();
	for (size_t at = 0; at < size; at += piece) {
		tfread_feed(r, data + at, size - at < piece ? size - at : piece);
		drain(r, false);
	}
	drain(r, true);
	tfread_free(r);

	r = tfread_new();
	if (tfread_parse_event(r, data, size, &ev))
		for (size_t i = 0; i < ev.nscalars; i++)
			fuzz_touch(ev.scalars[i].tag);
	tfread_free(r);
	return 0;
}
