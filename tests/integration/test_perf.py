"""perf between two daemons: at least 1 GiB, every message verified."""
import mrtest

GIB = 1 << 30
p = mrtest.Pair("perf")
r = p.a.ok("perf", {"peer": p.b.peer(), "seconds": 240, "bytes": GIB}, timeout=300)
print("perf: %.3f Gbit/s, %d bytes in %.2f s, %d retransmitted packets" % (
    r["goodput_gbps"], r["bytes"], r["seconds"], r["conn"]["stats"]["retx_pkts"]))
mrtest.check(r["bytes"] >= GIB, "at least 1 GiB transferred")
mrtest.check(r["verify_errors"] == 0, "no verification errors")
mrtest.check(r["verified_bytes"] == r["bytes"] and r["verified"], "every byte verified")
mrtest.check(len(r["paths"]) >= 2, "per-path statistics reported")
mrtest.check(sum(x["tx_pkts"] for x in r["paths"]) > 0, "paths carried packets")
p.close()
