/* test_core.c -- src/core/: the shared encoders (enc.h), the JSON pieces (json.h), the HTTP policy (http.h), the free port (sock.h). */
#include "test.h"

#include "core/enc.h"
#include "core/http.h"
#include "core/json.h"
#include "core/sock.h"
#include "core/util.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <math.h>
#include <pthread.h>

TEST(url_encode_keeps_unreserved_and_optionally_slash)
{
	struct sbuf sb = SBUF_INIT;
	url_encode(&sb, "a-Z_0.9~/b c&d=é", false);
	CHECK_STR(sb.buf, "a-Z_0.9~%2Fb%20c%26d%3D%C3%A9");
	sbuf_reset(&sb);
	url_encode(&sb, "dir/sub dir/x+y", true);
	CHECK_STR(sb.buf, "dir/sub%20dir/x%2By");
	sbuf_reset(&sb);
	url_encode(&sb, "", true);
	CHECK_STR(sb.buf, "");
	sbuf_release(&sb);
}

TEST(hex_encode_and_digits)
{
	const unsigned char d[] = { 0x00, 0x0f, 0xa5, 0xff };
	char out[2 * sizeof(d) + 1];
	hex_encode(out, d, sizeof(d));
	CHECK_STR(out, "000fa5ff");
	hex_encode(out, d, 0);
	CHECK_STR(out, "");
	CHECK_INT(hex_digit('0'), 0);
	CHECK_INT(hex_digit('9'), 9);
	CHECK_INT(hex_digit('a'), 10);
	CHECK_INT(hex_digit('F'), 15);
	CHECK_INT(hex_digit('g'), -1);
	CHECK_INT(hex_digit('\0'), -1);
}

TEST(utf8_add_every_length)
{
	struct sbuf sb = SBUF_INIT;
	utf8_add(&sb, 'A');
	utf8_add(&sb, 0xe9);     /* é */
	utf8_add(&sb, 0x20ac);   /* € */
	utf8_add(&sb, 0x1f600);  /* 😀 */
	utf8_add(&sb, 0x110000); /* too large: U+FFFD */
	CHECK_STR(sb.buf, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd");
	sbuf_release(&sb);
}

TEST(varint_put_matches_protobuf)
{
	unsigned char b[VARINT_MAX];
	CHECK_INT(varint_put(b, 0), 1);
	CHECK_INT(b[0], 0);
	CHECK_INT(varint_put(b, 127), 1);
	CHECK_INT(b[0], 127);
	CHECK_INT(varint_put(b, 300), 2); /* the protobuf docs' example: ac 02 */
	CHECK_INT(b[0], 0xac);
	CHECK_INT(b[1], 0x02);
	CHECK_INT(varint_put(b, UINT64_MAX), 10);
	for (int i = 0; i < 9; i++)
		CHECK_INT(b[i], 0xff);
	CHECK_INT(b[9], 0x01);
}

static void check_json(const char *in, const char *want)
{
	struct sbuf sb = SBUF_INIT;
	json_add_str(&sb, in);
	CHECK_STR(sb.buf, want);
	/* whatever went in, jansson reads back valid JSON */
	json_error_t e;
	json_t *v = json_loads(sb.buf, JSON_DECODE_ANY, &e);
	CHECK(v != NULL);
	json_decref(v);
	sbuf_release(&sb);
}

TEST(json_add_str_escapes)
{
	check_json(NULL, "null");
	check_json("", "\"\"");
	check_json("plain", "\"plain\"");
	check_json("a \"quoted\" \\ path", "\"a \\\"quoted\\\" \\\\ path\"");
	check_json("\n\t\r\x01\x1f", "\"\\n\\t\\r\\u0001\\u001f\"");
	check_json("é € 😀", "\"é € 😀\"");
	/* not UTF-8: a lone continuation byte, a cut sequence, an overlong '/', a surrogate */
	check_json("a\x80z", "\"a\\ufffdz\"");
	check_json("\xe2\x82", "\"\\ufffd\\ufffd\"");
	check_json("\xc0\xaf", "\"\\ufffd\\ufffd\"");
	check_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
}

TEST(json_real_or_null_has_no_nan)
{
	json_t *v = json_real_or_null(1.5);
	CHECK(json_is_real(v) && json_real_value(v) == 1.5);
	json_decref(v);
	CHECK(json_is_null(json_real_or_null(NAN)));
	CHECK(json_is_null(json_real_or_null(INFINITY)));
	CHECK(json_is_null(json_real_or_null(-INFINITY)));
}

TEST(http_backoff_doubles_to_the_ceiling)
{
	const struct http_backoff plain = { 500, 3000, false };
	CHECK_INT(http_backoff_ms(&plain, 1), 500);
	CHECK_INT(http_backoff_ms(&plain, 2), 1000);
	CHECK_INT(http_backoff_ms(&plain, 3), 2000);
	CHECK_INT(http_backoff_ms(&plain, 4), 3000);
	CHECK_INT(http_backoff_ms(&plain, 100), 3000);
	const struct http_backoff jit = { 100, 5000, true };
	for (int a = 1; a <= 12; a++) {
		int full = a >= 7 ? 5000 : 100 << (a - 1);
		int ms = http_backoff_ms(&jit, a);
		CHECK(ms >= full / 2 && ms <= full);
	}
}

TEST(http_transient_failures)
{
	CHECK(http_retryable_status(500));
	CHECK(http_retryable_status(503));
	CHECK(http_retryable_status(429));
	CHECK(http_retryable_status(408));
	CHECK(!http_retryable_status(400));
	CHECK(!http_retryable_status(404));
	CHECK(!http_retryable_status(301));
	CHECK(http_retryable_curl(CURLE_COULDNT_CONNECT));
	CHECK(http_retryable_curl(CURLE_OPERATION_TIMEDOUT));
	CHECK(!http_retryable_curl(CURLE_URL_MALFORMAT));
	CHECK(!http_retryable_curl(CURLE_UNSUPPORTED_PROTOCOL));
}

static void *init_thread(void *arg)
{
	struct tc_err err = TC_ERR_INIT;
	*(int *)arg = http_init(&err);
	tc_err_release(&err);
	return NULL;
}

TEST(http_init_once_from_many_threads)
{
	pthread_t t[8];
	int rc[8];
	for (int i = 0; i < 8; i++)
		CHECK(pthread_create(&t[i], NULL, init_thread, &rc[i]) == 0);
	for (int i = 0; i < 8; i++) {
		CHECK(pthread_join(t[i], NULL) == 0);
		CHECK_INT(rc[i], 0);
	}
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(http_init(&err), 0);
	CURL *h = curl_easy_init();
	CHECK(h != NULL);
	curl_easy_cleanup(h);
}

TEST(path_self_exe_names_this_binary)
{
	char *exe = path_self_exe();
	CHECK(exe != NULL && exe[0] == '/');
	CHECK(!strcmp(path_basename(exe), "test_core"));
	free(exe);
}

TEST(json_string_or_null_has_no_null_pointers)
{
	json_t *v = json_string_or_null("x");
	CHECK(json_is_string(v) && !strcmp(json_string_value(v), "x"));
	json_decref(v);
	CHECK(json_is_null(json_string_or_null(NULL)));
}

/* json_dumps_shortest: jansson's text for every tree without reals, in each
 * layout; reals in the shortest form that reads back (issue 16, 3.14: the
 * float noise of metrics --format json, stored specs and Ais-Bench files). */
TEST(json_dumps_shortest_is_jansson_but_reals)
{
	const char *src = "{\"a\": 1, \"b\": [true, false, null, \"x\\\"y\\n\"], \"c\": {},"
			  " \"d\": [], \"e\": {\"f\": [1, [2, {}]], \"g\": -7}, \"z\": \"caf\\u00e9\"}";
	json_t *t = json_loads(src, 0, NULL);
	CHECK(t != NULL);
	const size_t layouts[] = { JSON_INDENT(2) | JSON_PRESERVE_ORDER, JSON_COMPACT, 0,
				   JSON_INDENT(4) | JSON_COMPACT };
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		char *want = json_dumps(t, layouts[i]);
		char *got = json_dumps_shortest(t, layouts[i]);
		CHECK_STR(got, want);
		free(want);
		free(got);
	}
	json_decref(t);
	t = json_pack("{s:f, s:f, s:f, s:f, s:f, s:[f]}", "lr", 0.05, "sum", 0.1 + 0.2, "one", 1.0,
		      "big", 1e300, "tiny", 5e-324, "v", 1606.1);
	char *got = json_dumps_shortest(t, JSON_COMPACT);
	CHECK_STR(got, "{\"lr\":0.05,\"sum\":0.30000000000000004,\"one\":1.0,\"big\":1e+300,"
		       "\"tiny\":4.94065645841247e-324,\"v\":[1606.1]}");
	json_t *back = json_loads(got, 0, NULL);
	CHECK(back && json_equal(back, t)); /* the same values, reals still reals */
	json_decref(back);
	free(got);
	json_decref(t);
	struct sbuf sb = SBUF_INIT;
	json_add_number(&sb, 0.05);
	sbuf_addch(&sb, ' ');
	json_add_number(&sb, NAN);
	sbuf_addch(&sb, ' ');
	json_add_number(&sb, 2.0);
	CHECK_STR(sb.buf, "0.05 null 2");
	sbuf_release(&sb);
	char b[40];
	fmt_shortest(b, sizeof(b), 61.2);
	CHECK_STR(b, "61.2");
}

TEST(free_port_is_free_until_a_listener_takes_it)
{
	int port = sock_free_port(0, false);
	CHECK(port > 0 && port < 65536);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 1) == 0);
	CHECK_INT(sock_free_port(port, false), -1);
	CHECK_INT(sock_free_port(port, true), -1); /* every address includes 127.0.0.1 */
	close(fd);
	CHECK_INT(sock_free_port(port, false), port);
	CHECK_INT(sock_free_port(port, true), port);
}
