/*
 * fuzz_s3_ini.c -- storage.conf ([section] key = value, s3_ini.c): the
 * input as the file, asked for the keys trainctl reads.
 */
#include "fuzz.h"

#include "storage/s3_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = { "endpoint", "addressing", "access_key_id",
					    "secret_access_key", "session_token", "region",
					    "verify_etag", "", NULL };
	static const char *const sections[] = { "s3", "obs", "", NULL };
	for (const char *const *s = sections; *s; s++)
		for (const char *const *k = keys; *k; k++)
			free(s3_ini_get((const char *)data, size, *s, *k));
	return 0;
}
