/* test_s3.c -- the S3 scheme's byte-level helpers (storage/s3_int.h): XML answers and the INI reader, no network */
#include "test.h"

#include "storage/s3_int.h"

#include <stdlib.h>

/* A copy without a terminating NUL where one would be read past: the helpers take (bytes, len). */
static char *unterminated(const char *s, size_t *len)
{
	*len = strlen(s);
	char *b = malloc(*len ? *len : 1);
	CHECK(b != NULL);
	memcpy(b, s, *len);
	return b;
}

TEST(xml_list_strips_the_prefix_and_skips_folders)
{
	const char *xml =
		"<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><Prefix>run/</Prefix>"
		"<Contents><Key>run/a.bin</Key><LastModified>2026-01-02T03:04:05.500Z</LastModified>"
		"<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag><Size>42</Size></Contents>"
		"<Contents><Key>run/dir/</Key><Size>0</Size></Contents>"
		"<Contents><Key>run/</Key><Size>0</Size></Contents>"
		"<Contents><Key>other/x</Key><Size>1</Size></Contents>"
		"<Contents><Key>run/a &amp; b &#233;&#x20ac;.txt</Key><Size>7</Size>"
		"<ETag>\"abc-2\"</ETag></Contents>"
		"<IsTruncated>true</IsTruncated><NextContinuationToken>t/1+=</NextContinuationToken>"
		"</ListBucketResult>";
	size_t len;
	char *b = unterminated(xml, &len);
	struct s3_xml_list l = { 0 };
	s3_xml_parse_list(b, len, "run/", &l);
	CHECK_INT(l.n, 2);
	CHECK_STR(l.obj[0].key, "a.bin");
	CHECK_INT(l.obj[0].size, 42);
	CHECK_STR(l.obj[0].etag, "0123456789abcdef0123456789abcdef");
	CHECK(l.obj[0].mtime_ns == 1767323045500000000LL);
	CHECK_STR(l.obj[1].key, "a & b \xc3\xa9\xe2\x82\xac.txt");
	CHECK_STR(l.obj[1].etag, "abc-2");
	CHECK(l.truncated);
	CHECK_STR(l.next_token, "t/1+=");
	s3_xml_list_release(&l);
	CHECK_INT(l.n, 0);
	free(b);
}

TEST(xml_list_truncated_without_a_token_ends)
{
	const char *xml = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
	struct s3_xml_list l = { 0 };
	s3_xml_parse_list(xml, strlen(xml), "", &l);
	CHECK_INT(l.n, 0);
	CHECK(!l.truncated);
	CHECK(l.next_token == NULL);
	s3_xml_list_release(&l);
}

/* tests/fuzz/corpus/s3_xml/crash-key-with-nul: the key was cut at the NUL, to "" */
TEST(xml_list_skips_keys_holding_a_nul)
{
	static const char xml[] = "<ListBucketResult><Contents><Key>\0\0other/x</Key><Size>1</Size>"
				  "</Contents><Contents><Key>pre/a\0/../../x</Key></Contents>"
				  "<Contents><Key>pre/b</Key></Contents></ListBucketResult>";
	struct s3_xml_list l = { 0 };
	s3_xml_parse_list(xml, sizeof(xml) - 1, "", &l);
	CHECK_INT(l.n, 1);
	CHECK_STR(l.obj[0].key, "pre/b");
	s3_xml_list_release(&l);
	s3_xml_parse_list(xml, sizeof(xml) - 1, "pre/", &l);
	CHECK_INT(l.n, 1);
	CHECK_STR(l.obj[0].key, "b");
	s3_xml_list_release(&l);
}

/* tests/fuzz/corpus/s3_xml/crash-empty-token: a NUL made the token "", and the listing start over */
TEST(xml_list_token_holding_a_nul_ends)
{
	static const char xml[] = "<ListBucketResult><IsTruncated>true</IsTruncated>"
				  "<NextContinuationToken>\0t/1</NextContinuationToken></ListBucketResult>";
	struct s3_xml_list l = { 0 };
	s3_xml_parse_list(xml, sizeof(xml) - 1, "", &l);
	CHECK(!l.truncated);
	CHECK(l.next_token == NULL);
	s3_xml_list_release(&l);
}

TEST(xml_broken_answers_are_read_as_far_as_they_go)
{
	const char *cases[] = {
		"", "<", "<Contents>", "<Contents><Key>k</Key>", "<Contents><Key>k</Contents>",
		"<Contents><Key>&#", "<Contents><Key>&#x110000;</Key></Contents>",
		"<Contents><Key>&#xzz;&amp</Key></Contents>", "<Error><Code>",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len;
		char *b = unterminated(cases[i], &len);
		struct s3_xml_list l = { 0 };
		s3_xml_parse_list(b, len, "", &l);
		CHECK(!l.truncated);
		s3_xml_list_release(&l);
		char *code, *msg;
		s3_xml_parse_error(b, len, &code, &msg);
		free(code);
		free(msg);
		free(s3_xml_upload_id(b, len));
		free(b);
	}
	struct s3_xml_list l = { 0 };
	const char *xml = "<Contents><Key>&#xzz;&amp</Key></Contents>";
	s3_xml_parse_list(xml, strlen(xml), "", &l);
	CHECK_INT(l.n, 1);
	CHECK_STR(l.obj[0].key, "&#xzz;&amp");
	s3_xml_list_release(&l);
}

TEST(xml_errors_and_upload_ids)
{
	const char *e = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code>"
			"<Message>The key &lt;k&gt; does not exist</Message></Error>";
	char *code, *msg;
	CHECK(s3_xml_parse_error(e, strlen(e), &code, &msg));
	CHECK_STR(code, "NoSuchKey");
	CHECK_STR(msg, "The key <k> does not exist");
	free(code);
	free(msg);
	CHECK(s3_xml_is_error(e, strlen(e)));
	CHECK(!s3_xml_parse_error("<Ok/>", 5, &code, &msg));
	CHECK(code == NULL && msg == NULL);
	CHECK(!s3_xml_is_error("", 0));
	const char *init = "<InitiateMultipartUploadResult><UploadId>u-1&amp;2</UploadId>"
			   "</InitiateMultipartUploadResult>";
	char *id = s3_xml_upload_id(init, strlen(init));
	CHECK_STR(id, "u-1&2");
	free(id);
	CHECK(s3_xml_upload_id(init, 20) == NULL);
	CHECK(s3_parse_iso_date("not a date") == 0);
	/* to the nanosecond, as an integer: a double of seconds is ~120 ns off */
	CHECK(s3_parse_iso_date("2026-01-02T03:04:05.123456789Z") == 1767323045123456789LL);
	CHECK(s3_parse_iso_date("2026-01-02T03:04:05Z") == 1767323045000000000LL);
	/* beyond int64_t nanoseconds (fuzz-check found year 1013): unknown, no overflow */
	CHECK(s3_parse_iso_date("1013-01-02T03:04:05.500Z") == 0);
	CHECK(s3_parse_iso_date("9999-01-02T03:04:05Z") == 0);
}

TEST(ini_sections_comments_and_spaces)
{
	const char *text = "key = outside\n"
			   "[s3]\r\n"
			   "  region =  eu-west-1  \r\n"
			   "# region = commented\n"
			   "; endpoint = commented\n"
			   "endpoint=http://h:9000\n"
			   "[ obs ]\n"
			   "region = not-obs\n"
			   "[obs]\n"
			   "\tregion\t= cn-north-4\n"
			   "empty =\n"
			   "last = no newline";
	size_t len;
	char *b = unterminated(text, &len);
	char *v;
	CHECK_STR(v = s3_ini_get(b, len, "s3", "region"), "eu-west-1");
	free(v);
	CHECK_STR(v = s3_ini_get(b, len, "s3", "endpoint"), "http://h:9000");
	free(v);
	CHECK_STR(v = s3_ini_get(b, len, "obs", "region"), "cn-north-4");
	free(v);
	CHECK_STR(v = s3_ini_get(b, len, "obs", "empty"), "");
	free(v);
	CHECK_STR(v = s3_ini_get(b, len, "obs", "last"), "no newline");
	free(v);
	CHECK(s3_ini_get(b, len, "s3", "key") == NULL);
	CHECK(s3_ini_get(b, len, "gcs", "region") == NULL);
	CHECK(s3_ini_get(b, 0, "s3", "region") == NULL);
	free(b);
}
