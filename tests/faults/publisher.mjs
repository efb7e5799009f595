// Load generator for tests/faults/fault_check: several authenticated (NIP-42) connections
// publish signed kind-1 events as fast as the relay's OKs allow, and every id that got
// ["OK", id, true, ...] is written to --acked-file. Uses nostr-tools and ws from tests/client.
//
//   node publisher.mjs --url ws://127.0.0.1:PORT --acked-file FILE [options]
//     --mode burst|stream   burst: --events pre-signed events, then stop (default)
//                           stream: keep publishing (reconnecting as needed) until SIGTERM or --max-ms
//     --events N            burst size, split over the connections (default 2000)
//     --connections N       parallel connections, one key each (default 4)
//     --window N            unacknowledged events per connection (default 50)
//     --kill-pid PID --kill-after N   SIGKILL PID once N events are acknowledged (burst)
//     --progress-file FILE  "acked N / rejected N / sent N / last_ack_ms T" lines, refreshed 5x a second
//     --max-ms N            hard stop (default 120000)
//     --mention PUBKEY      kind 9 messages with a `p` tag naming PUBKEY (an agent registered with
//                           an operator listener: each wakes it) instead of kind 1 notes
// Prints one JSON summary line on stdout. Exit 0 unless it could not do its job (no
// connection, AUTH refused, or the requested kill never happened).
import { createRequire } from 'node:module'
import fs from 'node:fs'

const require = createRequire(new URL('../client/package.json', import.meta.url))
const { generateSecretKey, getPublicKey, finalizeEvent } = require('nostr-tools/pure')
const WebSocket = require('ws')

const argv = process.argv.slice(2)
function opt(name, def) {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? argv[i + 1] : def
}
const url = opt('url')
const mode = opt('mode', 'burst')
const totalEvents = Number(opt('events', 2000))
const nConns = Number(opt('connections', 4))
const windowSize = Number(opt('window', 50))
const killPid = opt('kill-pid') ? Number(opt('kill-pid')) : 0
const killAfter = Number(opt('kill-after', 0))
const ackedFile = opt('acked-file')
const progressFile = opt('progress-file')
const maxMs = Number(opt('max-ms', 120000))
const mention = opt('mention')
if (!url || !ackedFile || !['burst', 'stream'].includes(mode)) {
  console.error('usage: publisher.mjs --url URL --acked-file FILE [--mode burst|stream] ...')
  process.exit(2)
}

const log = (m) => console.error(`publisher: ${m}`)
const stats = { sent: 0, acked: 0, rejected: 0, unanswered: 0, connects: 0, authFailures: 0 }
const reasons = new Map()
const acked = []
let lastAckMs = 0
let killed = false
let stopping = false
let seq = 0

function makeEvent(sk, i) {
  return finalizeEvent({
    kind: mention ? 9 : 1,
    created_at: Math.floor(Date.now() / 1000),
    tags: mention ? [['p', mention]] : [['t', 'waggle-durability']],
    content: `durability ${process.pid} ${i} ${Math.random().toString(36).slice(2)}`,
  }, sk)
}

class Conn {
  constructor(index, events) {
    this.index = index
    this.sk = generateSecretKey()
    this.pk = getPublicKey(this.sk)
    this.queue = events ? events(this.sk) : null // burst: pre-signed
    this.inflight = new Map()
    this.done = false
    this.pauseUntil = 0
    this.finished = new Promise((resolve) => { this.resolveFinished = resolve })
  }

  connect() {
    if (stopping) return this.finish()
    stats.connects++
    this.authed = false
    this.authId = null
    const ws = new WebSocket(url)
    this.ws = ws
    ws.on('message', (data) => this.onMessage(data))
    ws.on('error', () => {})
    ws.on('close', () => this.onClose())
  }

  onMessage(data) {
    let m
    try { m = JSON.parse(data) } catch { return }
    if (m[0] === 'AUTH' && typeof m[1] === 'string') {
      const auth = finalizeEvent({
        kind: 22242,
        created_at: Math.floor(Date.now() / 1000),
        tags: [['relay', url], ['challenge', m[1]]],
        content: '',
      }, this.sk)
      this.authId = auth.id
      this.ws.send(JSON.stringify(['AUTH', auth]))
    } else if (m[0] === 'OK') {
      const [, id, ok, reason = ''] = m
      if (id === this.authId) {
        if (!ok) {
          stats.authFailures++
          log(`connection ${this.index}: AUTH refused: ${reason}`)
          this.ws.close()
          return
        }
        this.authed = true
        this.pump()
        return
      }
      if (!this.inflight.delete(id)) return
      if (ok) {
        stats.acked++
        acked.push(id)
        lastAckMs = Date.now()
        if (killPid && !killed && stats.acked >= killAfter) {
          killed = true
          log(`${stats.acked} acknowledged: SIGKILL to relay ${killPid}`)
          try { process.kill(killPid, 'SIGKILL') } catch (e) { log(`kill failed: ${e.message}`) }
        }
      } else {
        stats.rejected++
        const key = String(reason).split(':')[0] || '(empty)'
        if (!reasons.has(key)) log(`first OK false "${key}": ${reason}`)
        reasons.set(key, (reasons.get(key) || 0) + 1)
        // Let an outage pass instead of spinning on rejections.
        this.pauseUntil = Date.now() + 100
      }
      this.pump()
    }
  }

  pump() {
    if (!this.authed || this.ws.readyState !== WebSocket.OPEN) return
    const wait = this.pauseUntil - Date.now()
    if (wait > 0) {
      if (!this.pumpTimer) {
        this.pumpTimer = setTimeout(() => { this.pumpTimer = null; this.pump() }, wait)
      }
      return
    }
    while (!stopping && this.inflight.size < windowSize) {
      let ev
      if (this.queue) {
        ev = this.queue.shift()
        if (!ev) break
      } else {
        ev = makeEvent(this.sk, seq++)
      }
      this.inflight.set(ev.id, ev)
      stats.sent++
      this.ws.send(JSON.stringify(['EVENT', ev]))
    }
    if (this.inflight.size === 0 && (stopping || (this.queue && this.queue.length === 0))) {
      this.ws.close()
    }
  }

  onClose() {
    // Whatever was in flight has no answer: it may or may not be stored, both are allowed.
    stats.unanswered += this.inflight.size
    this.inflight.clear()
    clearTimeout(this.pumpTimer)
    this.pumpTimer = null
    if (mode === 'stream' && !stopping) {
      setTimeout(() => this.connect(), 250)
    } else {
      this.finish()
    }
  }

  stop() {
    if (this.ws && this.ws.readyState === WebSocket.OPEN && this.inflight.size === 0) this.ws.close()
    else if (!this.ws || this.ws.readyState === WebSocket.CLOSED) this.finish()
  }

  finish() {
    if (this.done) return
    this.done = true
    this.resolveFinished()
  }
}

function writeProgress() {
  if (!progressFile) return
  const text = `acked ${stats.acked}\nrejected ${stats.rejected}\nsent ${stats.sent}\nlast_ack_ms ${lastAckMs}\n`
  fs.writeFileSync(`${progressFile}.tmp`, text)
  fs.renameSync(`${progressFile}.tmp`, progressFile)
}

let finishing = false
async function finishAll(conns, why) {
  if (finishing) return
  finishing = true
  stopping = true
  log(`stopping (${why})`)
  for (const c of conns) c.stop()
  // Give in-flight events a moment to be answered, then close what is left.
  const grace = setTimeout(() => {
    for (const c of conns) {
      if (c.ws && c.ws.readyState !== WebSocket.CLOSED) c.ws.terminate()
      else c.finish()
    }
  }, 5000)
  await Promise.all(conns.map((c) => c.finished))
  clearTimeout(grace)
  fs.writeFileSync(ackedFile, acked.length ? acked.join('\n') + '\n' : '')
  writeProgress()
  const summary = { mode, ...stats, killed, rejectReasons: Object.fromEntries(reasons) }
  console.log(JSON.stringify(summary))
  let rc = 0
  if (stats.authFailures > 0) rc = 1
  if (killPid && !killed) {
    log(`the relay was never killed (${stats.acked} acknowledged, needed ${killAfter})`)
    rc = 3
  }
  process.exit(rc)
}

function main() {
  const per = Math.ceil(totalEvents / nConns)
  const conns = []
  for (let i = 0; i < nConns; i++) {
    const count = Math.min(per, totalEvents - i * per)
    const events = mode === 'burst'
      ? (sk) => Array.from({ length: Math.max(count, 0) }, (_, k) => makeEvent(sk, i * per + k))
      : null
    conns.push(new Conn(i, events))
  }
  if (mode === 'burst') log(`signed ${totalEvents} events for ${nConns} connections`)
  for (const c of conns) c.connect()
  const ticker = setInterval(writeProgress, 200)
  ticker.unref()
  setTimeout(() => finishAll(conns, `max ${maxMs} ms reached`), maxMs).unref()
  process.on('SIGTERM', () => finishAll(conns, 'SIGTERM'))
  process.on('SIGINT', () => finishAll(conns, 'SIGINT'))
  Promise.all(conns.map((c) => c.finished)).then(() => finishAll(conns, 'all connections done'))
}

main()
