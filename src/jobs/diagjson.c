/*
 * diagjson.c -- the types of diagnostics.json (diagjson.h): one table per
 * object, as launch/watch.c and launch/multinode.c write them.
 */
#include "jobs/diagjson.h"

#include <stdbool.h>
#include <stddef.h>

enum kind {
	K_INT,   /* a JSON integer */
	K_NUM,   /* any JSON number */
	K_TEXT,  /* a string, up to JOBS_DIAG_TEXT_MAX bytes */
	K_STACK, /* a string, up to JOBS_DIAG_STACK_MAX bytes */
	K_LIST,  /* an array of objects of schema sub */
	K_OBJ,   /* an object of schema sub */
};

struct field {
	const char *key;
	enum kind kind;
	bool null_ok; /* null is kept as null */
	const struct field *sub;
};

static const struct field rank_f[] = {
	{ "rank", K_INT, false, NULL },
	{ "steps", K_INT, false, NULL },
	{ "step_time", K_NUM, true, NULL },
	{ NULL, K_INT, false, NULL },
};

static const struct field straggler_f[] = {
	{ "rank", K_INT, false, NULL },
	{ "node", K_INT, false, NULL },
	{ "step_time", K_NUM, true, NULL },
	{ "slower_percent", K_NUM, true, NULL },
	{ NULL, K_INT, false, NULL },
};

static const struct field node_f[] = {
	{ "node", K_INT, false, NULL },
	{ "node_name", K_TEXT, true, NULL },
	{ "median_step_time", K_NUM, true, NULL },
	{ "hang_timeout", K_NUM, true, NULL },
	{ NULL, K_INT, false, NULL },
};

static const struct field stack_f[] = {
	{ "rank", K_INT, false, NULL },
	{ "node", K_INT, false, NULL },
	{ "stack", K_STACK, true, NULL },
	{ NULL, K_INT, false, NULL },
};

static const struct field hang_f[] = {
	{ "attempt", K_INT, false, NULL },
	{ "time", K_NUM, true, NULL },
	{ "silent_seconds", K_NUM, true, NULL },
	{ "timeout", K_NUM, true, NULL },
	{ "culprit", K_INT, true, NULL },
	{ "culprit_node", K_INT, true, NULL },
	{ "culprit_node_name", K_TEXT, true, NULL },
	{ "why", K_TEXT, false, NULL },
	{ "message", K_TEXT, false, NULL },
	{ "device_utilization", K_NUM, true, NULL },
	{ "utilization_source", K_TEXT, true, NULL },
	{ "stacks", K_LIST, false, stack_f },
	{ NULL, K_INT, false, NULL },
};

static const struct field match_f[] = {
	{ "attempt", K_INT, false, NULL },
	{ "rank", K_INT, false, NULL },
	{ "node", K_INT, false, NULL },
	{ "pattern", K_TEXT, false, NULL },
	{ "action", K_TEXT, false, NULL },
	{ "line", K_TEXT, false, NULL },
	{ "time", K_NUM, true, NULL },
	{ NULL, K_INT, false, NULL },
};

static const struct field resume_f[] = {
	{ "attempt", K_INT, false, NULL },
	{ "checkpoint_step", K_INT, false, NULL },
	{ "epoch", K_INT, false, NULL },
	{ "iteration", K_INT, false, NULL },
	{ "message", K_TEXT, false, NULL },
	{ NULL, K_INT, false, NULL },
};

static const struct field diag_f[] = {
	{ "attempt", K_INT, false, NULL },
	{ "steps", K_INT, false, NULL },
	{ "median_step_time", K_NUM, true, NULL },
	{ "hang_timeout", K_NUM, true, NULL },
	{ "straggler_percent", K_NUM, false, NULL },
	{ "straggler_steps", K_INT, false, NULL },
	{ "ranks", K_LIST, false, rank_f },
	{ "stragglers", K_LIST, false, straggler_f },
	{ "nodes", K_LIST, false, node_f },
	{ "hangs", K_LIST, false, hang_f },
	{ "log_matches", K_LIST, false, match_f },
	{ "resume_mismatch", K_OBJ, false, resume_f },
	{ NULL, K_INT, false, NULL },
};

/* v's text, cut to at most max bytes, not inside a UTF-8 character. */
static json_t *bounded(const json_t *v, size_t max)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	return json_stringn(s, n);
}

static json_t *typed(const json_t *in, const struct field *schema);

static json_t *typed_list(const json_t *in, const struct field *schema)
{
	json_t *a = json_array();
	size_t i;
	const json_t *x;
	json_array_foreach(in, i, x) {
		if (json_array_size(a) >= JOBS_DIAG_LIST_MAX)
			break;
		if (json_is_object(x))
			json_array_append_new(a, typed(x, schema));
	}
	return a;
}

/* v as field f wants it, or NULL to drop the key. */
static json_t *field_value(const json_t *v, const struct field *f)
{
	if (json_is_null(v))
		return f->null_ok ? json_null() : NULL;
	switch (f->kind) {
	case K_INT:
		return json_is_integer(v) ? json_integer(json_integer_value(v)) : NULL;
	case K_NUM:
		if (json_is_integer(v))
			return json_integer(json_integer_value(v));
		return json_is_real(v) ? json_real(json_real_value(v)) : NULL;
	case K_TEXT:
		return json_is_string(v) ? bounded(v, JOBS_DIAG_TEXT_MAX) : NULL;
	case K_STACK:
		return json_is_string(v) ? bounded(v, JOBS_DIAG_STACK_MAX) : NULL;
	case K_LIST:
		return json_is_array(v) ? typed_list(v, f->sub) : NULL;
	case K_OBJ:
		return json_is_object(v) ? typed(v, f->sub) : NULL;
	}
	return NULL;
}

static json_t *typed(const json_t *in, const struct field *schema)
{
	json_t *o = json_object();
	for (const struct field *f = schema; f->key; f++) {
		const json_t *v = json_object_get(in, f->key);
		json_t *t = v ? field_value(v, f) : NULL;
		if (t)
			json_object_set_new(o, f->key, t);
	}
	return o;
}

json_t *jobs_diag_typed(const json_t *in)
{
	return json_is_object(in) ? typed(in, diag_f) : NULL;
}
