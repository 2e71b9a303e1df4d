-- kubesvc-bench passes this file to every wrk run (`wrk -s`): after wrk's own text report,
-- done() prints the figures as one JSON line starting with "wrk-json: ", which is what
-- kubesvc-bench reads, so nothing parses wrk's human-readable units. Times are microseconds.
done = function(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'wrk-json: {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"p50":%d,"p75":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.2f}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(75), latency:percentile(90),
      latency:percentile(99), latency.max, latency.mean))
end
