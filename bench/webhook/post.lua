-- post.lua: wrk script for bench/webhook/load.sh. POSTs the AdmissionReview named by
-- GPUCAP_BENCH_BODY to /mutate and, at the end, prints one summary line that load.sh checks.
wrk.method = "POST"
wrk.path = "/mutate"
wrk.headers["Content-Type"] = "application/json"
if os.getenv("GPUCAP_BENCH_CLOSE") == "1" then
  wrk.headers["Connection"] = "close"
end
local f = assert(io.open(os.getenv("GPUCAP_BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()

done = function(summary, latency, requests)
  local e = summary.errors
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d seconds=%.2f rps=%.0f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f errors=%d non2xx=%d\n",
    summary.requests, seconds, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    e.connect + e.read + e.write + e.timeout, e.status))
end
