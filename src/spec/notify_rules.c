/*
 * notify_rules.c -- the notify: key of a spec (a list of webhooks,
 * notify/notify.h) and its JSON form both ways; see spec_int.h.
 */
#include "spec/spec_int.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "core/yaml.h"
#include "notify/notify.h"

#include <stdlib.h>
#include <string.h>

static struct notify_hook *cur(struct walk *w)
{
	return &w->s->notify[w->s->nnotify - 1];
}

static int r_url(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &cur(w)->url);
	const char *why = rc ? NULL : notify_url_problem(cur(w)->url);
	return why ? walk_fail(w, n, key, "'%s' %s", cur(w)->url, why) : rc;
}

static int one_event(struct walk *w, yaml_node_t *n, const char *key, unsigned *bits)
{
	const char *v = scalar(n);
	if (!v || is_null(n))
		return walk_fail(w, n, key, "items must be event names (%s, or all)",
				 notify_event_names());
	if (!strcmp(v, "all")) {
		*bits |= NOTIFY_ALL;
		return 0;
	}
	int e = notify_event_parse(v);
	if (e < 0)
		return walk_fail(w, n, key, "unknown event '%s' (%s, or all)", v, notify_event_names());
	*bits |= 1u << e;
	return 0;
}

static int r_events(struct walk *w, yaml_node_t *n, const char *key)
{
	unsigned bits = 0;
	if (n->type == YAML_SCALAR_NODE) {
		int rc = one_event(w, n, key, &bits);
		if (rc)
			return rc;
	} else if (n->type == YAML_SEQUENCE_NODE) {
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     i < n->data.sequence.items.top; i++) {
			yaml_node_t *item = yaml_document_get_node(w->doc, *i);
			int rc = item ? one_event(w, item, key, &bits)
				      : walk_fail(w, n, key, "items must be event names");
			if (rc)
				return rc;
		}
	} else {
		return walk_fail(w, n, key, "must be a list of events (%s, or all)",
				 notify_event_names());
	}
	if (!bits)
		return walk_fail(w, n, key, "names no event");
	cur(w)->events = bits;
	return 0;
}

static int r_format(struct walk *w, yaml_node_t *n, const char *key)
{
	static const char *const fmts[] = { "json", "slack", NULL };
	char *v = NULL;
	int rc = walk_enum(w, n, key, fmts, &v);
	if (!rc)
		cur(w)->format = !strcmp(v, "slack") ? NOTIFY_SLACK : NOTIFY_JSON;
	free(v);
	return rc;
}

static int r_secret_env(struct walk *w, yaml_node_t *n, const char *key)
{
	int rc = walk_string(w, n, key, &cur(w)->secret_env);
	if (rc)
		return rc;
	const char *k = cur(w)->secret_env;
	if (!*k)
		return walk_fail(w, n, key, "is empty");
	for (const char *c = k; *c; c++)
		if (!(*c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
		      (*c >= 'A' && *c <= 'Z')) || (c == k && *c >= '0' && *c <= '9'))
			return walk_fail(w, n, key, "'%s' is not a variable name", k);
	return 0;
}

static int r_secret_file(struct walk *w, yaml_node_t *n, const char *key)
{
	char *v = NULL;
	int rc = walk_string(w, n, key, &v);
	if (rc)
		return rc;
	if (!*v) {
		free(v);
		return walk_fail(w, n, key, "is empty");
	}
	cur(w)->secret_file = path_absolute(v, w->base);
	free(v);
	return 0;
}

/* a secret written into the spec would be stored and shown with it */
static int r_secret(struct walk *w, yaml_node_t *n, const char *key)
{
	return walk_fail(w, n, key, "is never written in the spec (it would be stored and shown"
				    " with it): name it with secret_env or secret_file");
}

static const struct rule hook_rules[] = {
	{ "url", r_url, NULL },
	{ "events", r_events, NULL },
	{ "format", r_format, NULL },
	{ "secret_env", r_secret_env, NULL },
	{ "secret_file", r_secret_file, NULL },
	{ "secret", r_secret, NULL },
	{ NULL, NULL, NULL },
};

int spec_r_notify(struct walk *w, yaml_node_t *n, const char *key)
{
	w->s->notify_given = true;
	if (is_null(n))
		return 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return walk_fail(w, n, key, "must be a list of {url, events, format, secret_env}");
	size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	notify_hooks_free(w->s->notify, w->s->nnotify);
	w->s->notify = xcalloc(cnt ? cnt : 1, sizeof(*w->s->notify));
	w->s->nnotify = 0;
	for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
		yaml_node_t *item = yaml_document_get_node(w->doc, *i);
		if (!item || item->type != YAML_MAPPING_NODE)
			return walk_fail(w, item ? item : n, key, "items must be mappings with a url");
		w->s->nnotify++;
		cur(w)->events = NOTIFY_DEFAULT_EVENTS;
		int rc = walk_map(w, item, "notify[].", hook_rules);
		if (rc)
			return rc;
		if (!cur(w)->url)
			return walk_fail(w, item, "notify[].url", "is required");
		if (cur(w)->secret_env && cur(w)->secret_file)
			return walk_fail(w, item, "notify[].secret_file",
					 "give secret_env or secret_file, not both");
	}
	return 0;
}

/* ---- JSON, both ways (serialize.c, access.c) ---- */

json_t *spec_notify_json(const struct spec *s)
{
	json_t *a = json_array();
	for (size_t i = 0; i < s->nnotify; i++) {
		const struct notify_hook *h = &s->notify[i];
		json_t *ev = json_array();
		for (int e = 0; e < NOTIFY_NEVENTS; e++)
			if (h->events & (1u << e))
				json_array_append_new(ev, json_string(notify_event_name(e)));
		json_t *o = json_pack("{s:s, s:o, s:s}", "url", h->url, "events", ev, "format",
				      h->format == NOTIFY_SLACK ? "slack" : "json");
		if (h->secret_env)
			json_object_set_new(o, "secret_env", json_string(h->secret_env));
		if (h->secret_file)
			json_object_set_new(o, "secret_file", json_string(h->secret_file));
		json_array_append_new(a, o);
	}
	return a;
}

void spec_notify_take(struct spec *s, json_t *a)
{
	if (!json_is_array(a))
		return;
	s->notify_given = true;
	size_t i;
	json_t *v;
	s->notify = xcalloc(json_array_size(a) + 1, sizeof(*s->notify));
	json_array_foreach(a, i, v) {
		const char *url = json_string_value(json_object_get(v, "url"));
		if (!url)
			continue;
		struct notify_hook *h = &s->notify[s->nnotify++];
		h->url = xstrdup(url);
		json_t *ev = json_object_get(v, "events"), *e;
		size_t j;
		json_array_foreach(ev, j, e) {
			int k = json_is_string(e) ? notify_event_parse(json_string_value(e)) : -1;
			if (k >= 0)
				h->events |= 1u << k;
		}
		const char *f = json_string_value(json_object_get(v, "format"));
		h->format = f && !strcmp(f, "slack") ? NOTIFY_SLACK : NOTIFY_JSON;
		const char *se = json_string_value(json_object_get(v, "secret_env"));
		const char *sf = json_string_value(json_object_get(v, "secret_file"));
		h->secret_env = se ? xstrdup(se) : NULL;
		h->secret_file = sf ? xstrdup(sf) : NULL;
	}
}

/* ---- the server's defaults: a file holding only notify: ---- */

static const struct rule file_rules[] = {
	{ "notify", spec_r_notify, NULL },
	{ NULL, NULL, NULL },
};

int spec_notify_load(const char *path, struct notify_hook **out, size_t *n, struct tc_err *err)
{
	*out = NULL;
	*n = 0;
	struct sbuf text = SBUF_INIT;
	int rc = read_file(path, &text, err);
	if (rc) {
		sbuf_release(&text);
		return tc_error(err, TC_ESPEC, "%s", err->msg);
	}
	yaml_document_t doc;
	if ((rc = tc_yaml_parse(path, text.buf, text.len, &doc, err))) {
		sbuf_release(&text);
		return rc;
	}
	struct spec s;
	spec_init(&s);
	char *abs = path_absolute(path, NULL);
	char *base = path_dirname(abs);
	struct walk w = { .doc = &doc, .file = path, .base = base, .s = &s, .err = err };
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (!root)
		rc = tc_error(err, TC_ESPEC, "%s:1: the file is empty (it holds notify: [...])", path);
	else
		rc = walk_map(&w, root, "", file_rules);
	if (!rc) {
		*out = s.notify;
		*n = s.nnotify;
		s.notify = NULL;
		s.nnotify = 0;
	}
	/* spec_init's defaults are all s holds besides notify */
	s.notify_given = false;
	struct spec *heap = xmalloc(sizeof(*heap));
	*heap = s;
	spec_free(heap);
	free(abs);
	free(base);
	yaml_document_delete(&doc);
	sbuf_release(&text);
	return rc;
}
