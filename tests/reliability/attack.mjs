// The reliability instrument's client side (docs/reliability.md): a well-behaved probe, the
// attacks of issue 13, the seeder, and the report. Driven by tests/reliability/run; each mode
// runs in its own process so an attack's event loop never delays the probe's clock.
//
//   node attack.mjs keygen                                  -> "<sk hex> <pk hex>"
//   node attack.mjs seed    --url U --host H --sk SK [--small N] [--big N --big-bytes B]
//   node attack.mjs probe   --url U --host H --sk SK --target ID --seconds N [--warmup S] --out F
//   node attack.mjs attack  NAME --url U --host H --sk SK --seconds N [--delay S]
//                           [--relay-pid P] [--port P] [--big-author PK] [--after S] --out F
//   node attack.mjs report  --dir D --names a,b,... --meta F --out F
//
// Attacks: idle (nothing; the unloaded window), upgrades, count-flood, req-flood,
// sub-memory, no-read, search-flood. The ws and nostr-tools packages come from tests/client.
import { createRequire } from 'node:module'
import { readFileSync, writeFileSync, existsSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import net from 'node:net'
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { randomBytes } from 'node:crypto'

const require = createRequire(new URL('../client/package.json', import.meta.url))
const WebSocket = require('ws')
const { generateSecretKey, getPublicKey, finalizeEvent } = require('nostr-tools/pure')

// --- arguments -------------------------------------------------------------------------------
const argv = process.argv.slice(2)
const mode = argv[0]
const positional = []
const opt = {}
for (let i = 1; i < argv.length; ++i) {
  if (argv[i].startsWith('--')) opt[argv[i].slice(2)] = argv[++i]
  else positional.push(argv[i])
}
const num = (k, d) => (opt[k] === undefined ? d : Number(opt[k]))
const hexToBytes = (h) => Uint8Array.from(Buffer.from(h, 'hex'))
const now = () => performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const log = (m) => process.stderr.write(`[attack ${mode}${positional[0] ? ' ' + positional[0] : ''}] ${m}\n`)

// --- a minimal NIP-01 client over ws -------------------------------------------------------------
// The Host header picks the community; the TCP peer is always the URL's address (127.0.0.1).
class Client {
  constructor(ws) {
    this.ws = ws
    this.subs = new Map()
    this.oks = new Map()
    this.challenge = null
    this.onChallenge = null
    this.notices = []
    this.closed = false
    this.closeCode = null
    ws.on('message', (data) => this.dispatch(data))
    ws.on('close', (code) => {
      this.closed = true
      this.closeCode = code
      for (const [, s] of this.subs) s.onClosed?.('socket closed')
      this.subs.clear()
      for (const [, f] of this.oks) f(false, 'socket closed')
      this.oks.clear()
    })
    ws.on('error', () => {})
  }
  dispatch(data) {
    let m
    try { m = JSON.parse(data) } catch { return }
    if (!Array.isArray(m)) return
    const s = this.subs.get(m[1])
    switch (m[0]) {
      case 'AUTH': this.challenge = m[1]; this.onChallenge?.(); break
      case 'EVENT': s?.onEvent?.(m[2]); break
      case 'EOSE': s?.onEose?.(); break
      case 'COUNT': s?.onCount?.(m[2]); break
      case 'CLOSED': this.subs.delete(m[1]); s?.onClosed?.(m[2]); break
      case 'OK': { const f = this.oks.get(m[1]); this.oks.delete(m[1]); f?.(m[2], m[3]); break }
      case 'NOTICE': this.notices.push(m[1]); break
    }
  }
  send(frame) {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return false
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame))
    return true
  }
  close() { try { this.ws.terminate() } catch {} }
}

// The address this process stands for (run gives the probe, the attacker and
// the seeder different ones): the relay trusts 127.0.0.1 as a proxy, so
// per-address limits tell them apart as they would real clients.
function xff(addr) {
  const a = addr || process.env.WAGGLE_XFF
  return a ? { 'X-Forwarded-For': a } : {}
}
// The address of the i-th connection of a many-connection attack: with --spread N (the
// default for sub-memory and no-read is one address per connection) the attacker stands for
// N different hosts, as a botnet would, so that per-address limits do not hide the attack.
function spreadAddress(i) {
  const n = num('spread', 0)
  return n > 0 ? `198.51.100.${(i % n) % 250 + 1}` : undefined
}

function open(url, host, { timeoutMs = 10000, address } = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { Host: host, ...xff(address) }, perMessageDeflate: false,
      handshakeTimeout: timeoutMs })
    let done = false
    const finish = (err, v) => { if (done) return; done = true; err ? reject(err) : resolve(v) }
    ws.on('open', () => finish(null, new Client(ws)))
    ws.on('unexpected-response', (_req, res) => {
      finish(Object.assign(new Error(`http ${res.statusCode}`), { why: `http ${res.statusCode}` }))
      ws.terminate()
    })
    ws.on('error', (e) => finish(Object.assign(e, { why: e.code || e.message })))
    ws.on('close', () => finish(Object.assign(new Error('closed during handshake'), { why: 'closed' })))
  })
}

// NIP-42: waits for the challenge, answers it with a kind 22242 for this host.
async function authenticate(c, sk, relayUrl, timeoutMs = 10000) {
  if (!c.challenge) {
    await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(Object.assign(new Error('no AUTH challenge'), { why: 'no challenge' })), timeoutMs)
      c.onChallenge = () => { clearTimeout(t); resolve() }
    })
  }
  const ev = finalizeEvent({ kind: 22242, created_at: Math.floor(Date.now() / 1000),
    tags: [['relay', relayUrl], ['challenge', c.challenge]], content: '' }, hexToBytes(sk))
  const [ok, msg] = await new Promise((resolve) => {
    const t = setTimeout(() => resolve([false, 'timeout']), timeoutMs)
    c.oks.set(ev.id, (a, b) => { clearTimeout(t); resolve([a, b]) })
    c.send(['AUTH', ev])
  })
  if (!ok) throw Object.assign(new Error(`AUTH refused: ${msg}`), { why: `auth: ${msg}` })
}

const hostHeader = () => `${opt.host}:${opt.port || new URL(opt.url).port}`
const relayUrl = () => `ws://${hostHeader()}`

async function connectAuthed(timeoutMs = 10000, address) {
  const c = await open(opt.url, hostHeader(), { timeoutMs, address })
  try {
    await authenticate(c, opt.sk, relayUrl(), timeoutMs)
  } catch (e) { c.close(); throw e }
  return c
}

// --- relay-side readings ---------------------------------------------------------------------------
function rssKb(pid) {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) : null
  } catch { return null }
}

// Kernel socket memory on the relay's port: the relay's send queues (skmem w = wmem_queued,
// t = wmem_alloc) and the clients' receive queues (r), from `ss -tmn`.
function socketMemory(port) {
  const out = { relay_sockets: 0, relay_wmem_queued: 0, relay_wmem_alloc: 0, client_rmem: 0 }
  let text
  try { text = execFileSync('ss', ['-tmnH', 'state', 'established'], { encoding: 'utf8', maxBuffer: 256 << 20 }) } catch { return null }
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; ++i) {
    const l = lines[i]
    const sk = /skmem:\(([^)]*)\)/.exec(l) || /skmem:\(([^)]*)\)/.exec(lines[i + 1] || '')
    const cols = l.trim().split(/\s+/)
    if (cols.length < 4 || !sk) continue
    const local = cols[2], peer = cols[3]
    const field = (k) => Number((new RegExp(`(?:^|,)${k}(\\d+)`).exec(sk[1]) || [0, 0])[1])
    if (local.endsWith(`:${port}`)) {
      out.relay_sockets++
      out.relay_wmem_queued += field('w')
      out.relay_wmem_alloc += field('t')
    } else if (peer.endsWith(`:${port}`)) {
      out.client_rmem += field('r')
    }
  }
  return out
}

function sampler(pid, port, everyMs = 250) {
  const samples = []
  const take = () => samples.push({ t: Date.now(), rss_kb: rssKb(pid) })
  take()
  const timer = setInterval(take, everyMs)
  return {
    samples,
    stop() { clearInterval(timer); take() },
    peakKb() { return Math.max(0, ...samples.map((s) => s.rss_kb || 0)) },
    socketMemory: () => (port ? socketMemory(port) : null),
  }
}

// The relay's refusal counters (waggle_refusals_total{reason}) at the end of a window: the
// fixed code has one per limit; the base code has none.
function metrics(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/metrics', headers: { Host: `127.0.0.1:${port}` },
      timeout: 5000 }, (r) => {
      let body = ''
      r.on('data', (d) => { body += d })
      r.on('end', () => {
        const got = {}
        for (const m of body.matchAll(/^waggle_refusals_total\{reason="([^"]+)"\}\s+(\d+)/gm))
          if (Number(m[2]) > 0) got[m[1]] = Number(m[2])
        resolve(got)
      })
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', (e) => resolve({ unreachable: e.code || e.message }))
  })
}

const prefixOf = (reason) => (typeof reason === 'string' && reason.includes(':') ? reason.slice(0, reason.indexOf(':') + 1) : String(reason))
const bump = (o, k, n = 1) => { o[k] = (o[k] || 0) + n }

// --- keygen / seed -----------------------------------------------------------------------------
async function keygen() {
  const sk = generateSecretKey()
  console.log(`${Buffer.from(sk).toString('hex')} ${getPublicKey(sk)}`)
}

// Publishes kind 1 notes (up to 256 awaiting OK); prints the ids as JSON {small:[…], big:[…]}.
async function seed() {
  const c = await connectAuthed()
  const sk = hexToBytes(opt.sk)
  const out = { small: [], big: [] }
  const jobs = []
  for (let i = 0; i < num('small', 0); ++i) jobs.push(['small', `seed note ${i} ${randomBytes(8).toString('hex')}`])
  const big = 'x'.repeat(num('big-bytes', 8192))
  for (let i = 0; i < num('big', 0); ++i) jobs.push(['big', `${randomBytes(8).toString('hex')} ${big}`])
  const bigSk = opt['big-sk'] ? hexToBytes(opt['big-sk']) : sk
  let next = 0, inflight = 0, failed = 0
  const created = Math.floor(Date.now() / 1000) - 600
  await new Promise((resolve, reject) => {
    const pump = () => {
      while (inflight < 256 && next < jobs.length) {
        const [kind, content] = jobs[next]
        const ev = finalizeEvent({ kind: 1, created_at: created + Math.floor(next / 10), tags: [], content },
          kind === 'big' ? bigSk : sk)
        ++next; ++inflight
        c.oks.set(ev.id, (ok, msg) => {
          --inflight
          if (ok) out[kind].push(ev.id)
          else if (++failed > 10) return reject(new Error(`seed: too many refusals, last: ${msg}`))
          if (next >= jobs.length && inflight === 0) resolve()
          else pump()
        })
        c.send(['EVENT', ev])
      }
      if (jobs.length === 0) resolve()
    }
    pump()
  })
  c.close()
  if (failed) log(`${failed} events refused`)
  console.log(JSON.stringify(out))
}

// --- the probe -----------------------------------------------------------------------------------
// A member of the probe community on one long-lived connection: every 250 ms a one-id REQ for a
// stored event, timed to its EOSE (with the event). Open loop: a slow answer does not delay
// the next REQ. A CLOSED, a missing event, a timeout or no connection are failures, counted
// at the timeout's value. Every 2 s it also checks what a newcomer gets: GET /healthz, and a
// fresh connection + AUTH + the same REQ.
async function probe() {
  const timeoutMs = num('timeout-ms', 10000)
  const everyMs = num('every-ms', 250)
  const warmEnd = Date.now() + num('warmup', 3) * 1000
  const end = warmEnd + num('seconds', 30) * 1000
  const target = opt.target
  const res = { timeout_ms: timeoutMs, every_ms: everyMs, samples: [], fresh: [], healthz: [] }
  let client = null, connecting = false, seq = 0
  const pending = new Set()

  const ensure = () => {
    if ((client && !client.closed) || connecting) return
    connecting = true
    connectAuthed(timeoutMs).then((c) => { client = c }, () => { client = null })
      .finally(() => { connecting = false })
  }
  ensure()

  const oneReq = (c, onDone) => {
    const sub = `p${seq++}`
    const t0 = now()
    let got = false, done = false
    const finish = (why) => {
      if (done) return
      done = true
      clearTimeout(timer)
      c.subs.delete(sub)
      if (why !== 'closed' && why !== 'socket closed') c.send(['CLOSE', sub])
      onDone(why, now() - t0)
    }
    const timer = setTimeout(() => finish('timeout'), timeoutMs)
    c.subs.set(sub, {
      onEvent: (ev) => { if (ev && ev.id === target) got = true },
      onEose: () => finish(got ? 'ok' : 'missing'),
      onClosed: (reason) => finish(reason === 'socket closed' ? reason : `closed: ${reason}`),
    })
    if (!c.send(['REQ', sub, { ids: [target] }])) finish('socket closed')
  }

  const slot = () => {
    const t = Date.now()
    if (t >= end) return
    const measured = t >= warmEnd
    const record = (why, ms) => {
      if (measured) res.samples.push({ t, ms: why === 'ok' ? ms : timeoutMs, ok: why === 'ok', why })
    }
    if (!client || client.closed) { record('disconnected', 0); ensure(); return }
    const p = new Promise((resolve) => oneReq(client, (why, ms) => { record(why, ms); resolve() }))
    pending.add(p); p.finally(() => pending.delete(p))
  }

  const newcomer = async () => {
    const t = Date.now()
    if (t < warmEnd || t >= end) return
    res.healthz.push(await healthz(t))
    const t0 = now()
    let why
    try {
      const c = await connectAuthed(timeoutMs)
      why = await new Promise((resolve) => oneReq(c, (w) => resolve(w)))
      c.close()
    } catch (e) { why = e.why || e.message }
    res.fresh.push({ t, ms: why === 'ok' ? now() - t0 : timeoutMs, ok: why === 'ok', why })
  }

  const healthz = (t) => new Promise((resolve) => {
    const t0 = now()
    const req = http.get({ host: '127.0.0.1', port: new URL(opt.url).port, path: '/healthz',
      headers: { Host: hostHeader(), ...xff() }, timeout: 5000 }, (r) => {
      let body = ''
      r.on('data', (d) => { body += d })
      r.on('end', () => resolve({ t, ok: r.statusCode === 200, why: `${r.statusCode} ${body.trim()}`.slice(0, 60), ms: now() - t0 }))
    })
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })))
    req.on('error', (e) => resolve({ t, ok: false, why: e.code || e.message, ms: now() - t0 }))
  })

  const slots = setInterval(slot, everyMs)
  const fresh = setInterval(() => { newcomer() }, 2000)
  while (Date.now() < end) await sleep(100)
  clearInterval(slots); clearInterval(fresh)
  await Promise.race([Promise.all([...pending]), sleep(timeoutMs + 1000)])
  await sleep(200)
  client?.close()
  writeFileSync(opt.out, JSON.stringify(res))
  process.exit(0)
}

// --- attacks -------------------------------------------------------------------------------------
// Each runs for --seconds after --delay (the probe's warm-up), then stops and cleans up; it
// returns what the attacker saw. The RSS sampler runs for every attack.

// a. 10,000 WebSocket upgrades from one address, never AUTHing (ws answers pings itself), held
// open; then 1,000 idle TCP sockets that never send a byte.
async function upgrades(ctx) {
  const n = num('upgrades', 10000), idle = num('idle-tcp', 1000), par = num('parallel', 200)
  const seen = { attempted: n, accepted: 0, refused: {}, closed_by_relay: 0, idle_tcp: idle,
    idle_tcp_connected: 0, idle_tcp_closed_by_relay: 0 }
  const socks = []
  const t0 = now()
  let next = 0
  const worker = async () => {
    while (next < n && !ctx.over()) {
      ++next
      try {
        const c = await open(opt.url, hostHeader(), { timeoutMs: 10000 })
        seen.accepted++
        c.ws.on('close', () => { if (!ctx.stopping) seen.closed_by_relay++ })
        socks.push(c)
      } catch (e) { bump(seen.refused, e.why || e.message) }
    }
  }
  await Promise.all(Array.from({ length: par }, worker))
  seen.upgrade_seconds = +((now() - t0) / 1000).toFixed(1)
  const tcp = []
  for (let i = 0; i < idle && !ctx.over(); ++i) {
    const s = net.connect(Number(new URL(opt.url).port), '127.0.0.1')
    s.on('connect', () => seen.idle_tcp_connected++)
    s.on('close', () => { if (!ctx.stopping) seen.idle_tcp_closed_by_relay++ })
    s.on('error', () => {})
    tcp.push(s)
    if (i % 100 === 99) await sleep(10)
  }
  await ctx.untilOver()
  seen.still_open_at_end = socks.filter((c) => !c.closed).length
  ctx.stopping = true
  for (const c of socks) c.close()
  for (const s of tcp) s.destroy()
  return seen
}

// b. One authenticated connection sends 1,500 ["COUNT","c<i>",{}] at once; again once all are
// answered, for the window.
async function countFlood(ctx) {
  const per = num('frames', 1500)
  const seen = { rounds: 0, sent: 0, counts: 0, closed: {}, unanswered: 0, round_seconds: [] }
  let c = await connectAuthed()
  while (!ctx.over()) {
    if (c.closed) { bump(seen.closed, 'socket closed'); c = await connectAuthed().catch(() => null); if (!c) { await sleep(500); continue } }
    const t0 = now()
    let left = per
    const allDone = new Promise((resolve) => {
      for (let i = 0; i < per; ++i) {
        const sub = `c${i}`
        const done = () => { if (--left === 0) resolve() }
        c.subs.set(sub, { onCount: () => { seen.counts++; c.subs.delete(sub); done() },
          onClosed: (r) => { if (!ctx.stopping) bump(seen.closed, prefixOf(r)); done() } })
      }
      for (let i = 0; i < per; ++i) c.send(`["COUNT","c${i}",{}]`)
      seen.sent += per
    })
    await Promise.race([allDone, ctx.untilOver()])
    seen.rounds++
    if (left === 0) seen.round_seconds.push(+((now() - t0) / 1000).toFixed(2))
    else seen.unanswered += left
  }
  seen.notices = c?.notices.slice(0, 5)
  ctx.stopping = true
  c?.close()
  return seen
}

// c. 600 REQs on one subscription id (each replaces the last), again once the last one's EOSE
// (or CLOSED) arrives.
async function reqFlood(ctx) {
  const per = num('frames', 600)
  const seen = { rounds: 0, sent: 0, eose: 0, events: 0, closed: {}, round_seconds: [] }
  let c = await connectAuthed()
  const frame = JSON.stringify(['REQ', 's', { kinds: [1], limit: 500 }])
  while (!ctx.over()) {
    if (c.closed) { bump(seen.closed, 'socket closed'); c = await connectAuthed().catch(() => null); if (!c) { await sleep(500); continue } }
    const t0 = now()
    let answered = false
    const done = new Promise((resolve) => {
      c.subs.set('s', { onEvent: () => seen.events++, onEose: () => { seen.eose++; answered = true; resolve() },
        onClosed: (r) => { bump(seen.closed, prefixOf(r)); answered = true; resolve() } })
    })
    for (let i = 0; i < per; ++i) c.send(frame)
    seen.sent += per
    await Promise.race([done, ctx.untilOver()])
    seen.rounds++
    if (answered) seen.round_seconds.push(+((now() - t0) / 1000).toFixed(2))
    c.send(['CLOSE', 's'])
  }
  seen.notices = c?.notices.slice(0, 5)
  c?.close()
  return seen
}

// d. 10 connections, each 64 subscriptions x 10 filters x 500 values: short random #t values,
// so a REQ (~35 KB) stays under the 64 KiB frame limit (64-hex ids would fit only one such
// filter per frame). Held for the window, then closed; RSS is read 10 s and 30 s later.
async function subMemory(ctx) {
  const conns = num('connections', 10), subs = num('subs', 64), filters = num('filters', 10), values = num('values', 500)
  const seen = { connections: 0, reqs_sent: 0, bytes_sent: 0, eose: 0, closed: {}, refused: {} }
  const cs = []
  const word = () => randomBytes(3).toString('base64url').slice(0, 4)
  await Promise.all(Array.from({ length: conns }, async (_, i) => {
    let c
    try { c = await connectAuthed(10000, spreadAddress(i)) } catch (e) { bump(seen.refused, e.why || e.message); return }
    seen.connections++
    cs.push(c)
    for (let s = 0; s < subs && !ctx.over(); ++s) {
      const fs = Array.from({ length: filters }, () => ({ '#t': Array.from({ length: values }, word) }))
      const frame = JSON.stringify(['REQ', `m${s}`, ...fs])
      c.subs.set(`m${s}`, { onEose: () => seen.eose++, onClosed: (r) => { if (!ctx.stopping) bump(seen.closed, prefixOf(r)) } })
      c.send(frame)
      seen.reqs_sent++
      seen.bytes_sent += frame.length
      // Let the socket drain between frames so the 2 MB per connection is really sent.
      while (c.ws.bufferedAmount > 1 << 20) await sleep(5)
    }
  }))
  await ctx.untilOver()
  seen.open_at_end = cs.filter((c) => !c.closed).length
  ctx.stopping = true
  for (const c of cs) c.close()
  return seen
}

// e. 100 clients each ask for a big history (500 notes of ~8 KB), then stop reading (the
// socket paused, so the kernel buffers fill) and send one tiny frame every 20 s.
async function noRead(ctx) {
  const n = num('clients', 100)
  const seen = { clients: n, connected: 0, refused: {}, socket_memory_during: null }
  const cs = []
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    let c
    try { c = await connectAuthed(10000, spreadAddress(i)) } catch (e) { bump(seen.refused, e.why || e.message); return }
    seen.connected++
    cs.push(c)
    c.send(['REQ', `big${i}`, { authors: [opt['big-author']], limit: 500 }])
    c.ws.pause()
  }))
  const tick = setInterval(() => { for (const c of cs) c.send(['CLOSE', 'nothing']) }, 20000)
  // Let the relay fill the buffers, then read the kernel's view once the window is half over.
  await Promise.race([sleep(num('seconds', 30) * 500), ctx.untilOver()])
  seen.socket_memory_during = socketMemory(ctx.port)
  await ctx.untilOver()
  clearInterval(tick)
  seen.socket_memory_end = socketMemory(ctx.port)
  ctx.stopping = true
  for (const c of cs) c.close()
  return seen
}

// f. 50 NIP-50 searches in flight for the commonest word of the community (run seeds it into
// most of its events), over 7 connections (8 reads in flight each at most): each search is
// sent again as soon as its EOSE arrives, or 50 ms after a CLOSED.
async function searchFlood(ctx) {
  const total = num('searches', 50), conns = num('connections', 7), word = opt.word || 'waggle'
  const seen = { sent: 0, eose: 0, events: 0, closed: {}, search_seconds: [] }
  const cs = await Promise.all(Array.from({ length: conns }, () => connectAuthed().catch(() => null)))
  const live = cs.filter(Boolean)
  if (!live.length) throw new Error('no attacker connection')
  const one = (c, sub) => {
    if (ctx.over() || c.closed) return
    const t0 = now()
    c.subs.set(sub, {
      onEvent: () => seen.events++,
      onEose: () => { seen.eose++; seen.search_seconds.push(+((now() - t0) / 1000).toFixed(3)); c.subs.delete(sub); c.send(['CLOSE', sub]); one(c, sub) },
      onClosed: (r) => { if (!ctx.over()) bump(seen.closed, prefixOf(r)); setTimeout(() => one(c, sub), 50) },
    })
    c.send(['REQ', sub, { kinds: [1], search: word, limit: 100 }])
    seen.sent++
  }
  for (let i = 0; i < total; ++i) one(live[i % live.length], `q${i}`)
  await ctx.untilOver()
  seen.connections = live.length
  for (const c of live) c.close()
  return seen
}

async function idle(ctx) { await ctx.untilOver(); return {} }

const attacks = { idle, upgrades, 'count-flood': countFlood, 'req-flood': reqFlood, 'sub-memory': subMemory, 'no-read': noRead, 'search-flood': searchFlood }

async function attack() {
  const name = positional[0]
  const fn = attacks[name]
  if (!fn) throw new Error(`unknown attack ${name} (one of ${Object.keys(attacks).join(', ')})`)
  const pid = Number(opt['relay-pid'] || 0)
  const port = Number(opt.port || new URL(opt.url).port)
  await sleep(num('delay', 3) * 1000)
  const s = pid ? sampler(pid, port) : null
  const before = pid ? rssKb(pid) : null
  const end = Date.now() + num('seconds', 30) * 1000
  let overResolve
  const overP = new Promise((r) => { overResolve = r })
  const overTimer = setTimeout(() => overResolve(), end - Date.now())
  const ctx = { port, stopping: false, over: () => Date.now() >= end, untilOver: () => overP }
  const t0 = Date.now()
  let seen, error = null
  try { seen = await fn(ctx) } catch (e) { error = e.why || e.message; log(`attack failed: ${e.stack || e}`) }
  clearTimeout(overTimer)
  const refusals = await metrics(port)
  const out = { name, refusals, seconds: (Date.now() - t0) / 1000, error, seen, rss_kb: { before } }
  if (s) {
    s.stop()
    out.rss_kb.peak = s.peakKb()
    out.rss_kb.end = rssKb(pid)
    const after = num('after', 0)
    if (after > 0) {
      await sleep(10000)
      out.rss_kb.after_10s = rssKb(pid)
      out.socket_memory_after_10s = socketMemory(port)
      if (after > 10) { await sleep((after - 10) * 1000); out.rss_kb.after_30s = rssKb(pid) }
    }
    out.relay_alive = rssKb(pid) !== null
  }
  writeFileSync(opt.out, JSON.stringify(out))
  process.exit(0)
}

// --- report ----------------------------------------------------------------------------------
function pct(values, p) {
  if (!values.length) return null
  const v = [...values].sort((a, b) => a - b)
  return v[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)]
}
const fmt = (ms) => (ms === null || ms === undefined ? '–' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`)
const mb = (kb) => (kb === null || kb === undefined ? '–' : `${(kb / 1024).toFixed(0)} MB`)

function summarize(samples) {
  const ms = samples.map((s) => s.ms)
  const why = {}
  for (const s of samples) if (!s.ok) bump(why, s.why)
  return { n: samples.length, errors: samples.filter((s) => !s.ok).length, error_kinds: why,
    p50_ms: pct(ms, 50), p99_ms: pct(ms, 99), max_ms: ms.length ? Math.max(...ms) : null }
}

function attackerLine(name, a) {
  if (!a) return 'no result (attack process failed)'
  if (a.error && !a.seen) return `attack error: ${a.error}`
  const s = a.seen || {}
  const kinds = (o) => Object.entries(o || {}).map(([k, v]) => `${v}× ${k}`).join(', ') || 'none'
  switch (name) {
    case 'upgrades': return `${s.accepted}/${s.attempted} upgrades accepted in ${s.upgrade_seconds} s (refused: ${kinds(s.refused)}); ${s.still_open_at_end} still open at the end, ${s.closed_by_relay} closed by the relay; idle TCP ${s.idle_tcp_connected}/${s.idle_tcp} connected, ${s.idle_tcp_closed_by_relay} closed by the relay`
    case 'count-flood': return `${s.rounds} rounds, ${s.sent} COUNTs sent, ${s.counts} answered, CLOSED: ${kinds(s.closed)}, ${s.unanswered} unanswered at the end; round time median ${pct(s.round_seconds || [], 50) ?? '–'} s`
    case 'req-flood': return `${s.rounds} rounds of ${s.sent / Math.max(1, s.rounds)} REQs, ${s.eose} EOSE, ${s.events} events, CLOSED: ${kinds(s.closed)}; last REQ to its EOSE median ${pct(s.round_seconds || [], 50) ?? '–'} s, max ${s.round_seconds?.length ? Math.max(...s.round_seconds) : '–'} s`
    case 'sub-memory': return `${s.connections} connections, ${s.reqs_sent} REQs (${(s.bytes_sent / 1e6).toFixed(1)} MB sent), ${s.eose} EOSE, CLOSED: ${kinds(s.closed)}, ${s.open_at_end} open at the end`
    case 'no-read': {
      const m = s.socket_memory_during || {}, e = s.socket_memory_end || {}
      return `${s.connected}/${s.clients} connected; mid-window: ${m.relay_sockets} relay sockets, relay send queues ${mb((m.relay_wmem_queued || 0) / 1024)}, client receive queues ${mb((m.client_rmem || 0) / 1024)}; at the end: ${e.relay_sockets} relay sockets, send queues ${mb((e.relay_wmem_queued || 0) / 1024)}, receive queues ${mb((e.client_rmem || 0) / 1024)}`
    }
    case 'search-flood': return `${s.connections} connections, ${s.sent} searches sent, ${s.eose} answered (EOSE), ${s.events} events, CLOSED: ${kinds(s.closed)}; search to EOSE median ${pct(s.search_seconds || [], 50) ?? '–'} s, p99 ${pct(s.search_seconds || [], 99) ?? '–'} s`
    default: return ''
  }
}

async function report() {
  const dir = opt.dir
  const names = opt.names.split(',')
  const meta = existsSync(opt.meta) ? JSON.parse(readFileSync(opt.meta, 'utf8')) : {}
  const read = (f) => (existsSync(`${dir}/${f}`) ? JSON.parse(readFileSync(`${dir}/${f}`, 'utf8')) : null)
  const out = { meta, windows: {} }
  for (const name of names) {
    const p = read(`probe-${name}.json`), a = read(`attack-${name}.json`)
    const relay = read(`relay-${name}.json`) || {}
    out.windows[name] = { probe: p ? summarize(p.samples) : null, newcomer: p ? summarize(p.fresh) : null,
      healthz: p ? { n: p.healthz.length, ok: p.healthz.filter((h) => h.ok).length,
        failures: p.healthz.filter((h) => !h.ok).reduce((o, h) => (bump(o, h.why), o), {}) } : null,
      attack: a, attacker: attackerLine(name, a), relay }
  }
  const base = out.windows.idle?.probe?.p99_ms
  for (const name of names) {
    const w = out.windows[name]
    w.p99_ratio = base && w.probe?.p99_ms != null ? +(w.probe.p99_ms / base).toFixed(2) : null
  }
  writeFileSync(opt.out, JSON.stringify(out, null, 2))
  const rows = []
  rows.push('| window | probe n | p50 | p99 | max | errors | p99 / unloaded p99 | newcomer ok | /healthz ok | RSS before → peak → end (→ +10 s → +30 s) | relay |')
  rows.push('|---|---|---|---|---|---|---|---|---|---|---|')
  for (const name of names) {
    const w = out.windows[name], p = w.probe || {}, r = w.attack?.rss_kb || {}
    const rss = [r.before, r.peak, r.end, r.after_10s, r.after_30s].filter((x) => x !== undefined).map(mb).join(' → ')
    const errs = p.errors ? `${p.errors} (${Object.entries(p.error_kinds).map(([k, v]) => `${v}× ${k}`).join(', ')})` : '0'
    rows.push(`| ${name === 'idle' ? 'unloaded' : name} | ${p.n ?? '–'} | ${fmt(p.p50_ms)} | ${fmt(p.p99_ms)} | ${fmt(p.max_ms)} | ${errs} | ${w.p99_ratio ?? '–'}× | ${w.newcomer ? `${w.newcomer.n - w.newcomer.errors}/${w.newcomer.n}` : '–'} | ${w.healthz ? `${w.healthz.ok}/${w.healthz.n}` : '–'} | ${rss} | ${w.relay.status || 'ok'} |`)
  }
  rows.push('')
  rows.push('What the attacker saw:')
  rows.push('')
  for (const name of names) {
    if (name === 'idle') continue
    const r = out.windows[name].attack?.refusals
    const shown = r && Object.keys(r).length ? `; relay refusals: ${Object.entries(r).map(([k, v]) => `${k} ${v}`).join(', ')}` : ''
    rows.push(`- **${name}**: ${out.windows[name].attacker}${shown}`)
  }
  const fails = names.filter((n) => out.windows[n].newcomer?.errors || out.windows[n].healthz?.n !== out.windows[n].healthz?.ok)
  if (fails.length) {
    rows.push('')
    rows.push('Newcomer and /healthz failures:')
    rows.push('')
    for (const name of fails) {
      const w = out.windows[name]
      rows.push(`- **${name}**: newcomer ${JSON.stringify(w.newcomer.error_kinds)}; /healthz ${JSON.stringify(w.healthz.failures)}`)
    }
  }
  console.log(rows.join('\n'))
}

const modes = { keygen, seed, probe, attack, report }
if (!modes[mode]) {
  console.error('usage: attack.mjs keygen|seed|probe|attack NAME|report [--options]')
  process.exit(2)
}
modes[mode]().catch((e) => { console.error(`attack.mjs ${mode}: ${e.stack || e}`); process.exit(1) })
