/* metaroce-ctl drill plane PLANE [--peer PEER] [--duration D] [--link]
 *                                [--auto-revert D]
 *
 * The drill runs in the daemon; this waits for its report. Ctrl-C asks the
 * daemon to cancel it (the plane is given back and the report, marked
 * cancelled, still comes); a second Ctrl-C leaves at once, which cancels
 * it too (the daemon restores the plane when its requester goes away). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted++;
}

static void print_report(json_t *r)
{
	json_t *tp = json_object_get(r, "tx_gbps"), *perf = json_object_get(r, "perf");
	printf("drill %lld of plane %s (%s%s%s): %s\n",
	       (long long)json_integer_value(json_object_get(r, "id")),
	       json_string_value(json_object_get(r, "plane")),
	       json_string_value(json_object_get(r, "action")),
	       json_is_string(json_object_get(r, "interface")) ? " " : "",
	       json_is_string(json_object_get(r, "interface"))
		       ? json_string_value(json_object_get(r, "interface"))
		       : "",
	       json_is_true(json_object_get(r, "pass")) ? "PASS" : "FAIL");
	const char *reason = json_string_value(json_object_get(r, "reason"));
	if (reason && *reason)
		printf("  note: %s\n", reason);
	json_t *det = json_object_get(r, "detection_ms"), *red = json_object_get(r, "redistribution_ms");
	if (json_is_number(det))
		printf("  detection:       %.3f ms\n", json_number_value(det));
	else
		printf("  detection:       not seen (no path of the plane stopped)\n");
	if (json_is_number(red))
		printf("  redistribution:  %.3f ms (surviving planes >= %.3f Gbit/s)\n",
		       json_number_value(red),
		       json_number_value(json_object_get(r, "redistribution_target_gbps")));
	else
		printf("  redistribution:  not reached (target %.3f Gbit/s)\n",
		       json_number_value(json_object_get(r, "redistribution_target_gbps")));
	printf("  tx Gbit/s:       before %.3f, during %.3f (surviving planes %.3f), after %.3f\n",
	       json_number_value(json_object_get(tp, "before")),
	       json_number_value(json_object_get(tp, "during")),
	       json_number_value(json_object_get(tp, "during_surviving_planes")),
	       json_number_value(json_object_get(tp, "after")));
	printf("  retransmitted %lld, lost %lld packets; plane restored: %s\n",
	       (long long)json_integer_value(json_object_get(r, "retx_pkts")),
	       (long long)json_integer_value(json_object_get(r, "lost_pkts")),
	       json_is_true(json_object_get(r, "restored")) ? "yes" : "NO");
	if (json_is_object(perf) && json_object_get(perf, "error"))
		printf("  perf: %s\n", json_string_value(json_object_get(perf, "error")));
	else if (json_is_object(perf))
		printf("  perf: %lld completions, %lld verified, %lld lost, %lld duplicated, %lld "
		       "verification errors, goodput %.3f Gbit/s\n",
		       (long long)json_integer_value(json_object_get(perf, "completions")),
		       (long long)json_integer_value(json_object_get(perf, "verified_messages")),
		       (long long)json_integer_value(json_object_get(perf, "lost_completions")),
		       (long long)json_integer_value(json_object_get(perf, "duplicated_completions")),
		       (long long)json_integer_value(json_object_get(perf, "verify_errors")),
		       json_number_value(json_object_get(perf, "goodput_gbps")));
}

int cmd_drill_plane(cli *c, int argc, char **argv)
{
	double dur = 5, rev = 0;
	const char *peer = NULL;
	int link = 0, bad = argc < 1 || argv[0][0] == '-';
	for (int i = 1; i < argc && !bad; i++) {
		if (strcmp(argv[i], "--link") == 0)
			link = 1;
		else if (strcmp(argv[i], "--json") == 0)
			c->json = 1;
		else if (i + 1 >= argc)
			bad = 1;
		else if (strcmp(argv[i], "--peer") == 0)
			peer = argv[++i];
		else if (strcmp(argv[i], "--duration") == 0)
			bad = (dur = cli_duration(argv[++i])) <= 0;
		else if (strcmp(argv[i], "--auto-revert") == 0)
			bad = (rev = cli_duration(argv[++i])) <= 0;
		else
			bad = 1;
	}
	if (bad)
		return CLI_USAGE;
	json_t *args = json_pack("{s:s, s:f, s:b}", "plane", argv[0], "duration_s", dur, "link",
				 link);
	if (peer)
		json_object_set_new(args, "peer", json_string(peer));
	if (rev > 0)
		json_object_set_new(args, "auto_revert_s", json_real(rev));
	int fd = cli_open(c);
	if (fd < 0) {
		json_decref(args);
		return CLI_UNREACHABLE;
	}
	struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART: poll returns */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (cli_send(fd, "drill plane", args, 1) < 0) {
		close(fd);
		return CLI_UNREACHABLE;
	}
	/* The drill lasts about 2 s more than the plane is out, plus the perf
	 * run's end. */
	int timeout_ms = (int)((dur + 30) * 1000), sent_cancel = 0, rv;
	json_t *msg = NULL;
	for (;;) {
		rv = cli_recv(fd, timeout_ms, &msg);
		if (rv == CLI_INTERRUPTED || (rv == 0 && interrupted && !sent_cancel)) {
			if (interrupted > 1) {
				fprintf(stderr, "metaroce-ctl: leaving; the daemon gives the plane "
						"back\n");
				close(fd);
				return CLI_FAILED;
			}
			if (!sent_cancel) {
				fprintf(stderr, "metaroce-ctl: cancelling the drill (Ctrl-C again to "
						"leave at once)\n");
				cli_send(fd, "drill cancel", NULL, 2);
				sent_cancel = 1;
				timeout_ms = 10000;
			}
			if (rv == CLI_INTERRUPTED)
				continue;
		}
		if (rv)
			break;
		json_t *jid = json_object_get(msg, "id");
		if (json_integer_value(jid) == 1)
			break;
		json_decref(msg); /* the answer to the cancel */
		msg = NULL;
	}
	close(fd);
	if (rv) {
		if (rv == CLI_TIMEOUT)
			fprintf(stderr, "metaroce-ctl: no report from metarocd in time\n");
		return rv == CLI_TIMEOUT || rv == CLI_INTERRUPTED ? CLI_UNREACHABLE : rv;
	}
	json_t *r;
	if ((rv = cli_result("drill plane", msg, &r)))
		return rv;
	cli_show(c, r, &(cli_view){.text = print_report});
	int pass = json_is_true(json_object_get(r, "pass"));
	json_decref(r);
	return pass ? CLI_OK : CLI_FAILED;
}
