/* cmd_devices.c -- `trainctl devices [--json]` */
#include "cmd/cmd.h"
#include "devices/devices.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

static json_t *opt_num(double v, bool known)
{
	return known ? json_real(v) : json_null();
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
		default: return tc_error(err, TC_EUSAGE, "devices: bad option");
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
		printf("%-5s %-3s %-32s %-21s %5s %8s %6s\n", "TYPE", "ID", "NAME", "MEMORY (used/total)",
		       "UTIL", "POWER", "TEMP");
		for (size_t i = 0; i < l.nr; i++) {
			const struct device *d = &l.v[i];
			char mem[64] = "-", util[16] = "-", pw[16] = "-", tmp[16] = "-";
			if (d->mem_total && d->source[0] == 'n')
				snprintf(mem, sizeof(mem), "%.1f/%.1f GiB", d->mem_used / 1073741824.0,
					 d->mem_total / 1073741824.0);
			else if (d->mem_total)
				snprintf(mem, sizeof(mem), "%.1f GiB", d->mem_total / 1073741824.0);
			if (d->util_percent >= 0)
				snprintf(util, sizeof(util), "%d%%", d->util_percent);
			if (d->power_w >= 0)
				snprintf(pw, sizeof(pw), "%.0f W", d->power_w);
			if (d->temp_c >= 0)
				snprintf(tmp, sizeof(tmp), "%.0f C", d->temp_c);
			printf("%-5s %-3d %-32s %-21s %5s %8s %6s\n", d->type, d->id,
			       d->name ? d->name : "-", mem, util, pw, tmp);
		}
	}
	device_list_release(&l);
	return 0;
}
