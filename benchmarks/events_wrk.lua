-- wrk script for benchmarks/events_http.py: POST bodies built from a template, a fresh external_event_id per
-- request ("{id}": prefix, wrk thread number and a sequence), customers cycled through "{c}"; statuses counted.
-- Arguments (after --): ID_PREFIX CUSTOMERS TEMPLATE.  done() prints one JSON line prefixed with "WRK_JSON ".
local threads = {}

function setup(thread)
  thread:set("thread_number", #threads)
  table.insert(threads, thread)
end

function init(args)
  prefix = args[1]
  customers = tonumber(args[2])
  template = args[3]
  sequence = 0
  statuses = {}
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  sequence = sequence + 1
  local id = prefix .. thread_number .. "-" .. sequence
  local body = template:gsub("{id}", id):gsub("{c}", tostring(sequence % customers))
  return wrk.format("POST", nil, nil, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local counts = {}
  local accepted = 0
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      counts[status] = (counts[status] or 0) + count
      if status >= 200 and status < 300 then accepted = accepted + count end
    end
  end
  local parts = {}
  for status, count in pairs(counts) do table.insert(parts, string.format('"%d": %d', status, count)) end
  local seconds = summary.duration / 1e6
  io.write(string.format(
    'WRK_JSON {"requests": %d, "seconds": %.3f, "per_second": %.1f, "p50_ms": %.2f, "p99_ms": %.2f, ' ..
    '"max_ms": %.2f, "statuses": {%s}, "accepted": %d, "socket_errors": %d}\n',
    summary.requests, seconds, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, table.concat(parts, ", "), accepted,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
