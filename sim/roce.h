/*
 * RoCEv2 baseline transport for metaroce-sim: what MetaRoCE is compared with.
 *
 * A simplified model of a lossy RoCEv2 reliable connection (no PFC):
 *   - one queue pair per flow, on one plane (the flow's plane, else flow id
 *     modulo the number of planes) and one fixed UDP source port: one ECMP
 *     route for the flow's whole life;
 *   - MTU-sized data packets with a packet sequence number (PSN); WRITE,
 *     WRITE_WITH_IMM and SEND are moved alike;
 *   - the receiver accepts only the expected PSN and drops anything after a
 *     gap (go-back-N, no SACK); it ACKs every ack_every packets and the last
 *     one, ACKs every duplicate, and sends one NAK per gap;
 *   - the sender goes back to the first unacknowledged PSN on a NAK or when
 *     nothing was acknowledged for rto;
 *   - DCQCN-like rate control: the receiver answers CE marks with a CNP (at
 *     most one per cnp_interval per flow); the sender cuts its rate to
 *     rc * (1 - alpha/2), updates alpha by EWMA (gain g), and raises the rate
 *     on a timer (fast recovery, then additive, then hyper increase); it
 *     starts at line rate. The byte counter of DCQCN is left out; timers are
 *     applied lazily when the QP next acts, which is exact for timer-only
 *     DCQCN.
 *   - the NIC serves ready QPs round-robin, one packet at a time, at the
 *     port's line rate.
 * A RoCE QP cannot leave its plane: plane failure stalls it until the plane
 * returns; "steer reroute" moves it to a new source port; drain/restore are
 * ignored.
 */
#ifndef SIM_ROCE_H
#define SIM_ROCE_H

#include "sim.h"

/* UDP destination port of RoCEv2. */
#define SIM_ROCE_PORT 4791

extern const sim_transport_ops sim_roce_ops;
/* roce-pfc: the same transport on a lossless network (PFC in the
 * switches), DCQCN on (transport.roce-pfc.dcqcn: 1) or off (0); its CNPs
 * go in the class pauses do not stop (SIM_PRIO_CTRL). */
extern const sim_transport_ops sim_roce_pfc_ops;

/* QPs and receive sides the host loop of host state hs (sim_host.ts, either
 * transport) has taken up so far: scanned for a packet to send or a
 * deadline, timed out, checked after an event, told of a link or steering
 * event. For tests: it grows with the QPs that have work, not with all the
 * host has. */
uint64_t sim_roce_host_visits(const void *hs);

#endif
