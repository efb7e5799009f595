// End-to-end check of a running relay with a stock Nostr client library, as a new user would
// use it: fresh keys, NIP-42 AUTH, publish, live subscription, history with EOSE, COUNT.
//
//   node client_roundtrip.mjs [ws://127.0.0.1:7777]     (or WAGGLE_RELAY_URL)
//   WAGGLE_CLIENT_TIMEOUT_MS (default 30000) bounds the whole run.
//
// Exits 0 when every step passed; otherwise prints the failing step and exits 1.
import { generateSecretKey, getPublicKey, finalizeEvent, verifyEvent } from 'nostr-tools/pure'
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay'
import WebSocket from 'ws'

useWebSocketImplementation(WebSocket)

const url = process.argv[2] || process.env.WAGGLE_RELAY_URL || 'ws://127.0.0.1:7777'
const totalTimeoutMs = Number(process.env.WAGGLE_CLIENT_TIMEOUT_MS || 30000)
const stepTimeoutMs = 10000

let step = 'start'
const relays = new Set()

function fail(message) {
  console.error(`client_roundtrip: FAILED at step "${step}": ${message}`)
  for (const r of relays) {
    try { r.close() } catch {}
  }
  process.exit(1)
}

const overall = setTimeout(() => fail(`no result within ${totalTimeoutMs} ms`), totalTimeoutMs)
overall.unref()
process.on('unhandledRejection', (err) => fail(`unhandled rejection: ${err?.stack || err}`))

function log(message) {
  console.log(`client_roundtrip: ${message}`)
}

function withTimeout(promise, what, ms = stepTimeoutMs) {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

function newUser(name) {
  const sk = generateSecretKey()
  const pk = getPublicKey(sk)
  const signer = async (template) => finalizeEvent(template, sk)
  return { name, sk, pk, signer }
}

// Connects, waits for the relay's AUTH challenge (NIP-42) and answers it.
async function connectAndAuth(user) {
  step = `${user.name}: connect`
  const relay = await withTimeout(Relay.connect(url), `connect to ${url}`)
  relays.add(relay)
  // Answer any later challenge too (e.g. after a reconnect).
  relay.onauth = user.signer
  step = `${user.name}: AUTH challenge`
  const started = Date.now()
  // `challenge` is set by the library when ["AUTH", challenge] arrives.
  while (!relay.challenge) {
    if (Date.now() - started > stepTimeoutMs) {
      throw new Error(`relay sent no ["AUTH", <challenge>] within ${stepTimeoutMs} ms of connecting`)
    }
    await new Promise((r) => setTimeout(r, 20))
  }
  step = `${user.name}: AUTH`
  await withTimeout(relay.auth(user.signer), 'AUTH (kind 22242)')
  log(`${user.name} connected and authenticated as ${user.pk.slice(0, 16)}…`)
  return relay
}

function note(user, content) {
  return finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content },
    user.sk,
  )
}

async function publish(relay, event, who) {
  step = `${who}: publish kind 1`
  const reason = await withTimeout(relay.publish(event), `OK for ${event.id}`)
  log(`${who} published ${event.id.slice(0, 16)}… (OK true${reason ? `, "${reason}"` : ''})`)
}

// Subscribes; resolves once the relay's EOSE arrives, with the stored events seen before it.
// Events arriving after EOSE go to onLive.
function subscribeUntilEose(relay, filters, onLive = () => {}) {
  const stored = []
  let eose = false
  let closedReason
  let sub
  const done = new Promise((resolve, reject) => {
    sub = relay.subscribe(filters, {
      // Long enough that the library never fakes an EOSE; a missing EOSE is a failure here.
      eoseTimeout: 10 * stepTimeoutMs,
      onevent(event) {
        if (!verifyEvent(event)) return reject(new Error(`event ${event.id} has a bad signature`))
        if (eose) onLive(event)
        else stored.push(event)
      },
      oneose() {
        eose = true
        resolve({ sub, stored })
      },
      onclose(reason) {
        closedReason = reason
        if (!eose) reject(new Error(`subscription CLOSED before EOSE: ${reason}`))
      },
    })
  })
  return { done: withTimeout(done, 'EOSE'), closed: () => closedReason }
}

async function main() {
  log(`relay ${url}`)
  const alice = newUser('alice')
  const bob = newUser('bob')
  const filter = { kinds: [1], authors: [alice.pk, bob.pk] }

  // 1. Alice connects, authenticates and publishes a note.
  let aliceRelay = await connectAndAuth(alice)
  const first = note(alice, `hello from alice, ${new Date().toISOString()}`)
  await publish(aliceRelay, first, 'alice')

  // 2. Alice subscribes: her note comes back as history, then EOSE.
  step = 'alice: REQ (history then live)'
  let liveResolve
  const live = new Promise((resolve) => { liveResolve = resolve })
  const { done } = subscribeUntilEose(aliceRelay, [filter], (event) => liveResolve(event))
  const { stored: before } = await done
  if (!before.some((e) => e.id === first.id)) {
    throw new Error(`REQ did not return alice's stored note ${first.id} before EOSE (got ${before.length} events)`)
  }
  log(`alice's subscription returned her note, then EOSE`)

  // 3. Bob, on a second connection, publishes; Alice receives it live.
  const bobRelay = await connectAndAuth(bob)
  const second = note(bob, `hi alice, bob here, ${new Date().toISOString()}`)
  await publish(bobRelay, second, 'bob')
  step = 'alice: receive bob\'s note live'
  const got = await withTimeout(live, `live delivery of ${second.id}`)
  if (got.id !== second.id) throw new Error(`live event ${got.id} is not bob's note ${second.id}`)
  if (got.sig !== second.sig || got.content !== second.content) {
    throw new Error('live event differs from what bob published')
  }
  log(`alice received bob's note live`)

  // 4. Both leave; Alice comes back and reads the history.
  step = 'close connections'
  aliceRelay.close()
  bobRelay.close()
  relays.clear()

  aliceRelay = await connectAndAuth(alice)
  step = 'alice: REQ history after reconnect'
  const history = subscribeUntilEose(aliceRelay, [filter])
  const { sub, stored } = await history.done
  const ids = new Set(stored.map((e) => e.id))
  for (const e of [first, second]) {
    if (!ids.has(e.id)) throw new Error(`history after reconnect lacks ${e.id} (got ${stored.length} events)`)
  }
  if (stored.length !== 2) throw new Error(`history after reconnect has ${stored.length} events, expected 2`)
  if (stored[0].created_at < stored[1].created_at) {
    throw new Error('history is not newest first (NIP-01: created_at descending)')
  }
  log(`history after reconnect: both notes, then EOSE`)
  sub.close()

  // 5. COUNT (NIP-45).
  step = 'alice: COUNT'
  const count = await withTimeout(aliceRelay.count([filter], {}), 'COUNT')
  if (count !== 2) throw new Error(`COUNT returned ${count}, expected 2`)
  log(`COUNT returned 2`)

  aliceRelay.close()
  relays.clear()
  step = 'done'
  log('PASSED')
  process.exit(0)
}

main().catch((err) => fail(err?.message || String(err)))
