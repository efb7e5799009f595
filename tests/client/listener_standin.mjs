// A stand-in operator listener (docs/delivery.md) for the listener-retry trace (scripts/record-traces,
// the trace-replay stage of scripts/test): an HTTP server on 127.0.0.1 that answers each POST with
// the next of the given statuses (the last one repeats) and lists what it got on GET /seen.
//
//   node listener_standin.mjs FILE [STATUS...]        (default: 503 200)
//
// Once listening it writes "<listener pubkey>=<url>" to FILE, the relay's --operator-listeners entry
// (the listener key is the fixed test key of listener_key.mjs); it runs until it is killed.
import { createServer } from 'node:http'
import { writeFileSync, renameSync } from 'node:fs'
import { listenerPubkey } from './listener_key.mjs'

const file = process.argv[2]
const statuses = process.argv.slice(3).map(Number)
if (!file || statuses.some((s) => !(s >= 100 && s <= 599))) {
  console.error('usage: node listener_standin.mjs FILE [STATUS...]')
  process.exit(2)
}
if (statuses.length === 0) statuses.push(503, 200)

const seen = []
const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/seen') {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(seen))
    return
  }
  let body = ''
  req.on('data', (chunk) => { body += chunk })
  req.on('end', () => {
    const status = statuses[Math.min(seen.length, statuses.length - 1)]
    seen.push({ status, path: req.url, delivery_id: req.headers['x-waggle-delivery-id'] || '', body })
    res.writeHead(status, { 'content-type': 'text/plain' })
    res.end(status < 300 ? 'ok\n' : 'not now\n')
  })
})
server.listen(0, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}/wake`
  // Written whole, then renamed: the script reading it never sees half a line.
  writeFileSync(file + '.tmp', `${listenerPubkey}=${url}\n`)
  renameSync(file + '.tmp', file)
})
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)))
