/* source.c -- what both job sources share: release, and the wire forms (source.h). */
#include "source/source.h"
#include "core/json.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void source_job_release(struct source_job *j)
{
	free(j->id);
	free(j->name);
	free(j->state);
	free(j->run_dir);
	memset(j, 0, sizeof(*j));
}

void source_close(struct job_source *s)
{
	if (s)
		s->ops->close(s);
}

/* ---- series ---- */

static void add_value(struct sbuf *sb, double v)
{
	if (isnan(v))
		sbuf_adds(sb, "\"NaN\"");
	else if (isinf(v))
		sbuf_adds(sb, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	else
		json_add_number(sb, v);
}

void source_series_json(const struct store_mseries *v, size_t n, struct sbuf *out)
{
	sbuf_adds(out, "{\"series\":[");
	for (size_t i = 0; i < n; i++) {
		sbuf_adds(out, i ? ",{\"metric\":" : "{\"metric\":");
		json_add_str(out, v[i].metric);
		sbuf_addf(out, ",\"rank\":%d,\"points\":[", v[i].rank);
		for (size_t k = 0; k < v[i].n; k++) {
			const struct store_mpoint *p = &v[i].v[k];
			sbuf_addf(out, "%s[%d,%lld,%lld,%lld,", k ? "," : "", p->kind, p->seq, p->epoch,
				  p->iter);
			json_add_str(out, p->step);
			sbuf_addch(out, ',');
			add_value(out, p->value);
			sbuf_addch(out, ',');
			json_add_str(out, p->text); /* NULL: null */
			sbuf_addch(out, ',');
			json_add_number(out, p->wall_time);
			sbuf_addch(out, ']');
		}
		sbuf_adds(out, "]}");
	}
	sbuf_adds(out, "]}");
}

static double value_of(json_t *v)
{
	const char *s = json_string_value(v);
	if (!s)
		return json_is_number(v) ? json_number_value(v) : NAN;
	if (!strcmp(s, "Infinity"))
		return INFINITY;
	if (!strcmp(s, "-Infinity"))
		return -INFINITY;
	return NAN;
}

/* s copied into the series' blobs (strings of points live there, store.h) */
static const char *keep(struct store_mseries *s, size_t *alloc, const char *text)
{
	XGROW(s->blobs, s->nblobs + 1, *alloc);
	s->blobs[s->nblobs] = xstrdup(text);
	return s->blobs[s->nblobs++];
}

static char *str_of(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return xstrdup(s ? s : "");
}

/* The array under key of a wire form (*root: the caller's to free), or NULL with err. */
static json_t *wire_array(const char *text, size_t len, const char *key, const char *what,
			  json_t **root, struct tc_err *err)
{
	*root = json_loadb(text, len, 0, NULL);
	json_t *a = json_object_get(*root, key);
	if (json_is_array(a))
		return a;
	json_decref(*root);
	*root = NULL;
	tc_error(err, TC_EBACKEND, "the server's answer has no %s", what);
	return NULL;
}

int source_series_parse(const char *text, size_t len, struct store_mseries **out, size_t *nr,
			struct tc_err *err)
{
	*out = NULL;
	*nr = 0;
	json_t *root, *one;
	json_t *series = wire_array(text, len, "series", "metric series", &root, err);
	if (!series)
		return TC_EBACKEND;
	size_t n = json_array_size(series), i;
	struct store_mseries *v = xcalloc(n ? n : 1, sizeof(*v));
	json_array_foreach(series, i, one) {
		struct store_mseries *s = &v[i];
		json_t *pts = json_object_get(one, "points"), *p;
		size_t k, blobs = 0;
		s->metric = str_of(one, "metric");
		s->rank = (int)json_integer_value(json_object_get(one, "rank"));
		s->v = xcalloc(json_array_size(pts) ? json_array_size(pts) : 1, sizeof(*s->v));
		json_array_foreach(pts, k, p) {
			struct store_mpoint *q = &s->v[s->n++];
			const char *step = json_string_value(json_array_get(p, 4));
			const char *t = json_string_value(json_array_get(p, 6));
			q->kind = (int)json_integer_value(json_array_get(p, 0));
			q->seq = json_integer_value(json_array_get(p, 1));
			q->epoch = json_integer_value(json_array_get(p, 2));
			q->iter = json_integer_value(json_array_get(p, 3));
			q->step = keep(s, &blobs, step ? step : "");
			q->value = value_of(json_array_get(p, 5));
			q->text = t ? keep(s, &blobs, t) : NULL;
			q->wall_time = json_number_value(json_array_get(p, 7));
		}
	}
	json_decref(root);
	*out = v;
	*nr = n;
	return 0;
}

void source_series_xy(const struct store_mseries *v, size_t n, double xmin, double xmax,
		      const struct store_xy_sink *sink)
{
	for (size_t i = 0; i < n; i++) {
		sink->begin(sink->arg, v[i].rank);
		for (size_t k = 0; k < v[i].n; k++) {
			const struct store_mpoint *p = &v[i].v[k];
			double x = (double)store_mpoint_x(p);
			if (p->kind == STORE_MPOINT && !p->text && isfinite(p->value) && x >= xmin &&
			    x <= xmax)
				sink->add(sink->arg, x, p->value);
		}
	}
}

/* ---- checkpoints ---- */

void source_ckpt_json(const struct store_ckpt *v, size_t n, struct sbuf *out)
{
	sbuf_adds(out, "{\"checkpoints\":[");
	for (size_t i = 0; i < n; i++) {
		const struct store_ckpt *c = &v[i];
		sbuf_adds(out, i ? ",{\"name\":" : "{\"name\":");
		json_add_str(out, c->name);
		sbuf_adds(out, ",\"dir\":");
		json_add_str(out, c->dir);
		sbuf_addf(out, ",\"step\":%lld,\"epoch\":%lld,\"layout\":%d,\"files\":%lld,\"bytes\":%lld,"
			  "\"crc32c\":", c->step, c->epoch, c->layout, c->nfiles, c->bytes);
		json_add_str(out, c->checksum);
		sbuf_adds(out, ",\"created\":");
		json_add_number(out, c->created);
		sbuf_adds(out, ",\"state\":");
		json_add_str(out, c->state);
		sbuf_addch(out, '}');
	}
	sbuf_adds(out, "]}");
}

int source_ckpt_parse(const char *text, size_t len, struct store_ckpt **out, size_t *nr,
		      struct tc_err *err)
{
	*out = NULL;
	*nr = 0;
	json_t *root, *one;
	json_t *rows = wire_array(text, len, "checkpoints", "checkpoint list", &root, err);
	if (!rows)
		return TC_EBACKEND;
	size_t n = json_array_size(rows), i;
	struct store_ckpt *v = xcalloc(n ? n : 1, sizeof(*v));
	json_array_foreach(rows, i, one) {
		struct store_ckpt *c = &v[i];
		c->name = str_of(one, "name");
		c->dir = str_of(one, "dir");
		c->checksum = str_of(one, "crc32c");
		c->state = str_of(one, "state");
		c->step = json_integer_value(json_object_get(one, "step"));
		c->epoch = json_integer_value(json_object_get(one, "epoch"));
		c->layout = (int)json_integer_value(json_object_get(one, "layout"));
		c->nfiles = json_integer_value(json_object_get(one, "files"));
		c->bytes = json_integer_value(json_object_get(one, "bytes"));
		c->created = json_number_value(json_object_get(one, "created"));
	}
	json_decref(root);
	*out = v;
	*nr = n;
	return 0;
}
