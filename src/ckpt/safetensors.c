/*
 * safetensors.c -- read and validate safetensors files (ckpt.h).
 *
 * Layout: u64 little-endian N, N bytes of JSON header, then the data
 * section.  Validation is strict because a transform writes what it reads:
 * every problem is a TC_EINPUT naming the file and the tensor.
 */
#include "ckpt/ckpt.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	const char *name;
	size_t size;
} dtypes[ST_NDTYPES] = {
	[ST_BOOL] = { "BOOL", 1 }, [ST_U8] = { "U8", 1 }, [ST_I8] = { "I8", 1 },
	[ST_F8_E5M2] = { "F8_E5M2", 1 }, [ST_F8_E4M3] = { "F8_E4M3", 1 },
	[ST_I16] = { "I16", 2 }, [ST_U16] = { "U16", 2 }, [ST_F16] = { "F16", 2 },
	[ST_BF16] = { "BF16", 2 }, [ST_I32] = { "I32", 4 }, [ST_U32] = { "U32", 4 },
	[ST_F32] = { "F32", 4 }, [ST_F64] = { "F64", 8 }, [ST_I64] = { "I64", 8 },
	[ST_U64] = { "U64", 8 },
};

const char *st_dtype_name(enum st_dtype d)
{
	return d < ST_NDTYPES ? dtypes[d].name : "?";
}

size_t st_dtype_size(enum st_dtype d)
{
	return d < ST_NDTYPES ? dtypes[d].size : 0;
}

static int bad(struct tc_err *err, const char *path, const char *fmt, ...) TC_PRINTF(3, 4);

static int bad(struct tc_err *err, const char *path, const char *fmt, ...)
{
	struct sbuf sb = SBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	tc_error(err, TC_EINPUT, "%s: %s", path, sb.buf);
	sbuf_release(&sb);
	return TC_EINPUT;
}

static int cmp_offset(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* One tensor entry of the header. */
static int parse_tensor(const char *path, const char *name, json_t *v, struct st_tensor *t,
			struct tc_err *err)
{
	if (!json_is_object(v))
		return bad(err, path, "tensor '%s': entry is not an object", name);
	const char *dt = json_string_value(json_object_get(v, "dtype"));
	if (!dt)
		return bad(err, path, "tensor '%s': no dtype", name);
	t->dtype = ST_NDTYPES;
	for (int i = 0; i < ST_NDTYPES; i++)
		if (!strcmp(dtypes[i].name, dt))
			t->dtype = (enum st_dtype)i;
	if (t->dtype == ST_NDTYPES)
		return bad(err, path, "tensor '%s': unknown dtype '%s'", name, dt);
	json_t *shape = json_object_get(v, "shape");
	if (!json_is_array(shape))
		return bad(err, path, "tensor '%s': shape is not a list", name);
	if (json_array_size(shape) > ST_MAX_DIMS)
		return bad(err, path, "tensor '%s': more than %d dimensions", name, ST_MAX_DIMS);
	uint64_t n = st_dtype_size(t->dtype);
	size_t i;
	json_t *x;
	t->ndim = 0;
	json_array_foreach(shape, i, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0)
			return bad(err, path, "tensor '%s': shape holds a non-integer or negative value", name);
		uint64_t d = (uint64_t)json_integer_value(x);
		if (d && n > UINT64_MAX / d)
			return bad(err, path, "tensor '%s': shape overflows", name);
		n *= d;
		t->shape[t->ndim++] = d;
	}
	json_t *off = json_object_get(v, "data_offsets");
	if (!json_is_array(off) || json_array_size(off) != 2 ||
	    !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1)) ||
	    json_integer_value(json_array_get(off, 0)) < 0 || json_integer_value(json_array_get(off, 1)) < 0)
		return bad(err, path, "tensor '%s': data_offsets must be [begin, end]", name);
	t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
	t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
	if (t->end < t->begin)
		return bad(err, path, "tensor '%s': data_offsets end before they begin", name);
	if (t->end - t->begin != n)
		return bad(err, path, "tensor '%s': %llu bytes of data for a %s tensor of %llu bytes",
			   name, (unsigned long long)(t->end - t->begin), dt, (unsigned long long)n);
	return 0;
}

/* Validate f->map (f->size bytes) and fill the header fields; f->path names it in errors. */
static int validate(struct st_file *f, struct tc_err *err)
{
	const char *path = f->path;
	json_t *root = NULL;
	int rc = 0;
	if (f->size < 8)
		return bad(err, path, "truncated: %llu bytes, less than the 8-byte header length",
			   (unsigned long long)f->size);
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | f->map[i];
	if (hlen > ST_MAX_HEADER)
		return bad(err, path, "header of %llu bytes is over the limit of %llu bytes",
			   (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
	if (hlen < 2 || 8 + hlen > f->size)
		return bad(err, path, "truncated: the header says %llu bytes, the file has %llu after the length",
			   (unsigned long long)hlen, (unsigned long long)(f->size - 8));
	f->data_off = 8 + hlen;
	json_error_t je;
	root = json_loadb((const char *)f->map + 8, hlen, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return bad(err, path, "header is not valid JSON: %s (column %d)", je.text, je.column);
	if (!json_is_object(root)) {
		rc = bad(err, path, "header is not a JSON object");
		goto out;
	}
	f->t = xcalloc(json_object_size(root) + 1, sizeof(*f->t));
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "__metadata__")) {
			if (!json_is_object(v)) {
				rc = bad(err, path, "__metadata__ is not an object");
				goto out;
			}
			const char *mk;
			json_t *mv;
			json_object_foreach(v, mk, mv) {
				if (!json_is_string(mv)) {
					rc = bad(err, path, "__metadata__ '%s' is not a string", mk);
					goto out;
				}
			}
			char *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
			if (!t)
				xdie_oom(0);
			f->metadata_json = xstrdup(t);
			free(t);
			continue;
		}
		struct st_tensor *t = &f->t[f->nt];
		if ((rc = parse_tensor(path, key, v, t, err)))
			goto out;
		t->name = xstrdup(key);
		f->nt++;
	}
	qsort(f->t, f->nt, sizeof(*f->t), cmp_offset);
	uint64_t data = f->size - f->data_off, pos = 0;
	for (size_t i = 0; i < f->nt; i++) {
		const struct st_tensor *t = &f->t[i];
		if (t->begin < pos) {
			rc = bad(err, path, "tensor '%s' overlaps tensor '%s'", t->name, f->t[i - 1].name);
			goto out;
		}
		if (t->begin > pos) {
			rc = bad(err, path, "a gap of %llu bytes before tensor '%s': offsets must be contiguous",
				 (unsigned long long)(t->begin - pos), t->name);
			goto out;
		}
		if (t->end > data) {
			rc = bad(err, path, "tensor '%s' ends at %llu, past the %llu bytes of data (truncated?)",
				 t->name, (unsigned long long)t->end, (unsigned long long)data);
			goto out;
		}
		pos = t->end;
	}
	if (pos != data)
		rc = bad(err, path, "%llu bytes after the last tensor: the offsets must cover the data",
			 (unsigned long long)(data - pos));
out:
	json_decref(root);
	return rc;
}

int st_open(const char *path, struct st_file **out, struct tc_err *err)
{
	struct st_file *f = xcalloc(1, sizeof(*f));
	int rc = 0;
	f->path = xstrdup(path);
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0) {
		rc = tc_error_errno(err, errno == ENOENT ? TC_ENOTFOUND : TC_EINPUT, "cannot open '%s'", path);
		goto fail;
	}
	struct stat sb;
	if (fstat(f->fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		rc = bad(err, path, "not a regular file");
		goto fail;
	}
	f->size = (uint64_t)sb.st_size;
	if (f->size < 8) {
		rc = validate(f, err); /* says it is truncated: nothing to map */
		goto fail;
	}
	f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot map '%s'", path);
		goto fail;
	}
	if ((rc = validate(f, err)))
		goto fail;
	*out = f;
	return 0;
fail:
	st_close(f);
	return rc;
}

int st_parse(const void *buf, size_t size, const char *name, struct st_file **out,
	     struct tc_err *err)
{
	struct st_file *f = xcalloc(1, sizeof(*f));
	f->path = xstrdup(name);
	f->fd = -1;
	f->map = size ? buf : NULL;
	f->size = size;
	int rc = validate(f, err);
	if (rc) {
		st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

void st_close(struct st_file *f)
{
	if (!f)
		return;
	if (f->map && f->fd >= 0) /* st_parse's buffer is the caller's */
		munmap((void *)f->map, f->size);
	if (f->fd >= 0)
		close(f->fd);
	for (size_t i = 0; i < f->nt; i++)
		free(f->t[i].name);
	free(f->t);
	free(f->metadata_json);
	free(f->path);
	free(f);
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	for (size_t i = 0; i < f->nt; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

void ckpt_json_emit(struct json_t *o, struct sbuf *out)
{
	char *t = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!t)
		xdie_oom(0);
	sbuf_adds(out, t);
	sbuf_addch(out, '\n');
	free(t);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((*(const struct st_tensor *const *)a)->name,
		      (*(const struct st_tensor *const *)b)->name);
}

void st_describe(const struct st_file *f, bool json, struct sbuf *out)
{
	const struct st_tensor **v = xcalloc(f->nt + 1, sizeof(*v));
	for (size_t i = 0; i < f->nt; i++)
		v[i] = &f->t[i];
	qsort(v, f->nt, sizeof(*v), cmp_name);
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "file", json_string(f->path));
		json_object_set_new(o, "bytes", json_integer((json_int_t)f->size));
		json_object_set_new(o, "header_bytes", json_integer((json_int_t)(f->data_off - 8)));
		json_t *md = f->metadata_json ? json_loads(f->metadata_json, 0, NULL) : NULL;
		json_object_set_new(o, "metadata", md ? md : json_object());
		json_t *a = json_array();
		for (size_t i = 0; i < f->nt; i++) {
			json_t *shape = json_array();
			for (int d = 0; d < v[i]->ndim; d++)
				json_array_append_new(shape, json_integer((json_int_t)v[i]->shape[d]));
			json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:I, s:[I,I]}", "name", v[i]->name,
							   "dtype", st_dtype_name(v[i]->dtype), "shape", shape,
							   "bytes", (json_int_t)(v[i]->end - v[i]->begin),
							   "data_offsets", (json_int_t)v[i]->begin,
							   (json_int_t)v[i]->end));
		}
		json_object_set_new(o, "tensors", a);
		ckpt_json_emit(o, out);
		free(v);
		return;
	}
	uint64_t total = 0;
	for (size_t i = 0; i < f->nt; i++)
		total += v[i]->end - v[i]->begin;
	sbuf_addf(out, "%s: %zu tensors, %llu bytes of data, header %llu bytes\n", f->path, f->nt,
		  (unsigned long long)total, (unsigned long long)(f->data_off - 8));
	if (f->metadata_json)
		sbuf_addf(out, "metadata: %s\n", f->metadata_json);
	sbuf_addf(out, "%-48s %-8s %-24s %14s\n", "NAME", "DTYPE", "SHAPE", "BYTES");
	struct sbuf shape = SBUF_INIT;
	for (size_t i = 0; i < f->nt; i++) {
		sbuf_reset(&shape);
		sbuf_addch(&shape, '[');
		for (int d = 0; d < v[i]->ndim; d++)
			sbuf_addf(&shape, "%s%llu", d ? ", " : "", (unsigned long long)v[i]->shape[d]);
		sbuf_addch(&shape, ']');
		sbuf_addf(out, "%-48s %-8s %-24s %14llu\n", v[i]->name, st_dtype_name(v[i]->dtype), shape.buf,
			  (unsigned long long)(v[i]->end - v[i]->begin));
	}
	sbuf_release(&shape);
	free(v);
}
