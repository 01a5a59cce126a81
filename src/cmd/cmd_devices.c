/* cmd_devices.c -- `trainctl devices [--json]` */
#include "cmd/cmd.h"
#include "devices/devices.h"

#include "core/sbuf.h"
#include "core/xalloc.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

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

int cmd_devices(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool as_json = false;
	int c;
	(void)ctx;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': as_json = true; break;
		case 'h': fputs("usage: trainctl devices [--json]\n", stdout); return 0;
		default: return cmd_bad_option("devices", "h", argc, argv, opts, err);
		}
	}
	struct device_list l = DEVICE_LIST_INIT;
	devices_discover(&l);
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
			json_array_append_new(arr, o);
		}
		json_dumpf(arr, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(arr);
	} else {
		print_table(&l);
	}
	device_list_release(&l);
	return 0;
}
