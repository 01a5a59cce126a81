/*
 * fuzz_metrics.c -- worker log lines (DLLL, DLL, TCAPPDLL, MindFormers):
 * metrics_parse_line() on the input as one line, then on each of its
 * lines, with the records' promises of metrics.h checked.
 */
#include "fuzz.h"

#include "metrics/metrics.h"

#include <math.h>

static struct metrics_parser *parser;

static void one_line(const char *line, size_t len)
{
	const struct metric_rec *recs;
	size_t n;
	size_t first = metrics_first_record_len(line, len);
	FUZZ_ASSERT(first <= len && (first > 0 || len == 0));
	enum metrics_result r = metrics_parse_line(parser, line, len, &recs, &n);
	FUZZ_ASSERT(r == METRICS_NONE || r == METRICS_PARSED || r == METRICS_MALFORMED);
	if (r != METRICS_PARSED) {
		FUZZ_ASSERT(n == 0);
		if (r == METRICS_MALFORMED)
			fuzz_touch(metrics_parser_reason(parser));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(recs[i].step && recs[i].name);
		fuzz_touch(recs[i].step);
		fuzz_touch(recs[i].name);
		fuzz_touch(recs[i].key);
		fuzz_touch(recs[i].str);
		fuzz_touch(recs[i].unit);
		fuzz_touch(metrics_kind_name(recs[i].kind));
		fuzz_touch(metrics_format_name(recs[i].format));
		FUZZ_ASSERT(recs[i].has_value || isnan(recs[i].value));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!parser)
		parser = metrics_parser_new(); /* kept: a warm parser, as the supervisor's */
	const char *s = (const char *)data;
	one_line(s, size);
	for (size_t at = 0; at < size;) {
		const char *nl = memchr(s + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (s + at)) : size - at;
		one_line(s + at, len);
		at += len + 1;
	}
	double v;
	metrics_parse_number(s, size, &v);
	return 0;
}
