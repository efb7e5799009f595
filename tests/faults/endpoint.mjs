// A delivery endpoint for tests/faults/fault_check (scenario endpoints): the operator listener
// (POST /wake) and the push gateway (POST /push) in one HTTP server on 127.0.0.1, which can be
// stalled and killed. Every request is written to LOG as it arrives and again just before its
// answer is written, synchronously, so a SIGKILL loses no line:
//   recv <path> <delivery id> <event id> <ms>      (the whole body arrived)
//   ok <path> <delivery id> <event id> <ms>        (200 about to be answered)
// "ok" comes first so that a 200 the relay read always has its line: a kill between the line
// and the answer can only make the relay send it again (at least once; fault_check excuses a
// second 200 of a delivery whose first came just before the kill), never hide a delivery. With
// the line after the answer, a kill between them showed a delivered event as lost.
// SIGUSR1 stalls it: requests arriving from then on are read and never answered (the relay's
// timeout ends them). SIGUSR2 ends the stall (held requests stay unanswered).
//
//   node endpoint.mjs LOG PORTFILE [PORT]     (PORT 0 or absent: any; written to PORTFILE)
import { createServer } from 'node:http'
import { appendFileSync, writeFileSync, renameSync } from 'node:fs'

const [logFile, portFile, portArg = '0'] = process.argv.slice(2)
if (!logFile || !portFile) {
  console.error('usage: node endpoint.mjs LOG PORTFILE [PORT]')
  process.exit(2)
}
let stalled = false
const line = (text) => appendFileSync(logFile, `${text} ${Date.now()}\n`)

function eventId(path, body) {
  try {
    const b = JSON.parse(body)
    return (path === '/push' ? b.event_id : b.event && b.event.id) || '-'
  } catch {
    return '-'
  }
}

const server = createServer((req, res) => {
  const chunks = []
  req.on('data', (c) => chunks.push(c))
  req.on('end', () => {
    const path = req.url
    const what = `${path} ${req.headers['x-waggle-delivery-id'] || '-'} ${eventId(path, Buffer.concat(chunks).toString())}`
    line(`recv ${what}`)
    if (stalled) return
    line(`ok ${what}`)
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end('ok\n')
  })
})
server.keepAliveTimeout = 60000
server.listen(Number(portArg), '127.0.0.1', () => {
  writeFileSync(portFile + '.tmp', `${server.address().port}\n`)
  renameSync(portFile + '.tmp', portFile)
})
process.on('SIGUSR1', () => { stalled = true })
process.on('SIGUSR2', () => { stalled = false })
process.on('SIGTERM', () => process.exit(0))
