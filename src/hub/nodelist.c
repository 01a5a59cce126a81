/*
 * nodelist.c -- Slurm's compressed host lists ("gpu[01-04,07]x,cpu3"), as
 * far as the hub needs them: is a node one of a job's (hub_int.h)?  The
 * list comes from the store (Slurm's own, or the job's first report of
 * it); the name from a job's event line, so both are untrusted text.
 */
#include "hub/hub_int.h"

#include <stdio.h>
#include <string.h>

/*
 * Does name match one item of a Slurm host list ("gpu[01-04,07]x",
 * "node3"), [p, end), without brackets across the boundary?
 */
static bool item_has(const char *p, const char *end, const char *name)
{
	const char *br = memchr(p, '[', (size_t)(end - p));
	if (!br)
		return strlen(name) == (size_t)(end - p) && !memcmp(p, name, (size_t)(end - p));
	size_t pre = (size_t)(br - p);
	if (strlen(name) < pre || memcmp(p, name, pre))
		return false;
	const char *close = memchr(br, ']', (size_t)(end - br));
	if (!close)
		return false;
	const char *num = name + pre;
	size_t ndig = 0;
	while (num[ndig] >= '0' && num[ndig] <= '9' && ndig < 18)
		ndig++;
	for (const char *r = br + 1; r < close;) {
		const char *comma = memchr(r, ',', (size_t)(close - r));
		const char *re = comma ? comma : close;
		const char *dash = memchr(r, '-', (size_t)(re - r));
		const char *lo_end = dash ? dash : re;
		size_t width = (size_t)(lo_end - r);
		long long lo = 0, hi = 0;
		bool ok = width > 0 && width < 18;
		for (const char *c = r; ok && c < lo_end; c++)
			ok = *c >= '0' && *c <= '9' && ((lo = lo * 10 + (*c - '0')), true);
		if (dash) {
			ok = ok && re > dash + 1 && re - dash - 1 < 18;
			for (const char *c = dash + 1; ok && c < re; c++)
				ok = *c >= '0' && *c <= '9' && ((hi = hi * 10 + (*c - '0')), true);
		} else {
			hi = lo;
		}
		/* "01-10": padded to lo's width; "1-10": not padded */
		int pad = width > 1 && *r == '0' ? (int)width : 0;
		for (size_t len = 1; ok && len <= ndig; len++) {
			long long v = 0;
			for (size_t k = 0; k < len; k++)
				v = v * 10 + (num[k] - '0');
			char text[32];
			int n = snprintf(text, sizeof(text), "%0*lld", pad, v);
			if (v >= lo && v <= hi && n == (int)len && !memcmp(text, num, len) &&
			    item_has(close + 1, end, num + len))
				return true;
		}
		r = comma ? comma + 1 : close;
	}
	return false;
}

bool hub_nodelist_has(const char *list, const char *name)
{
	if (!list || !name || !*name)
		return false;
	const char *p = list;
	while (*p) {
		/* the item ends at the first comma outside brackets */
		const char *e = p;
		int depth = 0;
		for (; *e && (depth || *e != ','); e++)
			depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
		if (e > p && item_has(p, e, name))
			return true;
		p = *e ? e + 1 : e;
	}
	return false;
}

