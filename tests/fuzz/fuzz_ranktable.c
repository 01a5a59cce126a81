/*
 * fuzz_ranktable.c -- Ascend rank tables (ranktable.c): the input as
 * /etc/hccn.conf (address_<id>=<ip> lines) for npus 0..7, and, cut at
 * each "\n--\n", as the one-server hccl.json parts of a multi-node job
 * that node 0 merges.
 */
#include "fuzz.h"

#include "launch/launch.h"

#define MAX_PARTS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int ids[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	char *ips[8];
	struct tc_err err = TC_ERR_INIT;
	if (ranktable_parse_ips((const char *)data, size, "hccn.conf", ids, 8, ips, &err) == 0) {
		for (int i = 0; i < 8; i++) {
			FUZZ_ASSERT(ips[i]);
			free(ips[i]);
		}
	} else {
		for (int i = 0; i < 8; i++)
			FUZZ_ASSERT(!ips[i]);
	}
	tc_err_release(&err);

	char *text = fuzz_cstr(data, size);
	char *parts[MAX_PARTS];
	int n = 0;
	for (char *p = text; p && n < MAX_PARTS;) {
		char *cut = strstr(p, "\n--\n");
		if (cut)
			*cut = '\0';
		parts[n++] = p;
		p = cut ? cut + 4 : NULL;
	}
	char *merged = ranktable_merge(parts, n, &err);
	FUZZ_ASSERT(merged || err.msg);
	free(merged);
	tc_err_release(&err);
	free(text);
	return 0;
}
