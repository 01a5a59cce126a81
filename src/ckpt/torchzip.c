/*
 * torchzip.c -- `ckpt inspect` on what torch.save writes (ckpt.h).
 *
 * torch.save's default is a zip archive (ZIP_STORED): <name>/data.pkl, a
 * pickle naming each tensor and its storage, and one record
 * <name>/data/<key> per storage.  The pickle is code to run, not data to
 * read, so trainctl reads only the zip's central directory (zip64 included:
 * archives past 4 GB use it) and lists the records with their sizes.  Every
 * offset and length is checked against the file before it is used.
 */
#include "ckpt/ckpt.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EOCD_SIG 0x06054b50u
#define EOCD_LEN 22
#define Z64_LOC_SIG 0x07064b50u
#define Z64_LOC_LEN 20
#define Z64_EOCD_SIG 0x06064b50u
#define Z64_EOCD_LEN 56
#define CDH_SIG 0x02014b50u
#define CDH_LEN 46
#define MAX_COMMENT 65535
#define MAX_CD (256ull << 20) /* a central directory past this is not a checkpoint's */

static uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int bad(struct tc_err *err, const char *path, const char *what)
{
	return tc_error(err, TC_EINPUT, "%s: a zip archive (torch.save's format) whose %s", path, what);
}

/* Where the archive's bytes come from: a file (pread) or a buffer. */
struct src {
	int fd;
	const unsigned char *buf; /* when fd < 0 */
	uint64_t size;
	const char *path;
};

static int read_at(const struct src *s, void *buf, size_t len, uint64_t off, struct tc_err *err)
{
	if (off > s->size || len > s->size - off)
		return bad(err, s->path, "end is cut short");
	if (s->fd < 0) {
		memcpy(buf, s->buf + off, len);
		return 0;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(s->fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return tc_error_errno(err, TC_ESTORAGE, "cannot read '%s'", s->path);
		if (!n)
			return bad(err, s->path, "end is cut short");
		got += (size_t)n;
	}
	return 0;
}

/* The zip64 extra field's values, for the fields the header marked 0xffffffff. */
static void zip64_extra(const unsigned char *x, size_t len, uint64_t *usize, uint64_t *csize)
{
	size_t i = 0;
	while (i + 4 <= len) {
		uint16_t id = le16(x + i), n = le16(x + i + 2);
		if (i + 4 + n > len)
			return;
		if (id == 0x0001) {
			const unsigned char *v = x + i + 4;
			size_t k = 0;
			if (*usize == 0xffffffffu && k + 8 <= n) {
				*usize = le64(v + k);
				k += 8;
			}
			if (*csize == 0xffffffffu && k + 8 <= n)
				*csize = le64(v + k);
			return;
		}
		i += 4 + (size_t)n;
	}
}

static void add_record(struct ckpt_zip *z, const unsigned char *name, size_t nlen,
		       uint64_t usize, uint64_t csize, uint16_t method)
{
	XGROW(z->rec, z->nrec + 1, z->alloc);
	struct ckpt_zip_rec *r = &z->rec[z->nrec++];
	/* printable ASCII: the name goes to a terminal and into JSON */
	r->name = xmalloc(nlen + 1);
	for (size_t i = 0; i < nlen; i++)
		r->name[i] = name[i] >= 0x20 && name[i] < 0x7f ? (char)name[i] : '?';
	r->name[nlen] = '\0';
	r->bytes = usize;
	r->compressed = csize;
	r->method = method;
	/* ".../data/<key>": one tensor storage (several tensors may view it) */
	const char *d = strstr(r->name, "/data/");
	if (d && !strchr(d + 6, '/') && d[6]) {
		z->storages++;
		z->storage_bytes += usize;
	}
}

static int parse_cd(struct ckpt_zip *z, const unsigned char *cd, uint64_t size, uint64_t n,
		    struct tc_err *err)
{
	uint64_t i = 0;
	for (uint64_t e = 0; e < n; e++) {
		if (size - i < CDH_LEN || le32(cd + i) != CDH_SIG)
			return bad(err, z->path, "central directory is not one (an entry's header is wrong)");
		const unsigned char *h = cd + i;
		uint16_t method = le16(h + 10);
		uint64_t csize = le32(h + 20), usize = le32(h + 24);
		size_t nlen = le16(h + 28), xlen = le16(h + 30), clen = le16(h + 32);
		if (size - i - CDH_LEN < (uint64_t)nlen + xlen + clen)
			return bad(err, z->path, "central directory ends inside an entry");
		zip64_extra(h + CDH_LEN + nlen, xlen, &usize, &csize);
		add_record(z, h + CDH_LEN, nlen, usize, csize, method);
		i += CDH_LEN + (uint64_t)nlen + xlen + clen;
	}
	return 0;
}

static int zip_read(struct ckpt_zip *z, const struct src *src, struct tc_err *err)
{
	unsigned char *tail = NULL, *cd = NULL;
	int rc = 0;
	const char *path = z->path;
	z->size = src->size;
	if (z->size < EOCD_LEN) {
		rc = bad(err, path, "end of central directory is missing (a truncated file?)");
		goto out;
	}
	/* the end record sits in the last 22 + up to 65535 (its comment) bytes */
	size_t tl = z->size < EOCD_LEN + MAX_COMMENT ? (size_t)z->size : EOCD_LEN + MAX_COMMENT;
	tail = xmalloc(tl);
	if ((rc = read_at(src, tail, tl, z->size - tl, err)))
		goto out;
	size_t at = tl - EOCD_LEN + 1;
	bool found = false;
	while (at-- > 0)
		if (le32(tail + at) == EOCD_SIG && at + EOCD_LEN + le16(tail + at + 20) == tl) {
			found = true;
			break;
		}
	if (!found) {
		rc = bad(err, path, "end of central directory is missing (a truncated file?)");
		goto out;
	}
	uint64_t n = le16(tail + at + 10), cdsize = le32(tail + at + 12), cdoff = le32(tail + at + 16);
	if (at >= Z64_LOC_LEN && le32(tail + at - Z64_LOC_LEN) == Z64_LOC_SIG) {
		unsigned char z64[Z64_EOCD_LEN];
		uint64_t z64off = le64(tail + at - Z64_LOC_LEN + 8);
		if (z->size < Z64_EOCD_LEN || z64off > z->size - Z64_EOCD_LEN) {
			rc = bad(err, path, "zip64 end record lies past the end of the file");
			goto out;
		}
		if ((rc = read_at(src, z64, sizeof(z64), z64off, err)))
			goto out;
		if (le32(z64) != Z64_EOCD_SIG) {
			rc = bad(err, path, "zip64 end record is not one");
			goto out;
		}
		n = le64(z64 + 32);
		cdsize = le64(z64 + 40);
		cdoff = le64(z64 + 48);
	}
	if (cdoff > z->size || cdsize > z->size - cdoff) {
		rc = bad(err, path, "central directory lies past the end of the file (a truncated file?)");
		goto out;
	}
	if (cdsize > MAX_CD || n > cdsize / CDH_LEN + 1) {
		rc = bad(err, path, "central directory is over 256 MiB or counts more entries than it holds");
		goto out;
	}
	cd = xmalloc(cdsize ? (size_t)cdsize : 1);
	if ((rc = read_at(src, cd, (size_t)cdsize, cdoff, err)))
		goto out;
	rc = parse_cd(z, cd, cdsize, n, err);
out:
	free(tail);
	free(cd);
	return rc;
}

/* z filled from src, or freed with the error returned. */
static int zip_finish(struct ckpt_zip *z, const struct src *src, struct ckpt_zip **out,
		      struct tc_err *err)
{
	int rc = zip_read(z, src, err);
	if (rc)
		ckpt_zip_free(z);
	else
		*out = z;
	return rc;
}

int ckpt_zip_open(const char *path, struct ckpt_zip **out, struct tc_err *err)
{
	struct ckpt_zip *z = xcalloc(1, sizeof(*z));
	z->path = xstrdup(path);
	struct src src = { .fd = open(path, O_RDONLY | O_CLOEXEC), .path = z->path };
	struct stat sb;
	int rc;
	if (src.fd < 0)
		rc = tc_error_errno(err, errno == ENOENT ? TC_ENOTFOUND : TC_EINPUT, "cannot open '%s'", path);
	else if (fstat(src.fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		rc = tc_error(err, TC_EINPUT, "%s: not a regular file", path);
	else
		rc = 0;
	if (rc) {
		if (src.fd >= 0)
			close(src.fd);
		ckpt_zip_free(z);
		return rc;
	}
	src.size = (uint64_t)sb.st_size;
	rc = zip_finish(z, &src, out, err);
	close(src.fd);
	return rc;
}

int ckpt_zip_parse(const void *buf, size_t size, const char *name, struct ckpt_zip **out,
		   struct tc_err *err)
{
	struct ckpt_zip *z = xcalloc(1, sizeof(*z));
	z->path = xstrdup(name);
	struct src src = { .fd = -1, .buf = buf, .size = size, .path = z->path };
	return zip_finish(z, &src, out, err);
}

void ckpt_zip_free(struct ckpt_zip *z)
{
	if (!z)
		return;
	for (size_t i = 0; i < z->nrec; i++)
		free(z->rec[i].name);
	free(z->rec);
	free(z->path);
	free(z);
}

static const char zip_note[] =
	"tensor names, dtypes and shapes are in data.pkl, a pickle, which trainctl does not run; "
	"for a full listing save with safetensors (safetensors.torch.save_file)";

static const char *method_name(uint16_t m)
{
	return m == 0 ? "stored" : m == 8 ? "deflate" : "other";
}

void ckpt_zip_describe(const struct ckpt_zip *z, bool json, struct sbuf *out)
{
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "file", json_string(z->path));
		json_object_set_new(o, "format", json_string("torch-zip"));
		json_object_set_new(o, "bytes", json_integer((json_int_t)z->size));
		json_object_set_new(o, "storages", json_integer((json_int_t)z->storages));
		json_object_set_new(o, "storage_bytes", json_integer((json_int_t)z->storage_bytes));
		json_t *a = json_array();
		for (size_t i = 0; i < z->nrec; i++)
			json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:s}", "name", z->rec[i].name, "bytes",
							   (json_int_t)z->rec[i].bytes, "compressed_bytes",
							   (json_int_t)z->rec[i].compressed, "method",
							   method_name(z->rec[i].method)));
		json_object_set_new(o, "records", a);
		json_object_set_new(o, "note", json_string(zip_note));
		ckpt_json_emit(o, out);
		return;
	}
	sbuf_addf(out, "%s: torch.save zip archive, %zu record%s, %zu tensor storage%s, %llu bytes of storage data\n",
		  z->path, z->nrec, z->nrec == 1 ? "" : "s", z->storages, z->storages == 1 ? "" : "s",
		  (unsigned long long)z->storage_bytes);
	sbuf_addf(out, "note: %s\n", zip_note);
	sbuf_addf(out, "%-48s %14s  %s\n", "RECORD", "BYTES", "METHOD");
	for (size_t i = 0; i < z->nrec; i++)
		sbuf_addf(out, "%-48s %14llu  %s\n", z->rec[i].name,
			  (unsigned long long)z->rec[i].bytes, method_name(z->rec[i].method));
}

enum ckpt_file_kind ckpt_file_kind(const char *path)
{
	unsigned char m[4] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CKPT_FILE_OTHER; /* st_open says why */
	ssize_t n = read(fd, m, sizeof(m));
	close(fd);
	if (n == 4 && m[0] == 'P' && m[1] == 'K' && ((m[2] == 3 && m[3] == 4) || (m[2] == 5 && m[3] == 6)))
		return CKPT_FILE_ZIP;
	if (n >= 2 && m[0] == 0x80 && m[1] >= 2 && m[1] <= 5)
		return CKPT_FILE_PICKLE; /* the PROTO opcode: torch's legacy format */
	return CKPT_FILE_OTHER;
}

int ckpt_inspect(const char *path, bool json, struct sbuf *out, struct tc_err *err)
{
	enum ckpt_file_kind kind = ckpt_file_kind(path);
	if (kind == CKPT_FILE_PICKLE)
		return tc_error(err, TC_EINPUT,
				"%s: a pickle (torch.save with _use_new_zipfile_serialization=False); "
				"ckpt inspect reads safetensors files and torch.save's zip archives",
				path);
	struct ckpt_zip *z = NULL;
	struct st_file *f = NULL;
	int rc = kind == CKPT_FILE_ZIP ? ckpt_zip_open(path, &z, err) : st_open(path, &f, err);
	if (z)
		ckpt_zip_describe(z, json, out);
	if (f)
		st_describe(f, json, out);
	ckpt_zip_free(z);
	st_close(f);
	return rc;
}
