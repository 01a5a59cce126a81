/* test_safetensors.c -- strict header validation */
#include "test.h"

#include "ckpt/ckpt.h"

#include <stdio.h>
#include <stdint.h>

static const char *write_st(const char *name, const char *header, size_t data_len)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", test_tmpdir(), name);
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	uint64_t n = strlen(header);
	unsigned char len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(n >> (8 * i));
	CHECK(fwrite(len, 1, 8, f) == 8);
	CHECK(fwrite(header, 1, n, f) == n);
	for (size_t i = 0; i < data_len; i++)
		CHECK(fputc((int)i, f) != EOF);
	CHECK(fclose(f) == 0);
	return path;
}

TEST(valid_file)
{
	const char *p = write_st("ok.safetensors",
				 "{\"__metadata__\":{\"format\":\"pt\"},"
				 "\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
				 "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]}}",
				 16);
	struct st_file *f;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(st_open(p, &f, &err), 0);
	CHECK_INT(f->nt, 2);
	const struct st_tensor *w = st_find(f, "w");
	CHECK(w && w->dtype == ST_BF16 && w->ndim == 2 && w->shape[1] == 3);
	CHECK_STR(f->metadata_json, "{\"format\":\"pt\"}");
	struct sbuf out = SBUF_INIT;
	st_describe(f, false, &out);
	CHECK_CONTAINS(out.buf, "[2, 3]");
	sbuf_release(&out);
	st_close(f);
}

static void expect_bad(const char *header, size_t data, const char *msg)
{
	const char *p = write_st("bad.safetensors", header, data);
	struct st_file *f = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(st_open(p, &f, &err), TC_EINPUT);
	CHECK(f == NULL);
	CHECK_CONTAINS(err.msg, msg);
	tc_err_release(&err);
}

TEST(rejected_headers)
{
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, "overlaps");
	expect_bad("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the 4 bytes");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "negative");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, "2 bytes after");
	expect_bad("[1,2]", 0, "not a JSON object");
	expect_bad("{\"a\":1,\"a\":2}", 0, "not valid JSON");
}
