/* test_metrics.c -- golden tests for src/metrics: parsers, summary, downsampling. */
#include "test.h"

#include "core/sbuf.h"
#include "core/xalloc.h"
#include "metrics/metrics.h"

#include <math.h>
#include <stdint.h>
#include <time.h>

static struct metrics_parser *P;
static const struct metric_rec *R;
static size_t N;

static int parse(const char *line)
{
	if (!P)
		P = metrics_parser_new();
	return metrics_parse_line(P, line, strlen(line), &R, &N);
}

static const struct metric_rec *rec(const char *name)
{
	for (size_t i = 0; i < N; i++)
		if (!strcmp(R[i].name, name))
			return &R[i];
	fprintf(stderr, "no record named %s among %zu\n", name, N);
	exit(1);
}

static const struct metric_rec *meta(const char *key)
{
	for (size_t i = 0; i < N; i++)
		if (R[i].key && !strcmp(R[i].key, key))
			return &R[i];
	fprintf(stderr, "no metadata key %s\n", key);
	exit(1);
}

#define CHECK_NEAR(a, b) CHECK(fabs((double)(a) - (double)(b)) < 1e-6)

static void num_is(const char *name, double v)
{
	const struct metric_rec *r = rec(name);
	CHECK(r->has_value);
	CHECK(r->str == NULL);
	if (isnan(v))
		CHECK(isnan(r->value));
	else if (isinf(v))
		CHECK(isinf(r->value) && (r->value > 0) == (v > 0));
	else
		CHECK_NEAR(r->value, v);
}

static void str_is(const char *name, const char *s)
{
	const struct metric_rec *r = rec(name);
	CHECK(!r->has_value);
	CHECK(isnan(r->value));
	CHECK_STR(r->str, s);
}

static void utc(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
}

/* ---- DLLogger JSON (DLLL) ------------------------------------------------ */

TEST(dlll_metadata)
{
	CHECK_INT(parse("DLLL {\"timestamp\": \"1700000000.123\", \"datetime\": \"2023-11-14 "
			"22:13:20.123456+00:00\", \"elapsedtime\": \"0.52\", \"type\": \"METADATA\", "
			"\"metric\": \"train.loss\", \"metadata\": {\"unit\": \"\", \"GOAL\": "
			"\"MINIMIZE\", \"STAGE\": \"TRAIN\", \"format\": \":.4f\"}}\n"),
		  METRICS_PARSED);
	CHECK_INT(N, 4);
	for (size_t i = 0; i < N; i++) {
		CHECK_INT(R[i].kind, METRICS_METADATA);
		CHECK_INT(R[i].format, METRICS_FMT_DLLL);
		CHECK_STR(R[i].name, "train.loss");
		CHECK_NEAR(R[i].wall_time, 1700000000.123);
		CHECK_NEAR(R[i].elapsed, 0.52);
		CHECK_INT(R[i].rank, -1);
	}
	CHECK_STR(meta("GOAL")->str, "MINIMIZE");
	CHECK_STR(meta("STAGE")->str, "TRAIN");
	CHECK_STR(meta("format")->str, ":.4f");
	CHECK_STR(meta("unit")->str, "");
	CHECK_STR(metrics_kind_name(R[0].kind), "metadata");
}

TEST(dlll_parameter)
{
	CHECK_INT(parse("DLLL {\"timestamp\": \"1700000001.5\", \"datetime\": \"2023-11-14 "
			"22:13:21.5\", \"elapsedtime\": \"1.9\", \"type\": \"LOG\", \"step\": "
			"\"PARAMETER\", \"data\": {\"lr\": 0.1, \"batch_size\": 64, \"model\": "
			"\"resnet50\", \"amp\": true, \"ckpt\": null, \"betas\": [0.9, 0.999]}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 5); /* null is dropped */
	CHECK_INT(R[0].kind, METRICS_PARAMETER);
	CHECK_STR(R[0].step, "PARAMETER");
	CHECK_INT(R[0].epoch, -1);
	CHECK_INT(R[0].iter, -1);
	CHECK(R[0].key == NULL);
	num_is("lr", 0.1);
	num_is("batch_size", 64);
	str_is("model", "resnet50");
	num_is("amp", 1);
	str_is("betas", "[0.9, 0.999]"); /* as written */
	/* records keep the line's key order */
	CHECK_STR(R[0].name, "lr");
	CHECK_STR(R[4].name, "betas");
}

TEST(dlll_step_forms)
{
	CHECK_INT(parse("DLLL {\"timestamp\": \"1700000002.0\", \"datetime\": \"x\", "
			"\"elapsedtime\": \"2.4\", \"type\": \"LOG\", \"step\": [0, 10], \"data\": "
			"{\"train.loss\": 2.31, \"train.ips\": 512.3}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 2);
	CHECK_INT(R[0].kind, METRICS_POINT);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, 10);
	CHECK_STR(R[0].step, "[0, 10]");
	CHECK_NEAR(R[1].wall_time, 1700000002.0);
	CHECK_NEAR(R[1].elapsed, 2.4);
	num_is("train.loss", 2.31);
	num_is("train.ips", 512.3);
	CHECK(R[0].unit == NULL);

	CHECK_INT(parse("DLLL {\"timestamp\": \"1700000100.0\", \"datetime\": \"x\", "
			"\"elapsedtime\": \"100.4\", \"type\": \"LOG\", \"step\": [0], \"data\": "
			"{\"val.accuracy\": 0.91}}"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_EPOCH);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, -1);
	CHECK_STR(R[0].step, "[0]");

	CHECK_INT(parse("DLLL {\"timestamp\": \"1700000200.0\", \"datetime\": \"x\", "
			"\"elapsedtime\": \"200.4\", \"type\": \"LOG\", \"step\": [], \"data\": "
			"{\"train.ips\": 498.0}}"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_SUMMARY);
	CHECK_STR(R[0].step, "[]");
	CHECK_INT(R[0].epoch, -1);

	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [2, 300, 7], \"data\": {\"val.loss\": 1}}"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_POINT);
	CHECK_INT(R[0].epoch, 2);
	CHECK_INT(R[0].iter, 300);
	CHECK_STR(R[0].step, "[2, 300, 7]");
	CHECK(isnan(R[0].wall_time)); /* no timestamp: the caller's clock */

	/* a plain integer step is an iteration */
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": 42, \"data\": {\"loss\": 1}}"),
		  METRICS_PARSED);
	CHECK_INT(R[0].iter, 42);
	CHECK_INT(R[0].epoch, -1);
	CHECK_STR(R[0].step, "42");
}

TEST(dlll_nan_inf)
{
	/* Python's json.dumps of float('nan') / float('inf') */
	CHECK_INT(parse("DLLL {\"timestamp\": \"1700000003.0\", \"type\": \"LOG\", \"step\": "
			"[0, 11], \"data\": {\"train.loss\": NaN, \"grad\": Infinity, \"m\": "
			"-Infinity, \"note\": \"NaN Infinity\", \"NaN\": 1}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 5);
	num_is("train.loss", NAN);
	num_is("grad", INFINITY);
	num_is("m", -INFINITY);
	str_is("note", "NaN Infinity"); /* inside a string: untouched */
	num_is("NaN", 1);
	CHECK_NEAR(R[0].wall_time, 1700000003.0);
	/* strings that are numbers count as numbers, nan/inf included */
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 12], \"data\": {\"a\": \"0.5\", "
			"\"b\": \"nan\", \"c\": \"-inf\", \"d\": \" 1e-05 \", \"e\": \"0x10\", \"f\": "
			"\"1.5.2\"}}"),
		  METRICS_PARSED);
	num_is("a", 0.5);
	num_is("b", NAN);
	num_is("c", -INFINITY);
	num_is("d", 1e-05);
	str_is("e", "0x10");
	str_is("f", "1.5.2");
}

TEST(dlll_empty_and_duplicates)
{
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": {}}"), METRICS_PARSED);
	CHECK_INT(N, 0);
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": null}"), METRICS_PARSED);
	CHECK_INT(N, 0);
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 1]}"), METRICS_PARSED);
	CHECK_INT(N, 0);
	/* a duplicate key: a record each, in order (the last is the final value) */
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"a\": 1, \"a\": 2}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 2);
	CHECK(R[0].value == 1 && R[1].value == 2);
	/* the same step twice: each line stands alone */
	for (int k = 0; k < 2; k++) {
		CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"a\": 3}}"),
			  METRICS_PARSED);
		CHECK_INT(N, 1);
		num_is("a", 3);
	}
	/* other record types carry nothing */
	CHECK_INT(parse("DLLL {\"type\": \"INFO\", \"data\": {\"a\": 1}}"), METRICS_PARSED);
	CHECK_INT(N, 0);
}

TEST(dlll_rank)
{
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 5], \"data\": {\"loss\": 1.5, "
			"\"rank\": 3}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 1);
	CHECK_INT(R[0].rank, 3);
}

TEST(dlll_malformed)
{
	static const char *const bad[] = {
		"DLLL {\"type\": \"LOG\", \"step\": [0, 10], \"data\": {\"train.loss\": 2.3",
		"DLLL not json",
		"DLLL [1, 2]",
		"DLLL {\"step\": [0, 1], \"data\": {}}",
		"DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": 5}",
		"DLLL {\"type\": \"METADATA\", \"metadata\": {\"unit\": \"s\"}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": NaNx}}",
		"DLLL ",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": \"\\q\"}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": \"\\u12\"}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": \"tab\there\"}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": 1}} trailing",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": 01.}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": tru}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": [1, 2}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\" 1}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": 1,}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": 1}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": \"x}}",
		"DLLL {\"type\": \"LOG\", \"data\": {\"a\": \"x\\",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i]) != METRICS_MALFORMED) {
			fprintf(stderr, "not malformed: %s\n", bad[i]);
			exit(1);
		}
		CHECK_INT(N, 0);
		CHECK(strlen(metrics_parser_reason(P)) > 0);
	}
	/* the parser is fine afterwards */
	CHECK_INT(parse("DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"a\": 1}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 1);
}

TEST(not_metrics_lines)
{
	static const char *const lines[] = {
		"", "\n", "hello world", "DLLX {}", "DLL", "TCAPPDL x", "Epoch 1 loss 2.3",
		"{'a': 1}", "{ Epoch: 1", "dlll {\"type\": \"LOG\"}", " DLLL {}",
		"INFO {\"local_rank\": 0, \"type\": \"INFO\", \"data\": {}}",
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (parse(lines[i]) != METRICS_NONE) {
			fprintf(stderr, "taken as metrics: %s\n", lines[i]);
			exit(1);
		}
		CHECK_INT(N, 0);
	}
	/* lengths are honoured: the prefix must be inside len */
	const struct metric_rec *r;
	size_t n;
	CHECK_INT(metrics_parse_line(P, "DLLL {}", 3, &r, &n), METRICS_NONE);
}

TEST(huge_lines)
{
	/* a 2 MiB data string, whole and cut at 1 MiB */
	size_t big = 2u << 20;
	char *line = xmalloc(big + 200);
	const char *head = "DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"loss\": 1.25, \"blob\": \"";
	size_t hl = strlen(head);
	memcpy(line, head, hl);
	memset(line + hl, 'x', big);
	memcpy(line + hl + big, "\"}}", 4);
	size_t len = strlen(line);
	const struct metric_rec *r;
	size_t n;
	struct metrics_parser *p = metrics_parser_new();
	CHECK_INT(metrics_parse_line(p, line, len, &r, &n), METRICS_PARSED);
	CHECK_INT(n, 2);
	CHECK_INT(strlen(r[1].str), big);
	CHECK_INT(metrics_parse_line(p, line, 1u << 20, &r, &n), METRICS_MALFORMED);

	/* a long line of braces that is not MindFormers' */
	memset(line, '{', big);
	CHECK_INT(metrics_parse_line(p, line, big, &r, &n), METRICS_NONE);
	/* MindFormers' marker followed by junk, and cut short */
	memcpy(line + 100, "{ Epoch:[  1/  2], step:[    5/  100], loss: 2.5, x: ", 53);
	CHECK_INT(metrics_parse_line(p, line, big, &r, &n), METRICS_PARSED);
	CHECK_INT(metrics_parse_line(p, line, 120, &r, &n), METRICS_MALFORMED);
	/* tcap plain form with a huge value */
	memcpy(line, "TCAPPDLL 2024-06-05 02:46:48.123 - Epoch: 0 Iteration: 1  a : ", 62);
	memset(line + 62, 'y', big - 62);
	CHECK_INT(metrics_parse_line(p, line, big, &r, &n), METRICS_PARSED);
	CHECK_INT(n, 1);
	CHECK_INT(strlen(r[0].str), big - 62);
	/* NUL bytes inside a line */
	static const char nul[] = "DLLL {\"type\": \"LOG\", \"data\": {\"a\0\": 1}}";
	CHECK_INT(metrics_parse_line(p, nul, sizeof(nul) - 1, &r, &n), METRICS_MALFORMED);
	/* deep nesting is refused, not recursed into */
	size_t hl2 = strlen("DLLL {\"type\": \"LOG\", \"data\": {\"a\": ");
	memcpy(line, "DLLL {\"type\": \"LOG\", \"data\": {\"a\": ", hl2);
	memset(line + hl2, '[', big - hl2);
	CHECK_INT(metrics_parse_line(p, line, big, &r, &n), METRICS_MALFORMED);
	CHECK_STR(metrics_parser_reason(p), "JSON nested too deep");
	/* a number of 300 digits */
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, "DLLL {\"type\": \"LOG\", \"data\": {\"a\": 1");
	for (int i = 0; i < 300; i++)
		sbuf_addch(&sb, '0');
	sbuf_adds(&sb, ", \"b\": [[[1]], {\"c\": \"\\ud83d\\ude00\"}]}}");
	CHECK_INT(metrics_parse_line(p, sb.buf, sb.len, &r, &n), METRICS_PARSED);
	CHECK_INT(n, 2);
	CHECK(r[0].value == 1e300);
	CHECK_STR(r[1].str, "[[[1]], {\"c\": \"\\ud83d\\ude00\"}]");
	sbuf_release(&sb);
	/* escapes decode, surrogate pairs included */
	static const char esc[] = "DLLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": {\"na\\u00efve\\n\": \"\\ud83d\\ude00 \\\"q\\\" \\/\"}}";
	CHECK_INT(metrics_parse_line(p, esc, sizeof(esc) - 1, &r, &n), METRICS_PARSED);
	CHECK_STR(r[0].name, "na\xc3\xafve\n");
	CHECK_STR(r[0].str, "\xf0\x9f\x98\x80 \"q\" /");
	metrics_parser_free(p);
	metrics_parser_free(NULL);
	free(line);
}

/* ---- DLLogger stdout (DLL) ----------------------------------------------- */

TEST(dll_stdout_tuple_step)
{
	utc();
	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - (0, 10) train.loss : 2.3100  "
			"train.ips : 512.30 images/s"),
		  METRICS_PARSED);
	CHECK_INT(N, 2);
	CHECK_INT(R[0].format, METRICS_FMT_DLL);
	CHECK_INT(R[0].kind, METRICS_POINT);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, 10);
	CHECK_STR(R[0].step, "(0, 10)");
	CHECK_NEAR(R[0].wall_time, 1700000000.123456);
	num_is("train.loss", 2.31);
	CHECK(rec("train.loss")->unit == NULL);
	num_is("train.ips", 512.3);
	CHECK_STR(rec("train.ips")->unit, "images/s");
}

TEST(dll_stdout_step_formats)
{
	utc();
	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - Epoch: 0 Iteration: 10  train.loss : "
			"2.31  train.ips : 512.3 images/s"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_POINT);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, 10);
	CHECK_STR(R[0].step, "Epoch: 0 Iteration: 10");
	CHECK_INT(N, 2);

	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - Epoch: 1  val.accuracy : 0.91 "),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_EPOCH);
	CHECK_INT(R[0].epoch, 1);
	num_is("val.accuracy", 0.91);

	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - Summary: train.ips : 498.0 images/s"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_SUMMARY);
	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - () train.ips : 498.0 images/s"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_SUMMARY);
	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - (3,) val.top1 : 76.5 %"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_EPOCH);
	CHECK_INT(R[0].epoch, 3);
	CHECK_STR(rec("val.top1")->unit, "%");

	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - Epoch: 0 Iteration: 10 Validation "
			"Iteration: 3  val.loss : 2.0 "),
		  METRICS_PARSED);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, 10);

	/* no time (prefix_format "DLL - "), swapped keywords */
	CHECK_INT(parse("DLL - Training Iteration: 30 Training Epoch: 2 loss : 1.5 "),
		  METRICS_PARSED);
	CHECK_INT(R[0].epoch, 2);
	CHECK_INT(R[0].iter, 30);
	CHECK(isnan(R[0].wall_time));

	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - PARAMETER lr : 0.1  model : resnet 50 "
			" amp : True  ckpt : None "),
		  METRICS_PARSED);
	CHECK_INT(N, 3);
	CHECK_INT(R[0].kind, METRICS_PARAMETER);
	num_is("lr", 0.1);
	str_is("model", "resnet 50");
	num_is("amp", 1);

	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - [4, 40] loss : nan  ips : inf img/s"),
		  METRICS_PARSED);
	CHECK_INT(R[0].epoch, 4);
	CHECK_INT(R[0].iter, 40);
	num_is("loss", NAN);
	num_is("ips", INFINITY);

	/* empty data: only a step */
	CHECK_INT(parse("DLL 2023-11-14 22:13:20.123456 - (0, 1) "), METRICS_PARSED);
	CHECK_INT(N, 0);
	CHECK_INT(parse("DLL garbage without separator"), METRICS_MALFORMED);
}

/* ---- tcap_dllogger ---------------------------------------------------------- */

TEST(tcap_json)
{
	CHECK_INT(parse("TCAPPDLL {\"timestamp\": \"1717550000.1\", \"datetime\": \"2024-06-05 "
			"02:46:48.1\", \"elapsedtime\": \"3.2\", \"type\": \"LOG\", \"step\": [0, 20], "
			"\"data\": \"{'rank': '0', 'train.loss': '2.301', 'train.ips': '512.0'}\"}"),
		  METRICS_PARSED);
	CHECK_INT(N, 2);
	CHECK_INT(R[0].format, METRICS_FMT_TCAP_JSON);
	CHECK_INT(R[0].rank, 0);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, 20);
	CHECK_NEAR(R[0].wall_time, 1717550000.1);
	num_is("train.loss", 2.301);
	num_is("train.ips", 512.0);
	CHECK_STR(R[0].name, "train.loss");
}

TEST(tcap_json_python_repr)
{
	/* written by tcap_dllogger itself (str(dict) inside json.dumps) */
	CHECK_INT(parse("TCAPPDLL {\"timestamp\": \"1717550000.1\", \"datetime\": \"2024-06-05 "
			"02:46:48.1\", \"elapsedtime\": \"3.2\", \"type\": \"LOG\", \"step\": [1, 30], "
			"\"data\": \"{'rank': '1', 'train.loss': \\\"tensor(2.3010, device='sdaa:0')\\\", "
			"'QA.loss': 'nan', 'QA.speed': 'inf', 'name': \\\"it's\\\", 'q': 'a\\\"b', "
			"'u': '\\u00e9\\\\n\\\\\\\\', 'none': 'None', 'flag': 'True'}\"}"),
		  METRICS_PARSED);
	CHECK_INT(R[0].rank, 1);
	CHECK_INT(N, 7);
	num_is("train.loss", 2.301);
	num_is("QA.loss", NAN);
	num_is("QA.speed", INFINITY);
	str_is("name", "it's");
	str_is("q", "a\"b");
	str_is("u", "\xc3\xa9\n\\");
	num_is("flag", 1);

	/* escapes, unquoted values, nested values, an empty dict */
	CHECK_INT(parse("TCAPPDLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'a\\\\x41': "
			"'\\\\u4e2d', 'n': 3, 'l': [1, 2], 'o': None, 't': (1, 'x,y'), 'd': {'k': 1}}\"}"),
		  METRICS_PARSED);
	str_is("aA", "\xe4\xb8\xad");
	num_is("n", 3);
	str_is("l", "[1, 2]");
	str_is("t", "(1, 'x,y')");
	str_is("d", "{'k': 1}");
	CHECK_INT(N, 5);
	CHECK_INT(parse("TCAPPDLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{}\"}"),
		  METRICS_PARSED);
	CHECK_INT(N, 0);

	CHECK_INT(parse("TCAPPDLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'a': '1'\"}"),
		  METRICS_MALFORMED);
	CHECK_INT(parse("TCAPPDLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'a: '1'}\"}"),
		  METRICS_MALFORMED);
	CHECK_INT(parse("TCAPPDLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": \"[1]\"}"),
		  METRICS_MALFORMED);
	CHECK_INT(parse("TCAPPDLL {\"type\": \"LOG\", \"step\": [0, 1], \"data\": \"{'a': '\\\\x4'}\"}"),
		  METRICS_MALFORMED);
}

TEST(tcap_json_metadata_and_parameter)
{
	CHECK_INT(parse("TCAPPDLL {\"timestamp\": \"1717550000.0\", \"elapsedtime\": \"0.1\", "
			"\"datetime\": \"2024-06-05 02:46:40\", \"type\": \"METADATA\", \"metric\": "
			"\"train.ips\", \"metadata\": {\"unit\": \"imgs/s\", \"GOAL\": \"MAXIMIZE\"}}"),
		  METRICS_PARSED);
	CHECK_INT(N, 2);
	CHECK_INT(R[0].kind, METRICS_METADATA);
	CHECK_STR(meta("unit")->str, "imgs/s");
	CHECK_STR(meta("GOAL")->str, "MAXIMIZE");

	CHECK_INT(parse("TCAPPDLL {\"timestamp\": \"1717550000.0\", \"type\": \"LOG\", \"step\": "
			"\"PARAMETER\", \"data\": \"{'batch_size': '64', 'lr': '0.1', 'device': 'sdaa'}\"}"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_PARAMETER);
	num_is("batch_size", 64);
	str_is("device", "sdaa");
}

TEST(tcap_plain)
{
	utc();
	CHECK_INT(parse("TCAPPDLL 2024-06-05 02:46:48.123 - Epoch: 0 Iteration: 20  rank : 0  "
			"train.loss : 2.301  train.ips : 512.0 imgs/s"),
		  METRICS_PARSED);
	CHECK_INT(N, 2);
	CHECK_INT(R[0].format, METRICS_FMT_TCAP_PLAIN);
	CHECK_INT(R[0].rank, 0);
	CHECK_INT(R[0].epoch, 0);
	CHECK_INT(R[0].iter, 20);
	CHECK_STR(R[0].step, "Epoch: 0 Iteration: 20");
	CHECK_NEAR(R[0].wall_time, 1717555608.123);
	num_is("train.loss", 2.301);
	num_is("train.ips", 512.0);
	CHECK_STR(rec("train.ips")->unit, "imgs/s");

	CHECK_INT(parse("TCAPPDLL 2024-06-05 02:46:49.5 - Epoch: 0 Iteration: 21  rank : 2  "
			"QA.loss : 2.2  QA.speed : 500.5 "),
		  METRICS_PARSED);
	CHECK_INT(R[0].rank, 2);
	num_is("QA.loss", 2.2);
	num_is("QA.speed", 500.5);

	/* format_step([]) prints nothing: a summary */
	CHECK_INT(parse("TCAPPDLL 2024-06-05 02:50:00.0 -  rank : 0  train.ips : 505.0 imgs/s"),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_SUMMARY);
	CHECK_INT(parse("TCAPPDLL 2024-06-05 02:46:40.0 - PARAMETER batch_size : 64  "
			"dataset_path : /data/imagenet "),
		  METRICS_PARSED);
	CHECK_INT(R[0].kind, METRICS_PARAMETER);
	str_is("dataset_path", "/data/imagenet");
}

/* ---- MindFormers ---------------------------------------------------------- */

TEST(mindformers_bare)
{
	CHECK_INT(parse("{ Epoch:[  1/  2], step:[    5/  100], loss: 2.345, per_step_time: "
			"120ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0"),
		  METRICS_PARSED);
	CHECK_INT(R[0].format, METRICS_FMT_MINDFORMERS);
	CHECK_INT(R[0].kind, METRICS_POINT);
	CHECK_INT(R[0].epoch, 1);
	CHECK_INT(R[0].iter, 5);
	CHECK_INT(R[0].rank, -1);
	CHECK_STR(R[0].step, "1/2 5/100");
	CHECK(isnan(R[0].wall_time));
	CHECK_INT(N, 5);
	num_is("loss", 2.345);
	num_is("per_step_time", 120);
	CHECK_STR(rec("per_step_time")->unit, "ms");
	num_is("lr", 1e-05);
	num_is("overflow_cond", 0);
	num_is("loss_scale", 1.0);
}

TEST(mindformers_logger_prefix)
{
	utc();
	CHECK_INT(parse("2024-06-05 10:00:00,123 - mindformers[mindformers/core/callback/"
			"callback.py:345] - INFO - { Epoch:[  1/  2], step:[   10/  100], "
			"loss:[2.345/2.400], per_step_time: 118ms, lr: 1e-05, overflow cond: False, "
			"loss_scale: 1.0, global_norm: [1.234], train_throughput_per_npu: 123.456T\n"),
		  METRICS_PARSED);
	CHECK_NEAR(R[0].wall_time, 1717581600.123);
	CHECK_INT(R[0].iter, 10);
	num_is("loss", 2.345);
	num_is("loss_mean", 2.4);
	num_is("per_step_time", 118);
	num_is("global_norm", 1.234);
	num_is("train_throughput_per_npu", 123.456);
	CHECK_STR(rec("train_throughput_per_npu")->unit, "T");
	CHECK_INT(N, 8);

	/* NaN loss, a MindSpore Tensor value, a value with commas in brackets */
	CHECK_INT(parse("[INFO] { Epoch:[  2/  2], step:[    1/  100], loss: nan, "
			"global_norm: Tensor(shape=[], dtype=Float32, value= 3.5), per_step_time: 99ms"),
		  METRICS_PARSED);
	num_is("loss", NAN);
	num_is("global_norm", 3.5);
	num_is("per_step_time", 99);
	CHECK_INT(N, 3);

	CHECK_INT(parse("{ Epoch:[ x/ 2], step:[ 5/ 100], loss: 2.3"), METRICS_MALFORMED);
	CHECK_INT(parse("{ Epoch:[  1/  2], loss: 2.3"), METRICS_MALFORMED);
	CHECK_INT(parse("{ Epoch:[  1/  2], step:[  5/"), METRICS_MALFORMED);
	/* only the step: no records */
	CHECK_INT(parse("{ Epoch:[  1/  2], step:[  5/ 100]"), METRICS_PARSED);
	CHECK_INT(N, 0);
}

TEST(parse_number)
{
	double d;
	CHECK(metrics_parse_number(" 1.5 ", 5, &d) && d == 1.5);
	CHECK(metrics_parse_number("-Infinity", 9, &d) && isinf(d) && d < 0);
	CHECK(metrics_parse_number("1e400", 5, &d) && isinf(d));
	CHECK(!metrics_parse_number("", 0, &d));
	CHECK(!metrics_parse_number("1 2", 3, &d));
	CHECK(!metrics_parse_number("12abc", 5, &d));
	CHECK(metrics_parse_number("12abc", 2, &d) && d == 12);
	char longnum[100];
	memset(longnum, '1', sizeof(longnum));
	CHECK(!metrics_parse_number(longnum, sizeof(longnum), &d));
}

/* ---- summary ---------------------------------------------------------------- */

TEST(goals)
{
	CHECK_INT(metrics_goal_of("train.loss", NULL), METRICS_MINIMIZE);
	CHECK_INT(metrics_goal_of("val.accuracy", NULL), METRICS_MAXIMIZE);
	CHECK_INT(metrics_goal_of("val.top1", NULL), METRICS_MAXIMIZE);
	CHECK_INT(metrics_goal_of("train.ips", NULL), METRICS_MAXIMIZE);
	CHECK_INT(metrics_goal_of("QA.speed", NULL), METRICS_MAXIMIZE);
	CHECK_INT(metrics_goal_of("train_throughput_per_npu", NULL), METRICS_MAXIMIZE);
	CHECK_INT(metrics_goal_of("per_step_time", NULL), METRICS_MINIMIZE);
	CHECK_INT(metrics_goal_of("lr", NULL), METRICS_MINIMIZE);
	CHECK_INT(metrics_goal_of("val.loss", "MAXIMIZE"), METRICS_MAXIMIZE);
	CHECK_INT(metrics_goal_of("val.accuracy", "minimize"), METRICS_MINIMIZE);
	CHECK_INT(metrics_goal_of("val.accuracy", "bogus"), METRICS_MAXIMIZE);
	CHECK(metrics_is_ips_name("train.ips"));
	CHECK(metrics_is_ips_name("QA.speed"));
	CHECK(metrics_is_ips_name("ips"));
	CHECK(!metrics_is_ips_name("train.loss"));
	CHECK(!metrics_is_ips_name("lips"));
}

TEST(stat_last_best)
{
	static const double loss[] = { 3.0, 2.5, NAN, 1.2, INFINITY, 1.2, 1.8 };
	struct metrics_stat st;
	metrics_stat_series(&st, METRICS_MINIMIZE, loss, 7);
	CHECK_INT(st.n, 7);
	CHECK_INT(st.n_finite, 5);
	CHECK(st.last == 1.8);
	CHECK(st.best == 1.2);
	CHECK_INT(st.best_index, 3); /* the first of equal bests */
	CHECK(st.min == 1.2 && st.max == 3.0);
	CHECK_NEAR(metrics_stat_mean(&st), (3.0 + 2.5 + 1.2 + 1.2 + 1.8) / 5);

	static const double acc[] = { 0.5, 0.9, 0.7, NAN };
	metrics_stat_series(&st, METRICS_MAXIMIZE, acc, 4);
	CHECK(st.best == 0.9);
	CHECK_INT(st.best_index, 1);
	CHECK(isnan(st.last)); /* last is what was logged last */

	metrics_stat_series(&st, METRICS_MAXIMIZE, NULL, 0);
	CHECK(isnan(st.last) && isnan(st.best) && isnan(metrics_stat_mean(&st)));
	static const double nans[] = { NAN, NAN };
	metrics_stat_series(&st, METRICS_MINIMIZE, nans, 2);
	CHECK(isnan(st.best) && isnan(st.min));
}

TEST(throughput)
{
	/* rank 0: warm-up step is slow */
	static const double ips0[] = { 100, 500, 510, 490, NAN };
	static const double ips1[] = { 90, 480, 520 };
	double r[3];
	r[0] = metrics_tput_from_ips(ips0, 5, 1);
	r[1] = metrics_tput_from_ips(ips1, 3, 1);
	r[2] = metrics_tput_from_ips(ips1, 3, 5); /* all warm-up: unknown */
	CHECK_NEAR(r[0], 500);
	CHECK_NEAR(r[1], 500);
	CHECK(isnan(r[2]));
	CHECK_NEAR(metrics_tput_job(r, 3), 1000);
	CHECK(isnan(metrics_tput_job(r + 2, 1)));

	/* steps end at t = 10, 12, 13, 14, 15; warm-up 1; batch 64:
	 * 4 steps x 64 over 15 - 10 s */
	static const double t[] = { 10, 12, 13, 14, 15 };
	CHECK_NEAR(metrics_tput_from_times(t, 5, 1, 64), 4 * 64 / 5.0);
	CHECK_NEAR(metrics_tput_from_times(t, 5, 0, 64), 4 * 64 / 5.0);
	CHECK_NEAR(metrics_tput_from_times(t, 5, 2, 64), 3 * 64 / 3.0);
	CHECK(isnan(metrics_tput_from_times(t, 1, 1, 64)));
	CHECK(isnan(metrics_tput_from_times(t, 5, 1, 0)));
	static const double same[] = { 5, 5, 5 };
	CHECK(isnan(metrics_tput_from_times(same, 3, 1, 64)));

	static const double ms[] = { 900, 120, 118, 122 };
	CHECK_NEAR(metrics_tput_from_steptime(ms, 4, 1, 32), 32 * 1000 / 120.0);
	CHECK(isnan(metrics_tput_from_steptime(ms, 4, 1, 0)));
}

/* ---- downsampling ------------------------------------------------------------ */

TEST(downsample_spike)
{
	size_t n = 100000, buckets = 50;
	struct metrics_xy *in = xmalloc(n * sizeof(*in));
	for (size_t i = 0; i < n; i++) {
		in[i].x = (double)i;
		in[i].y = 2.0 - (double)i / (double)n; /* slowly falling loss */
	}
	in[31337].y = 1e6;  /* the spike */
	in[77777].y = -5;   /* and a dip */
	struct metrics_xy *out = xmalloc(4 * buckets * sizeof(*out));
	size_t k = metrics_downsample(in, n, buckets, out);
	CHECK(k <= 4 * buckets);
	CHECK(k >= 2 * buckets);
	bool spike = false, dip = false;
	for (size_t i = 0; i < k; i++) {
		if (i)
			CHECK(out[i].x > out[i - 1].x);
		spike |= out[i].x == 31337 && out[i].y == 1e6;
		dip |= out[i].x == 77777 && out[i].y == -5;
	}
	CHECK(spike && dip);
	CHECK(out[0].x == 0 && out[k - 1].x == (double)(n - 1)); /* ends kept */
	free(in);
	free(out);
}

TEST(downsample_edges)
{
	struct metrics_xy out[16];
	CHECK_INT(metrics_downsample(NULL, 0, 4, out), 0);
	struct metrics_xy one[] = { { 1, 2 } };
	CHECK_INT(metrics_downsample(one, 1, 4, out), 1);
	CHECK_INT(metrics_downsample(one, 1, 0, out), 0);
	/* few points pass through; non-finite ones are dropped */
	struct metrics_xy few[] = { { 0, 1 }, { 1, NAN }, { 2, 3 }, { 3, INFINITY }, { 4, 0 } };
	CHECK_INT(metrics_downsample(few, 5, 4, out), 3);
	CHECK(out[0].x == 0 && out[1].x == 2 && out[2].x == 4);
	/* every x equal: one slice */
	struct metrics_xy flat[] = { { 7, 1 }, { 7, 5 }, { 7, -1 }, { 7, 2 }, { 7, 3 } };
	CHECK_INT(metrics_downsample(flat, 5, 3, out), 4);
	CHECK(out[0].y == 1 && out[1].y == 5 && out[2].y == -1 && out[3].y == 3);
	/* unsorted x never writes past 4 x buckets */
	struct metrics_xy *zig = xmalloc(1000 * sizeof(*zig));
	for (int i = 0; i < 1000; i++) {
		zig[i].x = (double)((i * 7919) % 1000);
		zig[i].y = (double)i;
	}
	CHECK(metrics_downsample(zig, 1000, 4, out) <= 16);
	free(zig);
}

/* ---- robustness: every prefix and random damage of real lines ------------- */

static const char *const golden[] = {
	"DLLL {\"timestamp\": \"1700000002.0\", \"datetime\": \"x\", \"elapsedtime\": \"2.4\", "
	"\"type\": \"LOG\", \"step\": [0, 10], \"data\": {\"train.loss\": 2.31, \"s\": \"a\\u00e9\\\"\", "
	"\"n\": NaN, \"l\": [1, {\"k\": -Infinity}]}}",
	"DLLL {\"timestamp\": \"1700000000.123\", \"elapsedtime\": \"0.52\", \"type\": \"METADATA\", "
	"\"metric\": \"train.loss\", \"metadata\": {\"unit\": \"\", \"GOAL\": \"MINIMIZE\"}}",
	"DLL 2023-11-14 22:13:20.123456 - Epoch: 0 Iteration: 10  train.loss : 2.31  train.ips : "
	"512.3 images/s",
	"TCAPPDLL {\"timestamp\": \"1717550000.1\", \"type\": \"LOG\", \"step\": [1, 30], \"data\": "
	"\"{'rank': '1', 'train.loss': \\\"tensor(2.3010, device='sdaa:0')\\\", 'u': '\\\\x41\\\\u00e9', "
	"'t': (1, 'x,y')}\"}",
	"TCAPPDLL 2024-06-05 02:46:48.123 - Epoch: 0 Iteration: 20  rank : 0  train.loss : 2.301  "
	"train.ips : 512.0 imgs/s",
	"2024-06-05 10:00:00,123 - mindformers[x.py:1] - INFO - { Epoch:[  1/  2], step:[   10/  100], "
	"loss:[2.345/2.400], per_step_time: 118ms, global_norm: Tensor(shape=[], value= 3.5)",
};

TEST(every_prefix_and_damage)
{
	struct metrics_parser *p = metrics_parser_new();
	const struct metric_rec *r;
	size_t n;
	unsigned seed = 12345;
	for (size_t g = 0; g < sizeof(golden) / sizeof(golden[0]); g++) {
		size_t len = strlen(golden[g]);
		CHECK_INT(metrics_parse_line(p, golden[g], len, &r, &n), METRICS_PARSED);
		CHECK(n > 0);
		/* every cut: a heap copy of exactly that length, so ASan sees overreads */
		for (size_t cut = 0; cut <= len; cut++) {
			char *c = xmalloc(cut ? cut : 1);
			memcpy(c, golden[g], cut);
			int res = metrics_parse_line(p, c, cut, &r, &n);
			CHECK(res == METRICS_NONE || res == METRICS_PARSED || res == METRICS_MALFORMED);
			for (size_t i = 0; i < n; i++)
				CHECK(r[i].name && r[i].step);
			free(c);
		}
		/* random bytes overwritten, 2000 times */
		for (int k = 0; k < 2000; k++) {
			char *c = xmalloc(len);
			memcpy(c, golden[g], len);
			for (int m = 0; m < 3; m++) {
				seed = seed * 1103515245u + 12345u;
				size_t at = (seed >> 8) % len;
				seed = seed * 1103515245u + 12345u;
				static const char pick[] = "\"'\\{}[]:,. -0123456789eNIaxu\0\n";
				c[at] = pick[(seed >> 8) % (sizeof(pick) - 1)];
			}
			(void)metrics_parse_line(p, c, len, &r, &n); /* only: no crash */
			for (size_t i = 0; i < n; i++)
				CHECK(r[i].name && r[i].step);
			free(c);
		}
	}
	metrics_parser_free(p);
}

/* The plain-decimal fast path of metrics_parse_number gives strtod's bits. */
TEST(numbers_match_strtod)
{
	static const char *const fixed[] = { "0", "-0", "+1.5", "1700000000.123456", "0.1",
					     "9007199254740992", "9007199254740993", "1.",
					     ".5", "123456789012345678901234", "0.0000000000000000000001",
					     "2.3010", "-12.3456789012345" };
	char buf[64];
	unsigned seed = 12345;
	for (int i = 0; i < 200000; i++) {
		const char *s = buf;
		if (i < (int)(sizeof(fixed) / sizeof(fixed[0]))) {
			s = fixed[i];
		} else {
			seed = seed * 1103515245u + 12345u;
			unsigned a = seed >> 8;
			seed = seed * 1103515245u + 12345u;
			int frac = (int)(seed >> 27) % 20;
			snprintf(buf, sizeof(buf), "%s%u.%0*u", (seed & 1) ? "-" : "", a, frac ? frac : 1,
				 (seed >> 4) % 100000);
		}
		double got, want = strtod(s, NULL);
		CHECK(metrics_parse_number(s, strlen(s), &got));
		if (memcmp(&got, &want, sizeof(got))) {
			fprintf(stderr, "'%s': %.17g, strtod %.17g\n", s, got, want);
			CHECK(0);
		}
	}
}

/* Current MindFormers: no Epoch part, closed by " }", "loss: N/A" off the last pipeline stage. */
TEST(mindformers_current)
{
	CHECK_INT(parse("2025-05-15 10:00:00,123 - mindformers[mindformers/core/callback/callback.py:512]"
			" - INFO - { step:[    1/   10], loss:  11.813965, per_step_time:  13570ms, "
			"lr: 1e-05, grad_norm: 3.25, throughput:   1.36T }"),
		  METRICS_PARSED);
	CHECK_INT(R[0].format, METRICS_FMT_MINDFORMERS);
	CHECK_INT(R[0].epoch, -1);
	CHECK_INT(R[0].iter, 1);
	CHECK_STR(R[0].step, "1/10");
	CHECK_INT(N, 5);
	num_is("loss", 11.813965);
	num_is("per_step_time", 13570);
	CHECK_STR(rec("per_step_time")->unit, "ms");
	num_is("throughput", 1.36);
	CHECK_STR(rec("throughput")->unit, "T");
	num_is("grad_norm", 3.25);

	CHECK_INT(parse("{ step:[    2/   10], loss: N/A, per_step_time:  13000ms, throughput:   1.4T }"),
		  METRICS_PARSED);
	CHECK_INT(N, 2); /* no loss record: the stage has none */
	num_is("per_step_time", 13000);
	num_is("throughput", 1.4);
	CHECK_INT(parse("{ step:[ x/ 10], loss: 1.0 }"), METRICS_MALFORMED);
}

/* Two records run together on one line: the second starts at its marker. */
TEST(first_record_len)
{
	const char *a = "TCAPPDLL 2025-05-15 10:00:01.1 - Epoch: 0 Iteration: 1  rank : 0  "
			"train.ips : 100.0 imgs/s";
	const char *b = "TCAPPDLL 2025-05-15 10:00:01.1 - Epoch: 0 Iteration: 1  rank : 3  "
			"train.loss : 2.7";
	struct sbuf l = SBUF_INIT;
	sbuf_addf(&l, "%s%s\n", a, b);
	CHECK_INT(metrics_first_record_len(l.buf, l.len), strlen(a));
	CHECK_INT(metrics_first_record_len(l.buf + strlen(a), l.len - strlen(a)), strlen(b) + 1);
	sbuf_reset(&l);
	sbuf_adds(&l, "DLLL {\"step\": [0, 1], \"data\": {\"a\": 1}}DLLL {\"step\": []}");
	CHECK_INT(metrics_first_record_len(l.buf, l.len), 39);
	sbuf_reset(&l);
	sbuf_adds(&l, "progress 50%DLL 2025-05-15 10:00:01 - 1 loss : 2");
	CHECK_INT(metrics_first_record_len(l.buf, l.len), 12);
	/* a marker word that starts no record: one record */
	sbuf_reset(&l);
	sbuf_adds(&l, "DLL - 1 note : DLL x TCAPPDLL y DLLL z");
	CHECK_INT(metrics_first_record_len(l.buf, l.len), l.len);
	sbuf_release(&l);
}
