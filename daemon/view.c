/* JSON views of connections and their paths (view.h). */
#include "view.h"

#include <inttypes.h>
#include <stdio.h>

#include "datapath.h"
#include "mrd.h"
#include "peer.h"

json_t *mrd_json_hex32(uint32_t v)
{
	char b[16];
	snprintf(b, sizeof(b), "%08" PRIx32, v);
	return json_string(b);
}

json_t *mrd_json_hex64(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "%016" PRIx64, v);
	return json_string(b);
}

json_t *mrd_json_addr(const mrd_sockaddr *a)
{
	char b[64];
	return json_string(mrd_sockaddr_str(a, b, sizeof(b)));
}

json_t *mrd_json_u64(uint64_t v)
{
	return json_integer((json_int_t)v);
}

double mrd_age_s(uint64_t then, uint64_t now)
{
	return then && now > then ? (double)(now - then) / 1e9 : 0;
}

json_t *mrd_json_conn(const mrd_conn *c)
{
	uint64_t now = uv_hrtime();
	json_t *o = json_object();
	json_object_set_new(o, "id", mrd_json_hex32(c->local_id));
	json_object_set_new(o, "peer_id", mrd_json_hex32(c->peer_id));
	json_object_set_new(o, "peer", mrd_json_addr(&c->peer->addr));
	json_object_set_new(o, "role", json_string(c->initiator ? "initiator" : "acceptor"));
	json_object_set_new(o, "state", json_string(mrd_conn_state_name(c)));
	json_object_set_new(o, "service", mrd_json_hex32(c->service_id));
	json_object_set_new(o, "mtu", mrd_json_u64(c->mtu));
	json_object_set_new(o, "max_streams", mrd_json_u64(c->max_streams));
	json_object_set_new(o, "max_paths", mrd_json_u64(c->max_paths));
	json_object_set_new(o, "plane_pairs", mrd_json_u64(c->npairs));
	json_object_set_new(o, "age_s", json_real(mrd_age_s(c->created_ns, now)));
	/* the handshake's round trip (0: not measured yet) and the initial
	 * retransmission timeout it gave the engine (mrd_rto_initial()) */
	json_object_set_new(o, "handshake_rtt_us", json_real((double)c->hs_rtt_ns / 1e3));
	if (mrd_conn_has_engine(c))
		json_object_set_new(o, "rto_initial_us", json_real((double)c->rto_init_ns / 1e3));
	if (c->end_reason[0])
		json_object_set_new(o, "end_reason", json_string(c->end_reason));
	json_t *drops = json_object();
	for (int i = 1; i < MRD_NERR; i++)
		if (c->drops[i])
			json_object_set_new(drops, mrp_err_name(-i), mrd_json_u64(c->drops[i]));
	json_object_set_new(o, "drops", drops);
	if (mrd_conn_has_engine(c)) {
		json_t *m = json_object();
		json_object_set_new(m, "bytes", mrd_json_u64(c->mem.used));
		json_object_set_new(m, "peak", mrd_json_u64(c->mem.peak));
		json_object_set_new(m, "limit", mrd_json_u64(c->mem.limit));
		json_object_set_new(m, "refused", mrd_json_u64(c->mem.refused));
		if (c->mem.addr) {
			json_object_set_new(m, "address_bytes", mrd_json_u64(c->mem.addr->used));
			json_object_set_new(m, "address_limit", mrd_json_u64(c->mem.addr->limit));
		}
		json_object_set_new(o, "memory", m);
	}
	if (mrd_conn_has_engine(c)) {
		mrp_conn_stats st;
		mrd_conn_get_stats(c, &st);
		json_t *s = json_object();
#define S(f) json_object_set_new(s, #f, mrd_json_u64(st.f))
		S(tx_pkts); S(tx_bytes); S(rx_pkts); S(rx_bytes); S(retx_pkts); S(lost_pkts);
		S(rto_count); S(tlp_count); S(rx_dup_pkts); S(rx_held_pkts);
		S(naks_sent); S(naks_rcvd);
		S(acks_sent); S(acks_rcvd); S(drops_token); S(drops_noconn); S(drops_range);
		S(drops_stale);
		S(paths_opened); S(reports); S(events_dropped); S(qwnd); S(pacing_bps);
		S(rate_hint_bps); S(npaths_active); S(admit_asks); S(admit_grants);
		S(admit_requests); S(planes_proven); S(planes_unproven);
		S(repaths);
#undef S
		json_object_set_new(s, "admit_credit", mrd_json_u64(c->admit_credit));
		json_object_set_new(o, "stats", s);
	}
	return o;
}

json_t *mrd_json_paths(const mrd_conn *c)
{
	json_t *a = json_array();
	if (!mrd_conn_has_engine(c))
		return a;
	const mrd *d = c->d;
	for (unsigned i = 0; i < c->max_paths; i++) {
		mrp_path_info pi;
		if (mrd_conn_path_info(c, i, &pi) < 0)
			continue;
		json_t *o = json_object();
		json_object_set_new(o, "conn", mrd_json_hex32(c->local_id));
		json_object_set_new(o, "id", mrd_json_u64(pi.id));
		json_object_set_new(o, "gen", mrd_json_u64(pi.gen));
		json_object_set_new(o, "plane", mrd_json_u64(pi.plane));
		json_object_set_new(o, "state", json_string(mrp_path_state_name(pi.state)));
		json_object_set_new(o, "sport", mrd_json_u64(pi.sport));
		if (pi.plane < c->npairs) {
			const mrd_pair *pr = &c->pairs[pi.plane];
			mrd_sockaddr l = d->dp->planes[pr->lplane].local;
			if (l.sa.sa_family == AF_INET6)
				l.in6.sin6_port = htons(pi.sport);
			else
				l.in.sin_port = htons(pi.sport);
			json_object_set_new(o, "plane_name",
					    json_string(d->cfg.planes[pr->lplane].name));
			json_object_set_new(o, "local", mrd_json_addr(&l));
			json_object_set_new(o, "remote", mrd_json_addr(&pr->raddr));
		}
		json_object_set_new(o, "cwnd", mrd_json_u64(pi.cwnd));
		json_object_set_new(o, "inflight", mrd_json_u64(pi.inflight));
		json_object_set_new(o, "srtt_us", json_real((double)pi.srtt_ns / 1e3));
		json_object_set_new(o, "min_rtt_us",
				    json_real(pi.min_rtt_ns == UINT64_MAX ? 0 : (double)pi.min_rtt_ns / 1e3));
#define P(f) json_object_set_new(o, #f, mrd_json_u64(pi.f))
		P(tx_pkts); P(tx_bytes); P(retx_pkts); P(lost_pkts); P(acked_pkts); P(ce_pkts);
		P(rx_pkts); P(rx_ce_pkts);
#undef P
		if (pi.rx_plane < c->npairs)
			json_object_set_new(o, "rx_plane_name",
					    json_string(d->cfg.planes[c->pairs[pi.rx_plane].lplane].name));
		json_array_append_new(a, o);
	}
	return a;
}
