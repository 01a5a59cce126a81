/* names.c -- the backends' names (names.h). */
#include "backend/names.h"

#include <string.h>

const char *const backend_names[BACKEND_COUNT + 1] = {
	[BACKEND_LOCAL] = "local",
	[BACKEND_SLURM] = "slurm",
	[BACKEND_COUNT] = NULL,
};

int backend_lookup(const char *name)
{
	for (int i = 0; name && i < BACKEND_COUNT; i++)
		if (!strcmp(backend_names[i], name))
			return i;
	return -1;
}

void backend_names_add(struct sbuf *out)
{
	for (int i = 0; i < BACKEND_COUNT; i++)
		sbuf_addf(out, "%s%s", i ? ", " : "", backend_names[i]);
}
