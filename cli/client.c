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

/* Read one line (the reply) within timeout_s. */
static char *read_line(int fd, int timeout_s, size_t *plen)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (buf) {
		char *nl = len ? memchr(buf, '\n', len) : NULL;
		if (nl) {
			*plen = (size_t)(nl - buf);
			return buf;
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = (long)timeout_s * 1000 - ((t.tv_sec - t0.tv_sec) * 1000 +
						    (t.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			fprintf(stderr, "metaroce-ctl: no reply from metarocd within %d s\n",
				timeout_s);
			break;
		}
		if (len == cap) {
			if (cap >= REPLY_MAX)
				break;
			char *n = realloc(buf, cap *= 2);
			if (!n)
				break;
			buf = n;
		}
		ssize_t r = recv(fd, buf + len, cap - len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "metaroce-ctl: metarocd closed the connection\n");
			break;
		}
		len += (size_t)r;
	}
	free(buf);
	return NULL;
}

int cli_request(cli *c, const char *cmd, json_t *args, int timeout_s, json_t **presult)
{
	json_t *req = json_pack("{s:i, s:i, s:s}", "v", 1, "id", 1, "cmd", cmd);
	if (args)
		json_object_set_new(req, "args", args);
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	int fd = connect_to(c->socket);
	if (fd < 0) {
		free(s);
		return CLI_UNREACHABLE;
	}
	size_t n = strlen(s);
	s[n] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
	int rv = write_all(fd, s, n + 1);
	free(s);
	size_t len = 0;
	char *line = rv < 0 ? NULL : read_line(fd, timeout_s, &len);
	close(fd);
	if (!line)
		return CLI_UNREACHABLE;
	json_error_t err;
	json_t *reply = json_loadb(line, len, 0, &err);
	free(line);
	if (!reply) {
		fprintf(stderr, "metaroce-ctl: bad reply from metarocd: %s\n", err.text);
		return CLI_FAILED;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		json_t *e = json_object_get(reply, "error");
		fprintf(stderr, "metaroce-ctl: %s: %s\n", cmd,
			json_string_value(json_object_get(e, "message"))
				? json_string_value(json_object_get(e, "message"))
				: "failed");
		json_decref(reply);
		return CLI_FAILED;
	}
	*presult = json_incref(json_object_get(reply, "result"));
	json_decref(reply);
	return *presult ? CLI_OK : CLI_FAILED;
}

void cli_print_json(json_t *result)
{
	char *s = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
	if (s) {
		puts(s);
		free(s);
	}
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
		width[i] = (int)strlen(head[i]);
	}
	char(*cell)[W] = calloc(nrows * (size_t)ncols + 1, W);
	if (!cell)
		return;
	for (size_t r = 0; r < nrows; r++)
		for (int i = 0; i < ncols; i++) {
			char *b = cell[r * (size_t)ncols + (size_t)i];
			value_str(json_object_get(json_array_get(rows, r), key[i]), b, W);
			if ((int)strlen(b) > width[i])
				width[i] = (int)strlen(b);
		}
	for (int i = 0; i < ncols; i++)
		printf("%-*s%s", width[i], head[i], i + 1 < ncols ? "  " : "\n");
	for (size_t r = 0; r < nrows; r++)
		for (int i = 0; i < ncols; i++)
			printf("%-*s%s", width[i], cell[r * (size_t)ncols + (size_t)i],
			       i + 1 < ncols ? "  " : "\n");
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
