/*
 * metaroce-conform: tests an implementation of MetaRoCE over the wire.
 *
 *   metaroce-conform [options] TARGET
 *
 * It speaks the wire format itself (proto/wire.h, never the engine) and
 * drives TARGET (IPV4[:PORT]) as a peer would; each case names the SPEC
 * section it checks and ends pass, fail (with what was sent, what came back
 * and what the SPEC requires) or skip. Exit 0 when no case failed, 1 when
 * one did, 2 on a usage or setup error. See docs/conformance.md.
 */
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: metaroce-conform [options] TARGET\n"
		"  TARGET                 IPV4[:PORT] of the implementation under test "
		"(port %u by default)\n"
		"  -c, --case PATTERN     run only cases whose name matches the glob "
		"(repeatable)\n"
		"  -x, --exclude PATTERN  leave out cases whose name matches the glob\n"
		"                         (repeatable)\n"
		"  -l, --list             list the cases and exit\n"
		"  -j, --json FILE        write results as JSON (- for stdout)\n"
		"  -J, --junit FILE       write results as JUnit XML (- for stdout)\n"
		"  -b, --bind ADDR        local IPV4[:PORT] to use (default: the route's)\n"
		"  -s, --status-cmd CMD   shell command printing the target's status JSON;\n"
		"                         drop counters are checked from its \"drops\" object\n"
		"  -t, --trigger CMD      shell command that makes the target connect to %%a\n"
		"                         (replaced by our ADDR:PORT) for the acceptor cases\n"
		"  -S, --service ID       service id (hex) the connection cases open\n"
		"                         (default 4543484f, the reference daemon's ECHO)\n"
		"  -R, --refused-service ID  service id (hex) the target refuses to us by\n"
		"                         policy, for reject.refused\n"
		"  -A, --ro-region SVC:RKEY:ADDR:LEN  (hex) a region of the target without\n"
		"                         remote write, reached through service SVC, for\n"
		"                         nak.access\n"
		"  -P, --plane-addr ADDR  a second local address of the tool, of the\n"
		"                         target's family, for plane.paths\n"
		"  -k, --stop-cmd CMD     shell command that stops the target gracefully,\n"
		"                         for close.shutdown and close.simultaneous (run\n"
		"                         last: the target is gone afterwards)\n"
		"  -a, --app-exit SVC:CMD  (hex) the service of an application of the target,\n"
		"                         and a shell command that makes it exit, for\n"
		"                         close.app-exit (run after all but close.shutdown)\n"
		"  -w, --wait MS          answer timeout (default 500)\n"
		"  -e, --end-wait MS      how long the target may take to end a connection\n"
		"                         on its own: retry budget spent, shutdown (default\n"
		"                         10000)\n"
		"  -C, --challenge-wait MS  how long until an unanswered restart challenge\n"
		"                         ends a connection (default 3000; SPEC 9.6: 2.5 s)\n"
		"  -v, --verbose          print every datagram received\n"
		"  -h, --help\n",
		MRP_DEFAULT_PORT);
}

typedef struct result {
	const cf_case *c;
	int status;
	double secs;
	char msg[2048];
} result;

static const char *status_name(int s)
{
	return s == CF_PASS ? "pass" : s == CF_FAIL ? "fail" : "skip";
}

static void put_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void put_xml(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\n')
				fputc(*s, f);
		}
	}
}

static FILE *open_out(const char *path)
{
	if (strcmp(path, "-") == 0)
		return stdout;
	FILE *f = fopen(path, "w");
	if (!f)
		perror(path);
	return f;
}

static void close_out(FILE *f)
{
	if (f && f != stdout)
		fclose(f);
}

static void write_json(FILE *f, const char *target, const result *r, size_t n, unsigned cnt[3])
{
	fprintf(f, "{\"target\": ");
	put_json_str(f, target);
	fprintf(f, ", \"passed\": %u, \"failed\": %u, \"skipped\": %u, \"cases\": [", cnt[CF_PASS],
		cnt[CF_FAIL], cnt[CF_SKIP]);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
		put_json_str(f, r[i].c->name);
		fprintf(f, ", \"section\": ");
		put_json_str(f, r[i].c->section);
		fprintf(f, ", \"result\": \"%s\", \"seconds\": %.3f, \"detail\": ",
			status_name(r[i].status), r[i].secs);
		put_json_str(f, r[i].msg);
		fprintf(f, "}");
	}
	fprintf(f, "\n]}\n");
}

static void write_junit(FILE *f, const char *target, const result *r, size_t n,
			unsigned cnt[3])
{
	double total = 0;
	for (size_t i = 0; i < n; i++)
		total += r[i].secs;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f, "<testsuite name=\"metaroce-conform ");
	put_xml(f, target);
	fprintf(f, "\" tests=\"%zu\" failures=\"%u\" skipped=\"%u\" time=\"%.3f\">\n", n,
		cnt[CF_FAIL], cnt[CF_SKIP], total);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "  <testcase classname=\"SPEC %s\" name=\"%s\" time=\"%.3f\"",
			r[i].c->section, r[i].c->name, r[i].secs);
		if (r[i].status == CF_PASS) {
			fprintf(f, "/>\n");
			continue;
		}
		fprintf(f, ">\n    <%s message=\"", r[i].status == CF_FAIL ? "failure" : "skipped");
		put_xml(f, r[i].msg);
		fprintf(f, "\"/>\n  </testcase>\n");
	}
	fprintf(f, "</testsuite>\n");
}

static double secs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"case", required_argument, NULL, 'c'},
		{"exclude", required_argument, NULL, 'x'},
		{"list", no_argument, NULL, 'l'},
		{"json", required_argument, NULL, 'j'},
		{"junit", required_argument, NULL, 'J'},
		{"bind", required_argument, NULL, 'b'},
		{"status-cmd", required_argument, NULL, 's'},
		{"trigger", required_argument, NULL, 't'},
		{"wait", required_argument, NULL, 'w'},
		{"stop-cmd", required_argument, NULL, 'k'},
		{"app-exit", required_argument, NULL, 'a'},
		{"end-wait", required_argument, NULL, 'e'},
		{"challenge-wait", required_argument, NULL, 'C'},
		{"service", required_argument, NULL, 'S'},
		{"refused-service", required_argument, NULL, 'R'},
		{"ro-region", required_argument, NULL, 'A'},
		{"plane-addr", required_argument, NULL, 'P'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *patterns[64], *excludes[64];
	unsigned npat = 0, nexcl = 0, wait_ms = 500, end_wait_ms = 10000, chal_wait_ms = 3000;
	uint32_t svc = 0x4543484fu; /* "ECHO" */
	uint32_t refused = 0;
	int has_refused = 0;
	unsigned long long ro[4] = {0, 0, 0, 0};
	int has_ro = 0;
	const char *plane2 = NULL;
	int list = 0, verbose = 0;
	const char *json = NULL, *junit = NULL, *bind_addr = NULL, *status = NULL,
		   *trig = NULL, *stop = NULL, *app_cmd = NULL;
	uint32_t app_svc = 0;
	int o;
	while ((o = getopt_long(argc, argv, "c:x:lj:J:b:s:t:k:a:w:e:C:S:R:A:P:vh", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			if (npat == 64) {
				fprintf(stderr, "metaroce-conform: at most 64 --case patterns\n");
				return 2;
			}
			patterns[npat++] = optarg;
			break;
		case 'x':
			if (nexcl == 64) {
				fprintf(stderr, "metaroce-conform: at most 64 --exclude patterns\n");
				return 2;
			}
			excludes[nexcl++] = optarg;
			break;
		case 'l': list = 1; break;
		case 'j': json = optarg; break;
		case 'J': junit = optarg; break;
		case 'b': bind_addr = optarg; break;
		case 's': status = optarg; break;
		case 't': trig = optarg; break;
		case 'k': stop = optarg; break;
		case 'a': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 16);
			if (end == optarg || *end != ':' || !end[1] || v == 0 || v > 0xffffffffu) {
				fprintf(stderr, "metaroce-conform: --app-exit %s: expected SVC:CMD, "
					"SVC a 32-bit hex service id\n", optarg);
				return 2;
			}
			app_svc = (uint32_t)v;
			app_cmd = end + 1;
			break;
		}
		case 'w':
		case 'e':
		case 'C': {
			char *end;
			long v = strtol(optarg, &end, 10);
			long lo = o == 'w' ? 10 : 100, hi = o == 'w' ? 60000 : 600000;
			const char *name = o == 'w' ? "wait" : o == 'e' ? "end-wait" : "challenge-wait";
			if (*optarg == 0 || *end || v < lo || v > hi) {
				fprintf(stderr, "metaroce-conform: --%s %s: expected %ld-%ld ms\n",
					name, optarg, lo, hi);
				return 2;
			}
			if (o == 'w')
				wait_ms = (unsigned)v;
			else if (o == 'e')
				end_wait_ms = (unsigned)v;
			else
				chal_wait_ms = (unsigned)v;
			break;
		}
		case 'S':
		case 'R': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 16);
			if (*optarg == 0 || *end || v > 0xffffffffu) {
				fprintf(stderr, "metaroce-conform: --%s %s: expected a 32-bit hex "
					"id\n", o == 'S' ? "service" : "refused-service", optarg);
				return 2;
			}
			if (o == 'S') {
				svc = (uint32_t)v;
			} else {
				refused = (uint32_t)v;
				has_refused = 1;
			}
			break;
		}
		case 'A': {
			const char *q = optarg;
			for (int i = 0; i < 4; i++) {
				char *end;
				ro[i] = strtoull(q, &end, 16);
				if (end == q || *end != (i < 3 ? ':' : 0) ||
				    (i < 2 && ro[i] > 0xffffffffull)) {
					fprintf(stderr, "metaroce-conform: --ro-region %s: expected "
						"SVC:RKEY:ADDR:LEN in hex\n", optarg);
					return 2;
				}
				q = end + 1;
			}
			has_ro = 1;
			break;
		}
		case 'P': plane2 = optarg; break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	size_t sel[256], nsel = 0;
	for (size_t i = 0; i < cf_ncases && nsel < 256; i++) {
		int want = npat == 0;
		for (unsigned k = 0; k < npat && !want; k++)
			want = fnmatch(patterns[k], cf_cases[i].name, 0) == 0;
		for (unsigned k = 0; k < nexcl && want; k++)
			want = fnmatch(excludes[k], cf_cases[i].name, 0) != 0;
		if (want)
			sel[nsel++] = i;
	}
	if (list) {
		for (size_t i = 0; i < nsel; i++)
			printf("%-26s SPEC %-5s %s\n", cf_cases[sel[i]].name, cf_cases[sel[i]].section,
			       cf_cases[sel[i]].what);
		return 0;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (nsel == 0) {
		fprintf(stderr, "metaroce-conform: no case matches\n");
		return 2;
	}
	const char *target = argv[optind];
	static cf_net net;
	char err[256];
	if (cf_net_open(&net, target, bind_addr, err, sizeof(err)) < 0) {
		fprintf(stderr, "metaroce-conform: %s\n", err);
		return 2;
	}
	net.timeout_ms = wait_ms;
	net.verbose = verbose;
	cf_ctx x = {.n = &net, .status_cmd = status, .trigger_cmd = trig, .stop_cmd = stop,
		    .app_exit_cmd = app_cmd, .app_svc = app_svc,
		    .end_wait_ms = end_wait_ms, .challenge_wait_ms = chal_wait_ms, .svc = svc,
		    .refused_svc = refused, .has_refused_svc = has_refused,
		    .has_ro = has_ro, .ro_svc = (uint32_t)ro[0], .ro_rkey = (uint32_t)ro[1],
		    .ro_addr = ro[2], .ro_len = ro[3]};
	if (plane2) {
		if (cf_parse_addr(plane2, 0, &x.plane2) < 0 ||
		    x.plane2.sa.sa_family != net.target.sa.sa_family) {
			fprintf(stderr, "metaroce-conform: --plane-addr %s: expected an address of "
				"the target's family\n", plane2);
			return 2;
		}
		x.has_plane2 = 1;
	}
	/* With a JSON or JUnit report on stdout the text goes to stderr. */
	FILE *txt = (json && !strcmp(json, "-")) || (junit && !strcmp(junit, "-")) ? stderr : stdout;
	result *res = calloc(nsel, sizeof(*res));
	if (!res)
		return 2;
	unsigned cnt[3] = {0, 0, 0};
	for (size_t i = 0; i < nsel; i++) {
		const cf_case *c = &cf_cases[sel[i]];
		x.msg[0] = 0;
		double t0 = secs_now();
		int s = c->run(&x);
		/* End what the case opened and let its answers settle. */
		cf_reset_all(&net);
		cf_drain(&net, 20, NULL, NULL);
		res[i].c = c;
		res[i].status = s;
		res[i].secs = secs_now() - t0;
		snprintf(res[i].msg, sizeof(res[i].msg), "%s", x.msg);
		cnt[s]++;
		fprintf(txt, "%-4s %-26s SPEC %-5s %s%s%s\n", status_name(s), c->name, c->section,
			c->what, x.msg[0] ? "\n       " : "", x.msg);
		fflush(txt);
	}
	cf_cases_cleanup(&x);
	fprintf(txt, "%u passed, %u failed, %u skipped (target %s)\n", cnt[CF_PASS], cnt[CF_FAIL],
		cnt[CF_SKIP], target);
	if (json) {
		FILE *f = open_out(json);
		if (f)
			write_json(f, target, res, nsel, cnt);
		close_out(f);
	}
	if (junit) {
		FILE *f = open_out(junit);
		if (f)
			write_junit(f, target, res, nsel, cnt);
		close_out(f);
	}
	free(res);
	cf_net_close(&net);
	return cnt[CF_FAIL] ? 1 : 0;
}
