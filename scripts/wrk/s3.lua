-- wrk script for S3 requests from presigned URLs (scripts/wrk/presign.py).
--   wrk -t1 -c20 -d12s -s scripts/wrk/s3.lua http://HOST:PORT -- URLS METHOD [SIZE]
-- Each connection takes the URLs in turn, from its own starting point;
-- PUT sends SIZE bytes. Every answer but 2xx counts as an error
-- ("Non-2xx or 3xx responses" in wrk's summary).

local urls, method, body
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  urls = {}
  for line in io.lines(args[1]) do
    urls[#urls + 1] = line
  end
  method = args[2] or "GET"
  if method == "PUT" then
    body = string.rep("x", tonumber(args[3] or "4096"))
  end
  next_url = (id * 7919) % #urls
end

function request()
  next_url = next_url % #urls + 1
  return wrk.format(method, urls[next_url], nil, body)
end

function done(summary, latency, requests)
  io.write(string.format("requests %d, errors %d (status %d), p50 %.2f ms, p99 %.2f ms, %.0f req/s\n",
    summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.requests / (summary.duration / 1e6)))
end
