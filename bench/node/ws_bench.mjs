// A second instrument beside waggle-load: the relay as a Node.js client with the stock `ws`
// package sees it. Issue 33 asks for the ack targets to hold "for any well-written client, not
// only ours"; this is that client. It signs everything before the clock starts (worker threads),
// so what it times is the socket, the relay and the way back.
//
//   node ws_bench.mjs ack    --url ws://127.0.0.1:7777 [--in-flight 1] [--duration 10]
//   node ws_bench.mjs fanout --url ws://127.0.0.1:7777 [--subscribers 100] [--rate 100] [--duration 10]
//
// Options: --host H (Host header, default the URL's), --content-bytes N (200, as waggle-load),
// --events N (signed in advance; default enough for the duration at a generous rate),
// --json FILE (the summary, also printed as one JSON line on stdout).
// Exit 0 when the run was clean (every event acknowledged with OK true; for fanout every
// subscriber got every event once), 1 when not, 2 on a usage or connection error.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import { writeFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import os from 'node:os'
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure'
import WebSocket from 'ws'

const WORDS = ['ship', 'the', 'build', 'review', 'later', 'standup', 'deploy', 'coffee', 'bug']

function filler(bytes, seed) {
  let out = ''
  for (let k = seed; out.length < bytes; k = (k * 7919 + 17) % 1000003)
    out += (out ? ' ' : '') + WORDS[k % WORDS.length]
  return out.slice(0, bytes)
}

function parseArgs(argv) {
  const o = {
    mode: argv[0], url: 'ws://127.0.0.1:7777', host: '', inFlight: 1, duration: 10, rate: 100,
    subscribers: 100, contentBytes: 200, events: 0, json: '',
  }
  const names = {
    '--url': 'url', '--host': 'host', '--in-flight': 'inFlight', '--duration': 'duration',
    '--rate': 'rate', '--subscribers': 'subscribers', '--content-bytes': 'contentBytes',
    '--events': 'events', '--json': 'json',
  }
  for (let i = 1; i < argv.length; i += 2) {
    const key = names[argv[i]]
    if (!key || i + 1 >= argv.length) usage(`unknown or incomplete option ${argv[i]}`)
    o[key] = typeof o[key] === 'number' ? Number(argv[i + 1]) : argv[i + 1]
    if (typeof o[key] === 'number' && !(o[key] >= 0)) usage(`${argv[i]} takes a number`)
  }
  if (o.mode !== 'ack' && o.mode !== 'fanout') usage('mode is ack or fanout')
  if (o.inFlight < 1) usage('--in-flight is at least 1')
  return o
}

function usage(why) {
  console.error(`ws_bench: ${why}\nusage: node ws_bench.mjs ack|fanout --url ws://HOST:PORT ` +
    '[--host H] [--in-flight N] [--duration S] [--rate R] [--subscribers N] [--content-bytes N] ' +
    '[--events N] [--json FILE]')
  process.exit(2)
}

async function signAll(count, sk, kind, bytes) {
  const threads = Math.max(1, Math.min(os.cpus().length, 4))
  const createdAt = Math.floor(Date.now() / 1000)
  const tag = Math.random().toString(36).slice(2)  // events of two runs never collide
  const per = Math.ceil(count / threads)
  const parts = await Promise.all(Array.from({ length: threads }, (_, t) => new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), {
      workerData: { from: t * per, to: Math.min(count, (t + 1) * per), sk, kind, bytes, createdAt, tag },
    })
    w.once('message', resolve)
    w.once('error', reject)
  })))
  return parts.flat()
}

function percentile(sorted, q) {
  if (!sorted.length) return null
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}

function summary(samples) {
  const s = Float64Array.from(samples).sort()
  const r = (x) => (x === null ? null : Math.round(x * 1000) / 1000)
  return { count: s.length, p50_ms: r(percentile(s, 0.5)), p90_ms: r(percentile(s, 0.9)),
           p99_ms: r(percentile(s, 0.99)), max_ms: r(s.length ? s[s.length - 1] : null) }
}

// Opens a socket and answers the relay's NIP-42 challenge with a fresh key.
function connect(o, sk) {
  return new Promise((resolve, reject) => {
    const headers = o.host ? { Host: o.host } : {}
    const ws = new WebSocket(o.url, { headers, perMessageDeflate: false })
    const relayUrl = o.host ? `ws://${o.host}` : o.url
    let authId = ''
    const timer = setTimeout(() => reject(new Error('no AUTH answer within 10 s')), 10000)
    ws.on('error', (e) => { clearTimeout(timer); reject(e) })
    ws.on('message', function onAuth(data) {
      const m = JSON.parse(data)
      if (m[0] === 'AUTH' && !authId) {
        const ev = finalizeEvent({ kind: 22242, created_at: Math.floor(Date.now() / 1000),
          tags: [['relay', relayUrl], ['challenge', m[1]]], content: '' },
        Uint8Array.from(Buffer.from(sk, 'hex')))
        authId = ev.id
        ws.send(JSON.stringify(['AUTH', ev]))
      } else if (m[0] === 'OK' && m[1] === authId) {
        clearTimeout(timer)
        ws.off('message', onAuth)
        if (m[2] !== true) return reject(new Error(`AUTH refused: ${m[3]}`))
        resolve(ws)
      }
    })
  })
}

const newKey = () => Buffer.from(generateSecretKey()).toString('hex')

async function runAck(o) {
  const sk = newKey()
  const count = o.events || Math.ceil(o.duration * (o.inFlight === 1 ? 2500 : 9000))
  const t0 = performance.now()
  const frames = (await signAll(count, sk, 1, o.contentBytes)).map((e) => `["EVENT",${e}]`)
  const signSeconds = (performance.now() - t0) / 1000
  const ws = await connect(o, sk)
  const sentAt = new Map()
  const lat = []
  let next = 0, acked = 0, refused = 0, firstRefusal = ''
  let stopAt = 0, started = 0
  const idOf = (frame) => frame.substr(frame.indexOf('"id":"') + 6, 64)
  await new Promise((resolve) => {
    const sendOne = () => {
      if (next >= frames.length || performance.now() >= stopAt) return false
      const f = frames[next++]
      sentAt.set(idOf(f), performance.now())
      ws.send(f)
      return true
    }
    ws.on('message', (data) => {
      const text = data.toString()
      if (!text.startsWith('["OK"')) return
      const m = JSON.parse(text)
      const at = sentAt.get(m[1])
      if (at === undefined) return
      sentAt.delete(m[1])
      lat.push(performance.now() - at)
      if (m[2] === true) ++acked
      else { ++refused; firstRefusal ||= m[3] }
      if (!sendOne() && sentAt.size === 0) resolve()
    })
    started = performance.now()
    stopAt = started + o.duration * 1000
    for (let k = 0; k < o.inFlight; ++k) sendOne()
  })
  const seconds = (performance.now() - started) / 1000
  ws.close()
  return { mode: 'ack', in_flight: o.inFlight, signed: frames.length, sign_seconds: signSeconds,
           sent: next, acked, refused, first_refusal: firstRefusal, seconds,
           events_per_s: Math.round((acked + refused) / seconds), latency: summary(lat),
           ran_out_of_events: next >= frames.length,
           clean: refused === 0 && next < frames.length }
}

async function runFanout(o) {
  const sk = newKey()
  const count = o.events || Math.ceil(o.rate * o.duration)
  const frames = (await signAll(count, sk, 1, o.contentBytes)).map((e) => `["EVENT",${e}]`)
  const pub = await connect(o, sk)
  const subs = []
  const got = []          // per subscriber: a byte per event number
  const lat = []
  let duplicates = 0
  const sentAt = new Float64Array(count)
  const since = Math.floor(Date.now() / 1000) - 5
  for (let s = 0; s < o.subscribers; ++s) {
    const ws = await connect(o, newKey())
    const seen = new Uint8Array(count)
    got.push(seen)
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`subscriber ${s}: no EOSE`)), 10000)
      ws.on('message', (data) => {
        const text = data.toString()
        if (text.startsWith('["EOSE"')) { clearTimeout(timer); return resolve() }
        if (!text.startsWith('["EVENT"')) return
        const at = text.indexOf('#', text.indexOf('"content":"'))
        const n = Number(text.slice(at + 1, text.indexOf('#', at + 1)))
        if (!(n >= 0 && n < count)) return
        if (seen[n]++) ++duplicates
        else lat.push(performance.now() - sentAt[n])
      })
      ws.send(JSON.stringify(['REQ', 'f', { kinds: [1], authors: [getPublicKey(Buffer.from(sk, 'hex'))], since }]))
    })
    subs.push(ws)
  }
  let acked = 0, refused = 0
  const ackLat = []
  const pending = new Map()
  pub.on('message', (data) => {
    const text = data.toString()
    if (!text.startsWith('["OK"')) return
    const m = JSON.parse(text)
    const at = pending.get(m[1])
    if (at === undefined) return
    pending.delete(m[1])
    ackLat.push(performance.now() - at)
    m[2] === true ? ++acked : ++refused
  })
  const started = performance.now()
  const interval = 1000 / o.rate
  for (let i = 0; i < count; ++i) {
    const due = started + i * interval
    const wait = due - performance.now()
    if (wait > 1) await new Promise((r) => setTimeout(r, wait))
    const f = frames[i]
    sentAt[i] = performance.now()
    pending.set(f.substr(f.indexOf('"id":"') + 6, 64), sentAt[i])
    pub.send(f)
  }
  const expected = count * o.subscribers
  const deadline = performance.now() + 10000
  while (lat.length < expected && performance.now() < deadline)
    await new Promise((r) => setTimeout(r, 50))
  const seconds = (performance.now() - started) / 1000
  for (const ws of [pub, ...subs]) ws.terminate()
  return { mode: 'fanout', subscribers: o.subscribers, rate: o.rate, published: count, acked,
           refused, expected_deliveries: expected, delivered: lat.length,
           missed: expected - lat.length, duplicates, seconds,
           delivery: summary(lat), ack: summary(ackLat),
           clean: refused === 0 && acked === count && lat.length === expected && duplicates === 0 }
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  const result = o.mode === 'ack' ? await runAck(o) : await runFanout(o)
  result.url = o.url
  result.node = process.version
  const line = JSON.stringify(result)
  if (o.json) writeFileSync(o.json, line + '\n')
  console.log(line)
  process.exit(result.clean ? 0 : 1)
}

if (!isMainThread) {
  // Signing worker: a slice of the events, each with its number in the content (fanout reads it
  // back from the frame without parsing the JSON).
  const { from, to, sk, kind, bytes, createdAt, tag } = workerData
  const key = Uint8Array.from(Buffer.from(sk, 'hex'))
  const out = []
  for (let i = from; i < to; ++i)
    out.push(JSON.stringify(finalizeEvent(
      { kind, created_at: createdAt, tags: [], content: `#${i}# ${tag} ${filler(bytes, i)}` }, key)))
  parentPort.postMessage(out)
} else {
  main().catch((err) => {
    console.error(`ws_bench: ${err?.stack || err}`)
    process.exit(2)
  })
}
