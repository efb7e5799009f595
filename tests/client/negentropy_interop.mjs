// NIP-77 against an independent implementation: nostr-tools' nip77 module (a port of the
// negentropy reference's JavaScript, protocol version 1) reconciles a set with a running relay.
// The reference's own JavaScript package is not published on npm; this is the npm package that
// carries it (docs/negentropy.md, "Interoperability").
//
//   node negentropy_interop.mjs [ws://127.0.0.1:7777]     (or WAGGLE_RELAY_URL)
//   NEG_ITEMS       events on each side (default 10000)
//   NEG_DIFF_PCT    how much of each side the other lacks, in percent (default 1)
//   NEG_FRAME_LIMIT the client's frameSizeLimit, binary bytes (default 30000: its hex fits the
//                   relay's default 64 KiB frame); NEG_FRAME_LIMITS=a,b,... reconciles once per
//                   limit against the same sets
//
// Steps: publish the relay's side (shared + relay-only events, signed, through EVENT); build the
// client's side (the shared items + client-only items); reconcile with NEG-OPEN/NEG-MSG until
// the client's Negentropy says it is done; check that `have` is exactly the client-only ids and
// `need` exactly the relay-only ones; then that NEG-MSG for an unknown session is a NEG-ERR.
// Prints one JSON line per reconciliation with rounds and bytes; exits 0 when every check passed.
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure'
import { randomBytes } from 'node:crypto'
import WebSocket from 'ws'

// nostr-tools' package.json does not export ./nip77; the module is loaded by its file.
const { Negentropy, NegentropyStorageVector } = await import(
  new URL('./node_modules/nostr-tools/lib/esm/nip77.js', import.meta.url).href)

const url = process.argv[2] || process.env.WAGGLE_RELAY_URL || 'ws://127.0.0.1:7777'
const items = Number(process.env.NEG_ITEMS || 10000)
const diffPct = Number(process.env.NEG_DIFF_PCT || 1)
const frameLimit = Number(process.env.NEG_FRAME_LIMIT || 30000)
const onlyEach = Math.round((items * diffPct) / 100)
const shared = items - onlyEach
const timeoutMs = Number(process.env.WAGGLE_CLIENT_TIMEOUT_MS || 60000 + items * 3)

function fail(message) {
  console.error(`negentropy_interop: FAILED: ${message}`)
  process.exit(1)
}
const overall = setTimeout(() => fail(`no result within ${timeoutMs} ms`), timeoutMs)
overall.unref()
const log = (m) => console.error(`negentropy_interop: ${m}`)

const sk = generateSecretKey()
const ws = new WebSocket(url, { maxPayload: 16 << 20 })
const waiting = new Map() // event id -> resolve, for OKs
let onNeg = null
let challenge = null
let authed = null

ws.on('message', (data) => {
  const msg = JSON.parse(data.toString())
  if (msg[0] === 'AUTH') {
    challenge = msg[1]
  } else if (msg[0] === 'OK') {
    const w = waiting.get(msg[1])
    if (w) { waiting.delete(msg[1]); w(msg) }
  } else if (msg[0] === 'NEG-MSG' || msg[0] === 'NEG-ERR') {
    if (onNeg) onNeg(msg)
  }
})
await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
while (!challenge) await new Promise((r) => setTimeout(r, 10))

function sendEvent(ev) {
  return new Promise((resolve) => {
    waiting.set(ev.id, resolve)
    ws.send(JSON.stringify(['EVENT', ev]))
  })
}

const auth = finalizeEvent({
  kind: 22242, created_at: Math.floor(Date.now() / 1000), content: '',
  tags: [['relay', url], ['challenge', challenge]],
}, sk)
ws.send(JSON.stringify(['AUTH', auth]))
authed = await new Promise((resolve) => waiting.set(auth.id, resolve))
if (!authed[2]) fail(`AUTH refused: ${authed[3]}`)

// The relay's side: every event in the created_at window, many per second, so bounds need id
// prefixes as well as timestamps.
const now = Math.floor(Date.now() / 1000)
const tag = randomBytes(8).toString('hex')
const relayOnly = new Set()
const sharedItems = []
let published = 0
const t0 = Date.now()
const inflight = []
for (let i = 0; i < shared + onlyEach; i++) {
  const ev = finalizeEvent({
    // Signing 100,000 takes minutes: each event's time is taken as it is made, so all stay
    // inside the relay's created_at window.
    kind: 1, created_at: Math.floor(Date.now() / 1000) - 300 + (i % 300), content: `negentropy ${tag} ${i}`,
    tags: [['t', tag]],
  }, sk)
  if (i < shared) sharedItems.push([ev.created_at, ev.id])
  else relayOnly.add(ev.id)
  inflight.push(sendEvent(ev).then((ok) => {
    if (!ok[2]) fail(`event refused: ${ok[3]}`)
    published++
  }))
  if (inflight.length >= 400) await Promise.all(inflight.splice(0))
}
await Promise.all(inflight)
log(`published ${published} events in ${Date.now() - t0} ms`)

const storage = new NegentropyStorageVector()
for (const [ts, id] of sharedItems) storage.insert(ts, id)
const clientOnly = new Set()
for (let i = 0; i < onlyEach; i++) {
  const id = randomBytes(32).toString('hex')
  clientOnly.add(id)
  storage.insert(now - 600 + (i % 600), id)
}
storage.seal()

// One reconciliation per client frame limit (NEG_FRAME_LIMITS, comma-separated, or the one
// NEG_FRAME_LIMIT), each checked, each a JSON line.
const limits = (process.env.NEG_FRAME_LIMITS || String(frameLimit)).split(',').map(Number)
const same = (a, b) => a.size === b.size && [...a].every((x) => b.has(x))
for (const limit of limits) {
const neg = new Negentropy(storage, limit)
const have = new Set()
const need = new Set()
let rounds = 0
let bytesUp = 0
let bytesDown = 0
const sub = `interop-${limit}`
const filter = { '#t': [tag] }
const r0 = Date.now()
const done = new Promise((resolve) => {
  onNeg = (msg) => {
    bytesDown += JSON.stringify(msg).length
    if (msg[0] === 'NEG-ERR') fail(`NEG-ERR: ${msg[2]}`)
    rounds++
    const next = neg.reconcile(msg[2], (id) => have.add(id), (id) => need.add(id))
    if (next === null || next === undefined) return resolve()
    const frame = JSON.stringify(['NEG-MSG', sub, next])
    bytesUp += frame.length
    ws.send(frame)
  }
})
const open = JSON.stringify(['NEG-OPEN', sub, filter, neg.initiate()])
bytesUp += open.length
ws.send(open)
await done
ws.send(JSON.stringify(['NEG-CLOSE', sub]))
const reconcileMs = Date.now() - r0

if (!same(have, clientOnly)) fail(`have: ${have.size} ids, expected the ${clientOnly.size} client-only ones`)
if (!same(need, relayOnly)) fail(`need: ${need.size} ids, expected the ${relayOnly.size} relay-only ones`)
console.log(JSON.stringify({
  items_each_side: items, differing_each_side: onlyEach, client_frame_size_limit: limit,
  round_trips: rounds, bytes_client_to_relay: bytesUp, bytes_relay_to_client: bytesDown,
  reconcile_ms: reconcileMs, have: have.size, need: need.size,
}))
}

// A session that does not exist is refused, not crashed on.
const refused = await new Promise((resolve) => {
  onNeg = resolve
  ws.send(JSON.stringify(['NEG-MSG', 'nosuch', '61']))
})
if (refused[0] !== 'NEG-ERR' || refused[1] !== 'nosuch') fail(`unknown session: ${JSON.stringify(refused)}`)

ws.close()
console.error('negentropy_interop: PASSED')
process.exit(0)
