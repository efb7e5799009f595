// The client side of the committed actor traces (tests/traces/, docs/traces.md): each
// scenario drives a relay that records a trace (WAGGLE_TRACE) over raw WebSockets, one step
// at a time, waiting for each answer, so the trace holds one clear story.
//
//   node trace_scenarios.mjs <client-session|bad-signature|roster-race|listener-retry|push-race> [ws://127.0.0.1:7777]
//   node trace_scenarios.mjs cluster ws://127.0.0.1:A ws://127.0.0.1:B
//
// cluster drives two nodes of one cluster (two `waggle serve --bus postgres` over one database),
// each recording its own trace.
// listener-retry needs the relay started with --operator-listeners naming listener_standin.mjs,
// and that stand-in's URL in WAGGLE_LISTENER_URL; push-race the relay started with
// --push-gateway-url naming a stand-in answering 200, and the same URL in WAGGLE_LISTENER_URL.
// Exits 0 when the relay answered every step as expected; otherwise names the step, exits 1.
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure'
import { getToken } from 'nostr-tools/nip98'
import WebSocket from 'ws'
import { listenerSecret } from './listener_key.mjs'

const scenario = process.argv[2]
const url = process.argv[3] || process.env.WAGGLE_RELAY_URL || 'ws://127.0.0.1:7777'
const stepTimeoutMs = 10000
let step = 'start'

function fail(message) {
  console.error(`trace_scenarios ${scenario}: FAILED at "${step}": ${message}`)
  process.exit(1)
}
process.on('unhandledRejection', (err) => fail(err?.stack || String(err)))
setTimeout(() => fail('no result within 60 s'), 60000).unref()

const now = () => Math.floor(Date.now() / 1000)

function user(name) {
  const sk = generateSecretKey()
  return { name, sk, pk: getPublicKey(sk) }
}

function sign(u, kind, content, tags = []) {
  return finalizeEvent({ kind, created_at: now(), tags, content }, u.sk)
}

// One socket: every frame it receives is queued; expect() takes the first frame that matches.
async function connect(name, at = url) {
  const ws = new WebSocket(at)
  const frames = []
  const waiters = []
  ws.on('message', (data) => {
    const msg = JSON.parse(data.toString())
    frames.push(msg)
    for (const w of [...waiters]) w()
  })
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  const conn = {
    name,
    url: at,
    queued: () => frames,
    send: (msg) => ws.send(JSON.stringify(msg)),
    async expect(what, pred) {
      step = `${name}: ${what}`
      const deadline = Date.now() + stepTimeoutMs
      for (;;) {
        const i = frames.findIndex(pred)
        if (i >= 0) return frames.splice(i, 1)[0]
        if (Date.now() > deadline) fail(`no such frame; got ${JSON.stringify(frames)}`)
        await new Promise((resolve) => {
          const w = () => {
            waiters.splice(waiters.indexOf(w), 1)
            resolve()
          }
          waiters.push(w)
          setTimeout(w, 50)
        })
      }
    },
    async ok(id, accepted, prefix = '') {
      const m = await conn.expect(`OK ${id.slice(0, 8)}`, (f) => f[0] === 'OK' && f[1] === id)
      if (m[2] !== accepted || !m[3].startsWith(prefix))
        fail(`expected OK ${accepted} "${prefix}...", got ${JSON.stringify(m)}`)
      return m
    },
    close: () => new Promise((resolve) => {
      ws.once('close', resolve)
      ws.close()
    }),
  }
  return conn
}

async function auth(conn, u) {
  const [, challenge] = await conn.expect('AUTH challenge', (f) => f[0] === 'AUTH')
  const ev = sign(u, 22242, '', [['relay', conn.url], ['challenge', challenge]])
  conn.send(['AUTH', ev])
  await conn.ok(ev.id, true)
}

// POST /events with NIP-98, as an agent would publish; returns the parsed answer.
async function post(u, ev) {
  step = `${u.name}: POST /events`
  const httpUrl = url.replace(/^ws/, 'http').replace(/\/$/, '') + '/events'
  const body = JSON.stringify(ev)
  const token = await getToken(httpUrl, 'POST', (t) => finalizeEvent(t, u.sk), true, ev)
  const res = await fetch(httpUrl, { method: 'POST', body, headers: { authorization: token, 'content-type': 'application/json' } })
  return { status: res.status, body: await res.json() }
}

// Polls `read` until `done(value)`, at most one step's time; returns the value.
async function until(what, read, done) {
  step = what
  const deadline = Date.now() + stepTimeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) fail(`still ${JSON.stringify(value)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const relayHttp = () => url.replace(/^ws/, 'http').replace(/\/$/, '')

// The relay's count of finished delivery attempts of a queue, by outcome (GET /metrics, loopback).
async function deliveryOutcomes(queue = 'operator_listener') {
  const text = await (await fetch(relayHttp() + '/metrics')).text()
  const out = {}
  for (const m of text.matchAll(/^waggle_deliveries_total\{queue="(\w+)",outcome="(\w+)"\} (\d+)$/gm))
    if (m[1] === queue) out[m[2]] = Number(m[3])
  return out
}

// The stand-in's URL (listener_standin.mjs) and what it was POSTed so far.
function standin() {
  const url = process.env.WAGGLE_LISTENER_URL
  if (!url) fail('WAGGLE_LISTENER_URL is not set (the stand-in, listener_standin.mjs)')
  return { url, seen: async () => (await fetch(new URL('/seen', url))).json() }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const scenarios = {
  // NIP-42 AUTH, publish, a duplicate, REQ with history then a live event, CLOSE, disconnect.
  async 'client-session'() {
    const alice = user('alice')
    const bob = user('bob')
    const a = await connect('alice')
    await auth(a, alice)
    const first = sign(alice, 1, 'first note')
    a.send(['EVENT', first])
    await a.ok(first.id, true, '')
    a.send(['EVENT', first])
    await a.ok(first.id, true, 'duplicate:')
    a.send(['REQ', 'notes', { kinds: [1], authors: [alice.pk, bob.pk] }])
    await a.expect('history', (f) => f[0] === 'EVENT' && f[1] === 'notes' && f[2].id === first.id)
    await a.expect('EOSE', (f) => f[0] === 'EOSE' && f[1] === 'notes')
    const b = await connect('bob')
    await auth(b, bob)
    const live = sign(bob, 1, 'a live note')
    b.send(['EVENT', live])
    await b.ok(live.id, true)
    await a.expect('live event', (f) => f[0] === 'EVENT' && f[1] === 'notes' && f[2].id === live.id)
    a.send(['CLOSE', 'notes'])
    // A COUNT on the same connection is answered after the CLOSE took effect.
    a.send(['COUNT', 'n', { kinds: [1], authors: [alice.pk, bob.pk] }])
    await a.expect('COUNT', (f) => f[0] === 'COUNT' && f[1] === 'n')
    const after = sign(bob, 1, 'after the CLOSE')
    b.send(['EVENT', after])
    await b.ok(after.id, true)
    // An agent's note over HTTP: the same ingest path and the same answer.
    const agentNote = sign(bob, 1, 'posted over HTTP')
    const res = await post(bob, agentNote)
    if (res.status !== 200 || res.body.accepted !== true) fail(`POST answered ${res.status} ${JSON.stringify(res.body)}`)
    await a.close()
    await b.close()
  },

  // An event whose signature does not verify, and an AUTH whose signature does not verify.
  async 'bad-signature'() {
    const mallory = user('mallory')
    const m = await connect('mallory')
    await auth(m, mallory)
    const ev = sign(mallory, 1, 'signed, then changed')
    const forged = { ...ev, sig: ev.sig.slice(0, -2) + (ev.sig.endsWith('00') ? '11' : '00') }
    m.send(['EVENT', forged])
    await m.ok(forged.id, false, 'invalid:')
    await m.close()
    const other = user('other')
    const o = await connect('other')
    const [, challenge] = await o.expect('AUTH challenge', (f) => f[0] === 'AUTH')
    const authEv = sign(other, 22242, '', [['relay', url], ['challenge', challenge]])
    const badAuth = { ...authEv, sig: authEv.sig.slice(0, -2) + (authEv.sig.endsWith('00') ? '11' : '00') }
    o.send(['AUTH', badAuth])
    await o.ok(badAuth.id, false, 'invalid:')
    const note = sign(other, 1, 'not authenticated')
    o.send(['EVENT', note])
    await o.ok(note.id, false, 'auth-required:')
    await o.close()
  },

  // The roster race: two membership changes sent back to back, so the second commits while
  // the roster capture of the first is still pending (queued behind it on the group session);
  // the roster actor must publish again, and the last 39002 must list both members.
  async 'roster-race'() {
    const alice = user('alice')
    const bob = user('bob')
    const carol = user('carol')
    const a = await connect('alice')
    await auth(a, alice)
    const group = 'race' + Math.random().toString(16).slice(2, 10)
    const create = sign(alice, 9007, '', [['h', group]])
    a.send(['EVENT', create])
    await a.ok(create.id, true)
    const putBob = sign(alice, 9000, '', [['h', group], ['p', bob.pk]])
    const putCarol = sign(alice, 9000, '', [['h', group], ['p', carol.pk]])
    a.send(['EVENT', putBob])
    a.send(['EVENT', putCarol])
    await a.ok(putBob.id, true)
    await a.ok(putCarol.id, true)
    // Give the roster actor time to publish again before reading the state.
    const deadline = Date.now() + stepTimeoutMs
    for (;;) {
      a.send(['REQ', 'roster', { kinds: [39002], '#d': [group] }])
      const ev = await a.expect('39002', (f) => f[0] === 'EVENT' && f[1] === 'roster')
      await a.expect('EOSE', (f) => f[0] === 'EOSE' && f[1] === 'roster')
      a.send(['CLOSE', 'roster'])
      const members = ev[2].tags.filter((t) => t[0] === 'p').map((t) => t[1])
      if (members.includes(bob.pk) && members.includes(carol.pk)) break
      if (Date.now() > deadline) fail(`the last 39002 lists ${JSON.stringify(members)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    await a.close()
  },

  // Delivery to an operator listener with one retry (docs/delivery.md). The stand-in listener
  // answers 503 to the first POST and 200 to the second. The listener registers a target; alice
  // mentions it in a kind 9; the relay claims the outbox row on the commit's wake, a slot POSTs
  // it, the 503 makes the supervisor schedule a retry (1 s), the retry is claimed when due,
  // POSTed again under the same delivery id, and the 200 completes it as delivered.
  async 'listener-retry'() {
    const { seen } = standin()
    const agent = user('agent')
    step = 'listener: POST /operator/listener/pubkeys'
    const regUrl = relayHttp() + '/operator/listener/pubkeys'
    const body = JSON.stringify({ pubkeys: [agent.pk] })
    const token = await getToken(regUrl, 'POST', (t) => finalizeEvent(t, listenerSecret), true, { pubkeys: [agent.pk] })
    const reg = await fetch(regUrl, { method: 'POST', body, headers: { authorization: token, 'content-type': 'application/json' } })
    const regBody = await reg.text()
    if (reg.status !== 200 || regBody !== '{"registered":1}') fail(`registration answered ${reg.status} ${regBody}`)
    const alice = user('alice')
    const a = await connect('alice')
    await auth(a, alice)
    const mention = sign(alice, 9, 'agent, are you there?', [['p', agent.pk]])
    a.send(['EVENT', mention])
    await a.ok(mention.id, true)
    const posts = await until('the listener gets the POST and its retry', seen, (s) => s.length >= 2)
    if (posts.length !== 2 || posts[0].status !== 503 || posts[1].status !== 200) fail(`the listener got ${JSON.stringify(posts)}`)
    if (!posts[0].delivery_id || posts[0].delivery_id !== posts[1].delivery_id) fail('the retry changed the delivery id')
    for (const p of posts)
      if (JSON.parse(p.body).event.id !== mention.id) fail(`a POST of another event: ${p.body}`)
    // The completions reached the store (the supervisor counts them on the store's answer).
    await until('the relay counts a retry and a delivery', () => deliveryOutcomes(), (o) => o.retry === 1 && o.delivered === 1)
    await a.close()
  },

  // The race the push lease barrier handles (docs/push.md, "The gate cache"). bob publishes a
  // kind 9 while nobody holds a lease, so its batch skips the community's gate statement; alice
  // publishes her lease right behind it without waiting. Ingest takes the lease while bob's
  // batch is still in flight: the lease waits for it (the barrier), and the lease's own write
  // names bob's message as stored without the gate (push_skipped), so its backfill wakes alice
  // for it. Then a second message, gated now, wakes her through the gate. The push gateway is a
  // stand-in answering 200; each wake is waited for (POSTed and counted delivered) before the
  // next step, so the trace stays one story. scripts/record-traces keeps a recording only if
  // ingest took the lease while bob's batch was in flight.
  async 'push-race'() {
    const { seen } = standin()
    const alice = user('alice')
    const bob = user('bob')
    const a = await connect('alice')
    await auth(a, alice)
    const b = await connect('bob')
    await auth(b, bob)
    const lease = sign(alice, 30350, '', [
      ['d', 'phone-a'], ['endpoint', 'grant-a'], ['app', 'waggle-trace'],
      ['expiration', String(now() + 3600)], ['generation', '1']])
    const first = sign(bob, 9, 'before the lease')
    b.send(['EVENT', first])
    a.send(['EVENT', lease])
    await b.ok(first.id, true)
    await a.ok(lease.id, true)
    const wakes = async (n) => {
      const posts = await until(`the gateway gets wake ${n}`, seen, (s) => s.length >= n)
      await until(`the relay counts wake ${n} delivered`, () => deliveryOutcomes('push'), (o) => o.delivered === n)
      return posts
    }
    await wakes(1)
    const second = sign(bob, 9, 'after the lease')
    b.send(['EVENT', second])
    await b.ok(second.id, true)
    const posts = await wakes(2)
    const woken = posts.map((p) => JSON.parse(p.body).event_id)
    if (posts.length !== 2 || woken[0] !== first.id || woken[1] !== second.id)
      fail(`the gateway got ${JSON.stringify(posts)}`)
    for (const p of posts)
      if (p.body.includes('the lease')) fail(`a wake carries the message: ${p.body}`)
    await a.close()
    await b.close()
  },

  // Two nodes of one cluster (docs/scaling.md), A at the first URL, B at the second, each
  // recording its own trace. alice (on A) makes a private channel and puts bob in it; bob
  // subscribes to it on B, alice on A; alice posts on A: bob gets it on B (B's cluster tail
  // reads it from the database), alice gets it once on A (A's tail brings her commit back and
  // the clustered hub drops the copy); an ephemeral event alice sends on A reaches bob on B
  // whole over the bus; then alice removes bob on A (kind 9001): before her OK, A's barrier
  // asks B, B's tail reads the removal and B's hub closes bob's subscription there.
  async cluster() {
    const urlB = process.argv[4] || process.env.WAGGLE_RELAY_URL_B
    if (!urlB) fail('no second node: node trace_scenarios.mjs cluster URL_A URL_B')
    const alice = user('alice')
    const bob = user('bob')
    const a = await connect('alice@A', url)
    await auth(a, alice)
    const b = await connect('bob@B', urlB)
    await auth(b, bob)
    const group = 'ops' + Math.random().toString(16).slice(2, 10)
    const create = sign(alice, 9007, '', [['h', group], ['private']])
    a.send(['EVENT', create])
    await a.ok(create.id, true)
    const putBob = sign(alice, 9000, '', [['h', group], ['p', bob.pk, 'member']])
    a.send(['EVENT', putBob])
    await a.ok(putBob.id, true)
    // B's tail reads the commands (and A's roster publications) on its polls before bob
    // subscribes, so they are not interleaved with the story that follows.
    await sleep(1000)
    b.send(['REQ', 'live', { kinds: [9], '#h': [group] }])
    await b.expect('EOSE live', (f) => f[0] === 'EOSE' && f[1] === 'live')
    b.send(['REQ', 'eph', { kinds: [20001], authors: [alice.pk] }])
    await b.expect('EOSE eph', (f) => f[0] === 'EOSE' && f[1] === 'eph')
    a.send(['REQ', 'mine', { kinds: [9], '#h': [group] }])
    await a.expect('EOSE mine', (f) => f[0] === 'EOSE' && f[1] === 'mine')
    const hello = sign(alice, 9, 'hello from A', [['h', group]])
    a.send(['EVENT', hello])
    await a.ok(hello.id, true)
    await a.expect('her own post, live', (f) => f[0] === 'EVENT' && f[1] === 'mine' && f[2].id === hello.id)
    await b.expect('the post on B', (f) => f[0] === 'EVENT' && f[1] === 'live' && f[2].id === hello.id)
    // A's tail reads alice's commit back (every 200 ms): the clustered hub drops that copy.
    await sleep(1000)
    step = 'alice@A: her post once'
    if (a.queued().some((f) => f[0] === 'EVENT' && f[2]?.id === hello.id)) fail('alice got her post twice on A')
    const wave = sign(alice, 20001, 'waves from A')
    a.send(['EVENT', wave])
    await a.ok(wave.id, true)
    await b.expect('the ephemeral event on B', (f) => f[0] === 'EVENT' && f[1] === 'eph' && f[2].id === wave.id)
    const remove = sign(alice, 9001, '', [['h', group], ['p', bob.pk]])
    a.send(['EVENT', remove])
    // Every other node confirmed: the OK's message names none unconfirmed.
    const removed = await a.ok(remove.id, true)
    if (removed[3] !== '') fail(`the removal's OK names unconfirmed nodes: ${JSON.stringify(removed)}`)
    await b.expect('bob loses the channel on B', (f) => f[0] === 'CLOSED' && f[1] === 'live' && f[2].startsWith('restricted:'))
    await a.close()
    await b.close()
  },
}

if (!scenarios[scenario]) fail(`unknown scenario; one of ${Object.keys(scenarios).join(', ')}`)
await scenarios[scenario]()
console.log(`trace_scenarios ${scenario}: PASSED`)
process.exit(0)
