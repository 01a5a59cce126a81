/*
 * fuzz_npu_smi.c -- the output of `npu-smi info` (devices.c): the table
 * of NPUs and their telemetry, read by devices_parse_npu_smi().
 */
#include "fuzz.h"

#include "devices/devices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct device_list l = DEVICE_LIST_INIT;
	char *text = fuzz_cstr(data, size);
	size_t n = devices_parse_npu_smi(text, &l);
	FUZZ_ASSERT(n == l.nr);
	for (size_t i = 0; i < l.nr; i++) {
		fuzz_touch(l.v[i].type);
		fuzz_touch(l.v[i].name);
	}
	device_list_release(&l);
	free(text);
	return 0;
}
