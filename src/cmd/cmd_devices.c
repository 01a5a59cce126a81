/* cmd_devices.c -- `trainctl devices [--json] [--health]` */
#include "cmd/cmd.h"
#include "devices/devices.h"
#include "devices/health.h"

#include "core/json.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "store/store.h"
#include "core/xalloc.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *opt_num(double v, bool known)
{
	return known ? json_real(v) : json_null();
}

enum { NCOL = 7 };

/* The table, each column as wide as its widest cell (names and sizes vary). */
static void print_table(const struct device_list *l)
{
	static const char *const head[NCOL] = { "TYPE", "ID", "NAME", "MEMORY (used/total)", "UTIL",
						"POWER", "TEMP" };
	static const bool right[NCOL] = { false, false, false, false, true, true, true };
	struct sbuf *cell = xcalloc((l->nr + 1) * NCOL, sizeof(*cell));
	size_t width[NCOL] = { 0 };
	for (int k = 0; k < NCOL; k++)
		sbuf_adds(&cell[k], head[k]);
	for (size_t i = 0; i < l->nr; i++) {
		const struct device *d = &l->v[i];
		struct sbuf *row = &cell[(i + 1) * NCOL];
		sbuf_adds(&row[0], d->type);
		sbuf_addf(&row[1], "%d", d->id);
		sbuf_adds(&row[2], d->name ? d->name : "-");
		if (d->mem_total)
			sbuf_addf(&row[3], "%.1f/%.1f GiB", d->mem_used / 1073741824.0,
				  d->mem_total / 1073741824.0);
		else
			sbuf_adds(&row[3], "-");
		if (d->util_percent >= 0)
			sbuf_addf(&row[4], "%d%%", d->util_percent);
		else
			sbuf_adds(&row[4], "-");
		if (d->power_w >= 0)
			sbuf_addf(&row[5], "%.0f W", d->power_w);
		else
			sbuf_adds(&row[5], "-");
		if (d->temp_c >= 0)
			sbuf_addf(&row[6], "%.0f C", d->temp_c);
		else
			sbuf_adds(&row[6], "-");
	}
	for (size_t i = 0; i <= l->nr; i++)
		for (int k = 0; k < NCOL; k++)
			if (cell[i * NCOL + k].len > width[k])
				width[k] = cell[i * NCOL + k].len;
	for (size_t i = 0; i <= l->nr; i++) {
		for (int k = 0; k < NCOL; k++) {
			const char *v = cell[i * NCOL + k].buf;
			const char *sep = k < NCOL - 1 ? " " : "\n";
			if (k == NCOL - 1 && !right[k])
				printf("%s%s", v, sep);
			else
				printf(right[k] ? "%*s%s" : "%-*s%s", (int)width[k], v, sep);
		}
	}
	for (size_t i = 0; i < (l->nr + 1) * NCOL; i++)
		sbuf_release(&cell[i]);
	free(cell);
}

/*
 * --health: each device's health (devices/health.h): NULL when its type is
 * not checked, else "ok" or the reason; heap strings, one per device.
 */
static char **check_health(const struct device_list *l)
{
	char **out = xcalloc(l->nr + 1, sizeof(char *));
	for (size_t i = 0; i < l->nr; i++) {
		const char *type = l->v[i].type;
		if (out[i] || !health_checked(type))
			continue;
		/* every device of this type in one check */
		int *ids = xcalloc(l->nr, sizeof(int));
		size_t *at = xcalloc(l->nr, sizeof(size_t));
		int n = 0;
		for (size_t k = i; k < l->nr; k++)
			if (!strcmp(l->v[k].type, type)) {
				at[n] = k;
				ids[n++] = l->v[k].id;
			}
		char **why = xcalloc((size_t)n, sizeof(char *));
		struct health_watch *w = health_open(type);
		health_check(w, ids, n, why);
		health_close(w);
		for (int k = 0; k < n; k++)
			out[at[k]] = why[k] ? why[k] : xstrdup("ok");
		free(why);
		free(at);
		free(ids);
	}
	return out;
}

/*
 * Devices the nodes of multi-node jobs found unhealthy on their own hosts
 * (the hub's device_health rows with a node, docs/devices.md): none when
 * this state folder has no database.
 */
static void node_health(const char *home, struct store_sick **v, size_t *n)
{
	struct sbuf db = SBUF_INIT;
	struct store *st = NULL;
	struct tc_err e = TC_ERR_INIT;
	*v = NULL;
	*n = 0;
	sbuf_addf(&db, "%s/trainctl.db", home);
	if (path_exists(db.buf) && store_open(home, &st, &e) == 0 &&
	    store_devices_unhealthy(st, v, n, &e) == 0) {
		/* this machine's own rows (node "") are what the list above shows */
		size_t k = 0;
		for (size_t i = 0; i < *n; i++) {
			if ((*v)[i].node && *(*v)[i].node) {
				struct store_sick t = (*v)[k];
				(*v)[k++] = (*v)[i];
				(*v)[i] = t;
			}
		}
		for (size_t i = k; i < *n; i++) {
			free((*v)[i].type);
			free((*v)[i].reason);
			free((*v)[i].node);
			free((*v)[i].job);
		}
		*n = k;
	}
	if (e.msg) /* the devices of this machine are the command's answer; say why the rest is not */
		fprintf(stderr, "trainctl: warning: nodes' device health: %s\n", e.msg);
	store_close(st);
	tc_err_release(&e);
	sbuf_release(&db);
}

int cmd_devices(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_JSON,
		{ "health", no_argument, NULL, 'H' },
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	bool as_json = false, health = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, NULL))
			continue;
		switch (c) {
		case 'H': health = true; break;
		case 'h':
			fputs("usage: trainctl devices [--json] [--health]\n\n"
			      "  --health  check each device as a job's start does (docs/diagnostics.md)\n",
			      stdout);
			return 0;
		default: return cmd_bad_option("devices", "h", argc, argv, opts, err);
		}
	}
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
	char **hl = health ? check_health(&l) : NULL;
	struct store_sick *nv = NULL;
	size_t nn = 0;
	node_health(ctx->home, &nv, &nn);
	if (as_json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < l.nr; i++) {
			const struct device *d = &l.v[i];
			json_t *o = json_pack("{s:s, s:i, s:s?, s:s}", "type", d->type, "id", d->id,
					      "name", d->name, "source", d->source);
			json_object_set_new(o, "memory_total", d->mem_total ? json_integer((json_int_t)d->mem_total) : json_null());
			json_object_set_new(o, "memory_used", d->mem_total ? json_integer((json_int_t)d->mem_used) : json_null());
			json_object_set_new(o, "utilization", d->util_percent >= 0 ? json_integer(d->util_percent) : json_null());
			json_object_set_new(o, "power_w", opt_num(d->power_w, d->power_w >= 0));
			json_object_set_new(o, "temperature_c", opt_num(d->temp_c, d->temp_c >= 0));
			if (hl)
				json_object_set_new(o, "health", json_string_or_null(hl[i]));
			json_array_append_new(arr, o);
		}
		for (size_t i = 0; i < nn; i++)
			json_array_append_new(arr, json_pack("{s:s, s:i, s:s, s:s, s:f, s:s?}", "type",
							     nv[i].type, "id", nv[i].id, "node", nv[i].node,
							     "health", nv[i].reason, "since", nv[i].since,
							     "job", nv[i].job));
		json_dumpf(arr, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(arr);
	} else {
		print_table(&l);
		for (size_t i = 0; hl && i < l.nr; i++)
			printf("%s%s %d: %s\n", i ? "" : "\nhealth:\n", l.v[i].type, l.v[i].id,
			       hl[i] ? hl[i] : "not checked");
		for (size_t i = 0; i < nn; i++)
			printf("%snode %s: %s %d: %s (found by job %s)\n",
			       i ? "" : "\nunhealthy on other nodes (found by multi-node jobs):\n", nv[i].node,
			       nv[i].type, nv[i].id, nv[i].reason, nv[i].job ? nv[i].job : "-");
	}
	store_sick_free(nv, nn);
	for (size_t i = 0; hl && i < l.nr; i++)
		free(hl[i]);
	free(hl);
	device_list_release(&l);
	return 0;
}
