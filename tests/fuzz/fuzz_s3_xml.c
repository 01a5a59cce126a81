/*
 * fuzz_s3_xml.c -- S3's XML answers (s3_xml.c): the input as a
 * ListObjectsV2 page (under the prefixes "" and "pre/"), an <Error>
 * answer and an InitiateMultipartUpload answer.
 */
#include "fuzz.h"

#include "storage/s3_int.h"

static void list(const char *xml, size_t len, const char *prefix)
{
	struct s3_xml_list l;
	memset(&l, 0, sizeof(l));
	s3_xml_parse_list(xml, len, prefix, &l);
	for (size_t i = 0; i < l.n; i++) {
		FUZZ_ASSERT(l.obj[i].key && *l.obj[i].key);
		fuzz_touch(l.obj[i].etag);
	}
	FUZZ_ASSERT(!l.truncated || (l.next_token && *l.next_token));
	s3_xml_list_release(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *xml = (const char *)data;
	list(xml, size, "");
	list(xml, size, "pre/");
	char *code = NULL, *msg = NULL;
	bool has = s3_xml_parse_error(xml, size, &code, &msg);
	FUZZ_ASSERT(has == (code || msg));
	free(code);
	free(msg);
	s3_xml_is_error(xml, size);
	free(s3_xml_upload_id(xml, size));
	char *s = fuzz_cstr(data, size);
	s3_parse_iso_date(s);
	free(s);
	return 0;
}
