/* Durations, sparklines and the --watch loop of show planes/paths. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

double cli_duration(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || !(v > 0))
		return -1;
	static const struct {
		const char *unit;
		double s;
	} units[] = {{"", 1}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].unit) == 0)
			return v * units[i].s;
	return -1;
}

void cli_sparkline(json_t *arr, int width, char *buf, size_t len)
{
	static const char *const bars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	size_t n = json_array_size(arr), first = n > (size_t)width ? n - (size_t)width : 0;
	double max = 0;
	for (size_t i = first; i < n; i++) {
		double v = json_number_value(json_array_get(arr, i));
		if (v > max)
			max = v;
	}
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = first; i < n && off + 4 < len; i++) {
		double v = json_number_value(json_array_get(arr, i));
		int k = max > 0 ? (int)(v / max * 7.0 + 0.5) : 0;
		if (k < 0)
			k = 0;
		if (k > 7)
			k = 7;
		off += (size_t)snprintf(buf + off, len - off, "%s", bars[k]);
	}
}

static volatile sig_atomic_t stop;

static void on_sig(int sig)
{
	(void)sig;
	stop = 1;
}

int cli_watch(cli *c, const char *cmd, json_t *args,
	      int (*render)(cli *c, json_t *rows, json_t *recent))
{
	int tty = isatty(STDOUT_FILENO);
	struct sigaction sa = {.sa_handler = on_sig};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	double interval = 1;
	int rv = CLI_OK;
	while (!stop) {
		json_t *rows, *recent;
		rv = cli_request(c, cmd, args ? json_incref(args) : NULL, 10, &rows);
		if (rv)
			break;
		rv = cli_request(c, "telemetry", NULL, 10, &recent);
		if (rv) {
			json_decref(rows);
			break;
		}
		double iv = json_number_value(json_object_get(recent, "interval_s"));
		interval = iv >= 0.1 ? iv : 1;
		if (tty)
			fputs("\033[H\033[2J", stdout); /* clear only a terminal */
		time_t now = time(NULL);
		char tb[32];
		strftime(tb, sizeof(tb), "%H:%M:%S", localtime(&now));
		printf("%s every %.1fs, %s (Ctrl-C to stop)\n", cmd, interval, tb);
		rv = render(c, rows, recent);
		fflush(stdout);
		json_decref(rows);
		json_decref(recent);
		if (rv)
			break;
		struct timespec ts = {.tv_sec = (time_t)interval,
				      .tv_nsec = (long)((interval - (double)(time_t)interval) * 1e9)};
		nanosleep(&ts, NULL); /* a signal ends it early */
	}
	json_decref(args);
	/* Ctrl-C ends a watch. When it lands inside a request, that request
	 * fails as interrupted (cli_request reports it as unreachable): this
	 * is the normal way out, not a failure. */
	return stop ? CLI_OK : rv;
}
