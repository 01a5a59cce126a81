/*
 * names.h -- the names of the backends: one list, for the spec parser
 * (backend:), the CLI (--backend) and backend.c's table of ops.  A leaf
 * (spec/ uses it, and backend.h builds on it).
 */
#ifndef TC_BACKEND_NAMES_H
#define TC_BACKEND_NAMES_H

#include "core/sbuf.h"

enum backend_id { BACKEND_LOCAL, BACKEND_SLURM };
#define BACKEND_COUNT (BACKEND_SLURM + 1)

/* NULL-terminated, in enum backend_id order (a spec's backend: is one of them). */
extern const char *const backend_names[BACKEND_COUNT + 1];
/* The id of the backend called name; -1 when trainctl has none by that name. */
int backend_lookup(const char *name);
/* "local, slurm": the names for a message. */
void backend_names_add(struct sbuf *out);

#endif
