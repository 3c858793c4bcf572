/* The control-socket client and the renderings every command shares. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define REPLY_MAX (16 << 20)

static int connect_to(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "metaroce-ctl: %s: socket path too long\n", path);
		return -1;
	}
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "metaroce-ctl: cannot reach metarocd at %s: %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}



int cli_send(int fd, const char *cmd, json_t *args, int id)
{
	json_t *req = json_pack("{s:i, s:i, s:s}", "v", 1, "id", id, "cmd", cmd);
	if (args)
		json_object_set_new(req, "args", args);
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!s)
		return -1;
	size_t n = strlen(s);
	s[n] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
	int rv = write_all(fd, s, n + 1);
	free(s);
	return rv;
}

/* A reader of newline-terminated messages on one socket. */
static struct {
	int fd;
	char *buf;
	size_t len, cap;
} rd = {.fd = -1};

int cli_recv(int fd, int timeout_ms, json_t **pmsg)
{
	if (rd.fd != fd) {
		rd.fd = fd;
		rd.len = 0;
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char *nl = rd.len ? memchr(rd.buf, '\n', rd.len) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - rd.buf);
			json_error_t err;
			*pmsg = json_loadb(rd.buf, n, 0, &err);
			memmove(rd.buf, nl + 1, rd.len - n - 1);
			rd.len -= n + 1;
			if (!*pmsg) {
				fprintf(stderr, "metaroce-ctl: bad reply from metarocd: %s\n",
					err.text);
				return CLI_FAILED;
			}
			return 0;
		}
		long left = -1;
		if (timeout_ms >= 0) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 +
					     (t.tv_nsec - t0.tv_nsec) / 1000000);
			if (left <= 0)
				return CLI_TIMEOUT;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			return CLI_INTERRUPTED;
		if (pr == 0)
			return CLI_TIMEOUT;
		if (rd.len == rd.cap) {
			if (rd.cap >= REPLY_MAX) {
				fprintf(stderr, "metaroce-ctl: reply longer than %d bytes\n", REPLY_MAX);
				return CLI_FAILED;
			}
			size_t ncap = rd.cap ? rd.cap * 2 : 65536;
			char *nb = realloc(rd.buf, ncap);
			if (!nb)
				return CLI_FAILED;
			rd.buf = nb;
			rd.cap = ncap;
		}
		ssize_t r = recv(fd, rd.buf + rd.len, rd.cap - rd.len, 0);
		if (r < 0 && errno == EINTR)
			return CLI_INTERRUPTED;
		if (r <= 0) {
			fprintf(stderr, "metaroce-ctl: metarocd closed the connection\n");
			return CLI_UNREACHABLE;
		}
		rd.len += (size_t)r;
	}
}

int cli_open(cli *c)
{
	/* A new connection may get the number of a closed one: nothing read
	 * from that one may be taken for this one's. */
	rd.fd = -1;
	rd.len = 0;
	return connect_to(c->socket);
}

int cli_result(const char *cmd, json_t *reply, json_t **presult)
{
	if (!json_is_true(json_object_get(reply, "ok"))) {
		json_t *e = json_object_get(reply, "error");
		const char *msg = json_string_value(json_object_get(e, "message"));
		fprintf(stderr, "metaroce-ctl: %s: %s\n", cmd, msg ? msg : "failed");
		json_decref(reply);
		return CLI_FAILED;
	}
	*presult = json_incref(json_object_get(reply, "result"));
	json_decref(reply);
	return *presult ? CLI_OK : CLI_FAILED;
}

int cli_request(cli *c, const char *cmd, json_t *args, int timeout_s, json_t **presult)
{
	int fd = cli_open(c);
	if (fd < 0) {
		json_decref(args);
		return CLI_UNREACHABLE;
	}
	json_t *reply = NULL;
	int rv = cli_send(fd, cmd, args, 1) < 0 ? CLI_UNREACHABLE
						 : cli_recv(fd, timeout_s * 1000, &reply);
	close(fd);
	if (rv == CLI_TIMEOUT)
		fprintf(stderr, "metaroce-ctl: no reply from metarocd within %d s\n", timeout_s);
	if (rv)
		return rv == CLI_TIMEOUT || rv == CLI_INTERRUPTED ? CLI_UNREACHABLE : rv;
	return cli_result(cmd, reply, presult);
}

void cli_print_json(json_t *result)
{
	char *s = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
	if (s) {
		puts(s);
		free(s);
	}
}

void cli_show(const cli *c, json_t *r, const cli_view *v)
{
	if (c->json) {
		cli_print_json(r);
		return;
	}
	if (v->text)
		v->text(r);
	if (v->cols)
		cli_print_table(v->rows ? json_object_get(r, v->rows) : r, v->cols, v->ncols);
}

static void value_str(json_t *v, char *buf, size_t len)
{
	if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, len, "%.1f", json_real_value(v));
	else if (json_is_true(v))
		snprintf(buf, len, "yes");
	else if (json_is_false(v))
		snprintf(buf, len, "no");
	else if (!v || json_is_null(v))
		snprintf(buf, len, "-");
	else {
		char *s = json_dumps(v, JSON_COMPACT);
		snprintf(buf, len, "%s", s ? s : "?");
		free(s);
	}
}

/* Terminal columns of a UTF-8 string (sparklines are 3 bytes a column). */
static int cols_of(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static void pad(const char *s, int width, int more)
{
	fputs(s, stdout);
	if (!more) {
		putchar('\n');
		return;
	}
	for (int k = cols_of(s); k < width + 2; k++)
		putchar(' ');
}

void cli_print_table(json_t *rows, const char *const *cols, int ncols)
{
	enum { W = 64 };
	size_t nrows = json_array_size(rows);
	char key[32][W], head[32][W];
	int width[32];
	if (ncols > 32)
		ncols = 32;
	for (int i = 0; i < ncols; i++) {
		const char *colon = strchr(cols[i], ':');
		snprintf(key[i], W, "%.*s", colon ? (int)(colon - cols[i]) : W - 1, cols[i]);
		snprintf(head[i], W, "%s", colon ? colon + 1 : cols[i]);
		for (char *p = head[i]; *p && !colon; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		width[i] = cols_of(head[i]);
	}
	char(*cell)[W] = calloc(nrows * (size_t)ncols + 1, W);
	if (!cell)
		return;
	for (size_t r = 0; r < nrows; r++)
		for (int i = 0; i < ncols; i++) {
			char *b = cell[r * (size_t)ncols + (size_t)i];
			value_str(json_object_get(json_array_get(rows, r), key[i]), b, W);
			if (cols_of(b) > width[i])
				width[i] = cols_of(b);
		}
	for (int i = 0; i < ncols; i++)
		pad(head[i], width[i], i + 1 < ncols);
	for (size_t r = 0; r < nrows; r++)
		for (int i = 0; i < ncols; i++)
			pad(cell[r * (size_t)ncols + (size_t)i], width[i], i + 1 < ncols);
	free(cell);
}

void cli_print_object(json_t *obj, int indent)
{
	const char *k;
	json_t *v;
	json_object_foreach(obj, k, v) {
		if (json_is_object(v)) {
			printf("%*s%s:\n", indent, "", k);
			cli_print_object(v, indent + 2);
		} else {
			char b[256];
			value_str(v, b, sizeof(b));
			printf("%*s%s: %s\n", indent, "", k, b);
		}
	}
}
