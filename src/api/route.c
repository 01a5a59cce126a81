/* route.c -- the route matcher (route.h): method and path to a route, 404 or 405. */
#include "api/route.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

unsigned route_method_of(const char *method)
{
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
		return ROUTE_GET;
	if (!strcmp(method, "POST"))
		return ROUTE_POST;
	if (!strcmp(method, "DELETE"))
		return ROUTE_DELETE;
	return ROUTE_OTHER;
}

/*
 * Does pattern match the nseg segments stored one after another (each
 * NUL-terminated) at segs?  The captures go to m only on a match.
 */
static bool match(const char *pattern, const char *segs, size_t nseg, struct route_match *m)
{
	struct route_param got[ROUTE_MAX_PARAMS];
	size_t ngot = 0, i = 0;
	const char *p = pattern + (*pattern == '/'), *s = segs;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 2 && p[0] == '*' && p[1] == '*') {
			i = nseg; /* the rest, however many */
			break;
		}
		if (i == nseg)
			return false;
		if (len >= 2 && p[0] == '{' && p[len - 1] == '}') {
			if (ngot == ROUTE_MAX_PARAMS)
				return false; /* a table error: test_server.c checks the table */
			got[ngot++] = (struct route_param){ p + 1, len - 2, s };
		} else if (!(len == 1 && p[0] == '*') && (strlen(s) != len || strncmp(s, p, len) != 0)) {
			return false;
		}
		s += strlen(s) + 1;
		i++;
		p += len + (slash ? 1 : 0);
	}
	if (i != nseg)
		return false;
	memcpy(m->params, got, ngot * sizeof(got[0]));
	m->nparams = ngot;
	return true;
}

void route_match(const struct route *table, size_t n, const char *method, const char *path,
		 struct route_match *m)
{
	memset(m, 0, sizeof(*m));
	unsigned meth = route_method_of(method);
	m->copy = xstrdup(path + (*path == '/'));
	size_t len = strlen(m->copy), nseg = 0;
	if (len && m->copy[len - 1] == '/')
		m->copy[--len] = '\0';
	if (len) {
		nseg = 1;
		for (char *c = m->copy; *c; c++)
			if (*c == '/') {
				*c = '\0';
				nseg++;
			}
	}
	for (size_t i = 0; i < n && !m->resource; i++) {
		if (!match(table[i].pattern, m->copy, nseg, m))
			continue;
		m->resource = &table[i];
		/* the routes with the same pattern are its methods (the earlier ones did not match) */
		for (size_t k = i; k < n; k++) {
			if (strcmp(table[k].pattern, table[i].pattern) != 0)
				continue;
			m->allow |= table[k].methods;
			if (!m->route && (table[k].methods & meth))
				m->route = &table[k];
		}
	}
	m->status = !m->resource ? 404 : !m->route ? 405 : 0;
}

void route_match_release(struct route_match *m)
{
	free(m->copy);
	memset(m, 0, sizeof(*m));
}

const char *route_param(const struct route_match *m, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < m->nparams; i++)
		if (m->params[i].name_len == len && !strncmp(m->params[i].name, name, len))
			return m->params[i].value;
	return NULL;
}

void route_allow_text(unsigned allow, struct sbuf *out)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = { { ROUTE_GET, "GET" }, { ROUTE_POST, "POST" }, { ROUTE_DELETE, "DELETE" } };
	size_t total = 0, done = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		total += (allow & names[i].bit) != 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(allow & names[i].bit))
			continue;
		if (done)
			sbuf_adds(out, done + 1 == total ? " or " : ", ");
		sbuf_adds(out, names[i].name);
		done++;
	}
}
