// End-to-end check of a running relay's channels (NIP-29 groups) with a stock Nostr client
// library, as a new user would use it: nostr-tools' nip29 helpers to build the commands and to
// read the relay-signed group state, fresh keys, NIP-42 AUTH.
//
//   node nip29_roundtrip.mjs [ws://127.0.0.1:7777]     (or WAGGLE_RELAY_URL)
//   WAGGLE_CLIENT_TIMEOUT_MS (default 30000) bounds the whole run.
//
// Steps: alice creates a group (9007), names it (9002) and adds bob (9000); bob posts a kind 9
// message, carol (not a member) is refused; the relay-signed 39000/39001/39002 show the state
// (signed by the NIP-11 pubkey); bob reads the channel's history; carol's REQ for a private
// group is CLOSED "restricted:".
//
// Exits 0 when every step passed; otherwise prints the failing step and exits 1.
import { randomBytes } from 'node:crypto'
import { generateSecretKey, getPublicKey, finalizeEvent, verifyEvent } from 'nostr-tools/pure'
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay'
import { SimplePool, useWebSocketImplementation as usePoolWebSocketImplementation } from 'nostr-tools/pool'
import {
  generateCreateGroupEventTemplate,
  generateEditGroupMetadataEventTemplate,
  generatePutUserEventTemplate,
  fetchGroupMetadataEvent,
  parseGroupMetadataEvent,
  fetchGroupAdminsEvent,
  parseGroupAdminsEvent,
  fetchGroupMembersEvent,
  parseGroupMembersEvent,
} from 'nostr-tools/nip29'
import WebSocket from 'ws'

// Node 20 has no global WebSocket; relay.js and pool.js each keep their own.
useWebSocketImplementation(WebSocket)
usePoolWebSocketImplementation(WebSocket)

const url = process.argv[2] || process.env.WAGGLE_RELAY_URL || 'ws://127.0.0.1:7777'
const totalTimeoutMs = Number(process.env.WAGGLE_CLIENT_TIMEOUT_MS || 30000)
const stepTimeoutMs = 10000
const pollIntervalMs = 200

let step = 'start'
const relays = new Set()
const pools = new Set()

function fail(message) {
  console.error(`nip29_roundtrip: FAILED at step "${step}": ${message}`)
  for (const r of relays) {
    try { r.close() } catch {}
  }
  for (const p of pools) {
    try { p.destroy() } catch {}
  }
  process.exit(1)
}

const overall = setTimeout(() => fail(`no result within ${totalTimeoutMs} ms`), totalTimeoutMs)
overall.unref()
process.on('unhandledRejection', (err) => fail(`unhandled rejection: ${err?.stack || err}`))

function log(message) {
  console.log(`nip29_roundtrip: ${message}`)
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

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

// Group ids: [a-z0-9], fresh for every run.
function newGroupId(prefix) {
  return `${prefix}${randomBytes(6).toString('hex')}`
}

// Waits for the relay's ["AUTH", <challenge>] on `relay` and answers it.
async function authenticate(relay, user) {
  step = `${user.name}: AUTH challenge`
  const started = Date.now()
  // `challenge` is set by the library when ["AUTH", challenge] arrives.
  while (!relay.challenge) {
    if (Date.now() - started > stepTimeoutMs) {
      throw new Error(`relay sent no ["AUTH", <challenge>] within ${stepTimeoutMs} ms of connecting`)
    }
    await sleep(20)
  }
  step = `${user.name}: AUTH`
  await withTimeout(relay.auth(user.signer), 'AUTH (kind 22242)')
}

// Connects, waits for the relay's AUTH challenge (NIP-42) and answers it.
async function connectAndAuth(user) {
  step = `${user.name}: connect`
  const relay = await withTimeout(Relay.connect(url), `connect to ${url}`)
  relays.add(relay)
  // Answer any later challenge too (e.g. after a reconnect).
  relay.onauth = user.signer
  await authenticate(relay, user)
  log(`${user.name} connected and authenticated as ${user.pk.slice(0, 16)}…`)
  return relay
}

function sign(user, template) {
  return finalizeEvent(template, user.sk)
}

function describe(event) {
  const h = event.tags.find((t) => t[0] === 'h')?.[1]
  return `kind ${event.kind}${h ? ` h=${h}` : ''} ${event.id.slice(0, 16)}…`
}

// Publishes and expects OK true.
async function publishAccepted(relay, event, who) {
  step = `${who}: publish ${describe(event)}`
  let reason
  try {
    reason = await withTimeout(relay.publish(event), `OK for ${event.id}`)
  } catch (err) {
    throw new Error(`expected OK true, got: ${err?.message || err}`)
  }
  if (typeof reason === 'string' && reason.startsWith('duplicate:')) {
    throw new Error(`OK true but "${reason}" for a fresh event`)
  }
  log(`${who} published ${describe(event)} (OK true${reason ? `, "${reason}"` : ''})`)
}

// Publishes and expects OK false with a message starting with `prefix`.
async function publishRefused(relay, event, who, prefix) {
  step = `${who}: publish ${describe(event)} (expect OK false "${prefix}")`
  let reason
  try {
    reason = await withTimeout(relay.publish(event), `OK for ${event.id}`)
  } catch (err) {
    const msg = err?.message || String(err)
    if (msg.includes('no answer within')) throw err
    if (!msg.startsWith(prefix)) throw new Error(`OK false as expected, but the message is "${msg}", not "${prefix}…"`)
    log(`${who}'s ${describe(event)} refused: OK false "${msg}"`)
    return msg
  }
  throw new Error(`expected OK false "${prefix}…", got OK true${reason ? ` "${reason}"` : ''}`)
}

// Subscribes; resolves once the relay's EOSE arrives, with the stored events seen before it.
// Rejects (with the reason) on CLOSED before EOSE.
function subscribeUntilEose(relay, filters) {
  const stored = []
  let eose = false
  let sub
  const done = new Promise((resolve, reject) => {
    sub = relay.subscribe(filters, {
      // Long enough that the library never fakes an EOSE; a missing EOSE is a failure here.
      eoseTimeout: 10 * stepTimeoutMs,
      onevent(event) {
        if (!verifyEvent(event)) return reject(new Error(`event ${event.id} has a bad signature`))
        if (!eose) stored.push(event)
      },
      oneose() {
        eose = true
        resolve({ sub, stored })
      },
      onclose(reason) {
        if (!eose) {
          const err = new Error(`subscription CLOSED before EOSE: ${reason}`)
          err.closedReason = reason
          err.stored = stored
          reject(err)
        }
      },
    })
  })
  return withTimeout(done, `EOSE or CLOSED for ${JSON.stringify(filters)}`)
}

// NIP-11 over HTTP on the relay's own URL: the pubkey that signs the group state.
async function fetchRelayPubkey() {
  step = 'NIP-11: fetch relay information'
  const httpUrl = url.replace(/^ws:/, 'http:').replace(/^wss:/, 'https:')
  const res = await withTimeout(
    fetch(httpUrl, { headers: { Accept: 'application/nostr+json' } }),
    `GET ${httpUrl}`,
  )
  const body = await res.text()
  if (res.status !== 200) throw new Error(`GET ${httpUrl} answered HTTP ${res.status}: ${body.slice(0, 200)}`)
  let info
  try {
    info = JSON.parse(body)
  } catch {
    throw new Error(`GET ${httpUrl} answered HTTP 200 but not JSON: ${body.slice(0, 200)}`)
  }
  if (typeof info.pubkey !== 'string' || !/^[0-9a-f]{64}$/.test(info.pubkey)) {
    throw new Error(`NIP-11 has no 64-hex "pubkey": ${body.slice(0, 300)}`)
  }
  if (!Array.isArray(info.supported_nips) || !info.supported_nips.includes(29)) {
    throw new Error(`NIP-11 supported_nips does not list 29: ${JSON.stringify(info.supported_nips)}`)
  }
  log(`NIP-11: relay pubkey ${info.pubkey.slice(0, 16)}…, supported_nips ${JSON.stringify(info.supported_nips)}`)
  return info
}

// Re-reads one relay-signed state event with nostr-tools' fetcher until `check` finds nothing
// wrong with it (returns null), bounded by the step timeout: the relay publishes 39000-39002
// asynchronously right after each change commits. On timeout, a raw REQ with the same filter
// on `diagRelay` tells whether the relay refused the read or simply has nothing (newer).
async function pollState({ what, kind, groupId, fetchOnce, check, relayInfo, diagRelay }) {
  step = `read ${what} (kind ${kind})`
  const started = Date.now()
  let problem = 'nothing read yet'
  let attempts = 0
  for (;;) {
    attempts++
    let event = null
    try {
      event = await withTimeout(fetchOnce(), `${what} fetch`)
    } catch (err) {
      problem = err?.message || String(err)
    }
    if (event) {
      problem = check(event)
      if (!problem) {
        log(`${what} (kind ${kind}) as expected after ${attempts} read(s), ${Date.now() - started} ms`)
        return event
      }
      problem = `${problem}; last event read: ${JSON.stringify({ pubkey: event.pubkey, created_at: event.created_at, tags: event.tags })}`
    }
    if (Date.now() - started > stepTimeoutMs) break
    await sleep(pollIntervalMs)
  }
  let raw
  const filter = { kinds: [kind], authors: [relayInfo.pubkey], '#d': [groupId] }
  try {
    const { sub, stored } = await subscribeUntilEose(diagRelay, [filter])
    sub.close()
    raw = `a raw REQ ${JSON.stringify(filter)} returned ${stored.length} event(s) then EOSE` +
      (stored.length ? `: ${JSON.stringify(stored.map((e) => ({ pubkey: e.pubkey, created_at: e.created_at, tags: e.tags })))}` : '')
  } catch (err) {
    raw = `a raw REQ ${JSON.stringify(filter)} failed: ${err?.message || err}`
  }
  throw new Error(`no expected ${what} within ${stepTimeoutMs} ms (${attempts} reads): ${problem}; ${raw}`)
}

function signedByRelay(event, relayInfo) {
  if (event.pubkey !== relayInfo.pubkey) return `pubkey ${event.pubkey} is not the relay's ${relayInfo.pubkey}`
  if (!verifyEvent(event)) return 'bad signature'
  return null
}

function sameSet(a, b) {
  return a.length === b.length && [...a].sort().join() === [...b].sort().join()
}

async function main() {
  log(`relay ${url}`)
  const alice = newUser('alice')
  const bob = newUser('bob')
  const carol = newUser('carol')
  const groupId = newGroupId('rt')
  const privateId = newGroupId('rtp')
  const name = `round trip ${groupId}`
  const about = `created by nip29_roundtrip.mjs at ${new Date().toISOString()}`

  // 1. Alice and Bob (and Carol, a non-member) connect with fresh keys and AUTH (NIP-42).
  const aliceRelay = await connectAndAuth(alice)
  const bobRelay = await connectAndAuth(bob)
  const carolRelay = await connectAndAuth(carol)

  // 2. Alice creates the group (9007): she becomes its owner.
  const create = sign(alice, generateCreateGroupEventTemplate(groupId, 'nip29 round trip'))
  await publishAccepted(aliceRelay, create, 'alice')

  // 3. Alice sets name and about (9002).
  const edit = sign(alice, generateEditGroupMetadataEventTemplate({ metadata: { id: groupId, name, about } }))
  await publishAccepted(aliceRelay, edit, 'alice')

  // 4. Alice adds Bob as a member (9000: ["p", bob, "member"]).
  const put = sign(alice, generatePutUserEventTemplate(groupId, bob.pk, ['member']))
  await publishAccepted(aliceRelay, put, 'alice')

  // 5. Bob posts a chat message; Carol, not a member, is refused.
  const chatTemplate = (content) => ({
    kind: 9,
    created_at: Math.floor(Date.now() / 1000),
    tags: [['h', groupId]],
    content,
  })
  const bobMessage = sign(bob, chatTemplate(`hello from bob, ${new Date().toISOString()}`))
  await publishAccepted(bobRelay, bobMessage, 'bob')
  const carolMessage = sign(carol, chatTemplate('carol is not a member'))
  await publishRefused(carolRelay, carolMessage, 'carol', 'restricted:')

  // 6. The relay-signed state, read the stock way: nostr-tools' fetchGroup*Event filter on
  //    {kinds:[3900x], authors:[NIP-11 pubkey], "#d":[id]} through a SimplePool. The reader is
  //    Carol (authenticated, not a member): the state of a group is readable by any
  //    authenticated user of the community. The pool signs AUTH itself (automaticallyAuth);
  //    its fetchers pass no onauth, so a REQ sent before AUTH completed would just come back
  //    empty: authenticate the pool's connection before the first read.
  const relayInfo = await fetchRelayPubkey()
  step = 'carol: pool connect and AUTH'
  const pool = new SimplePool({ automaticallyAuth: () => carol.signer })
  pools.add(pool)
  const poolRelay = await withTimeout(pool.ensureRelay(url), `pool connect to ${url}`)
  await authenticate(poolRelay, carol)
  log(`carol's pool connected and authenticated`)
  const groupReference = { host: url, id: groupId }
  const fetchArgs = { pool, groupReference, relayInformation: relayInfo }
  const common = { groupId, relayInfo, diagRelay: carolRelay }

  await pollState({
    ...common,
    what: 'group metadata',
    kind: 39000,
    fetchOnce: () => fetchGroupMetadataEvent(fetchArgs),
    check(event) {
      const bad = signedByRelay(event, relayInfo)
      if (bad) return bad
      if (!event.tags.some((t) => t[0] === 'd' && t[1] === groupId)) return `no ["d", "${groupId}"] tag`
      const md = parseGroupMetadataEvent(event)
      if (md.id !== groupId) return `parsed id ${JSON.stringify(md.id)}, expected ${groupId}`
      if (md.name !== name) return `parsed name ${JSON.stringify(md.name)}, expected ${JSON.stringify(name)}`
      if (md.about !== about) return `parsed about ${JSON.stringify(md.about)}, expected ${JSON.stringify(about)}`
      if (md.isPrivate) return 'parsed as private; the group was created without ["private"]'
      return null
    },
  })

  await pollState({
    ...common,
    what: 'group admins',
    kind: 39001,
    fetchOnce: () => fetchGroupAdminsEvent(fetchArgs),
    check(event) {
      const bad = signedByRelay(event, relayInfo)
      if (bad) return bad
      if (!event.tags.some((t) => t[0] === 'd' && t[1] === groupId)) return `no ["d", "${groupId}"] tag`
      // nostr-tools reads ["p", pubkey, label, ...permissions]; the relay writes the NIP-29
      // role at index 2 (["p", pubkey, "owner"]), which nostr-tools reports as the `label`.
      const admins = parseGroupAdminsEvent(event)
      if (admins.length !== 1) return `${admins.length} admins parsed, expected only alice`
      if (admins[0].pubkey !== alice.pk) return `admin ${admins[0].pubkey} is not alice ${alice.pk}`
      if (admins[0].label !== 'owner') return `alice's role (parsed label) is ${JSON.stringify(admins[0].label)}, expected "owner"`
      return null
    },
  })

  await pollState({
    ...common,
    what: 'group members',
    kind: 39002,
    fetchOnce: () => fetchGroupMembersEvent(fetchArgs),
    check(event) {
      const bad = signedByRelay(event, relayInfo)
      if (bad) return bad
      if (!event.tags.some((t) => t[0] === 'd' && t[1] === groupId)) return `no ["d", "${groupId}"] tag`
      const members = parseGroupMembersEvent(event)
      const pks = members.map((m) => m.pubkey)
      if (!sameSet(pks, [alice.pk, bob.pk])) return `members parsed ${JSON.stringify(pks)}, expected alice and bob`
      // The relay's 39002 p tags are ["p", pubkey, "", role]. nostr-tools' parseGroupMembersEvent
      // reads only ["p", pubkey, label]: it drops the role (label comes back ""), so the roles
      // are checked on the raw tags.
      const roles = {}
      for (const t of event.tags) if (t[0] === 'p') roles[t[1]] = t
      const expect = { [alice.pk]: 'owner', [bob.pk]: 'member' }
      for (const [pk, role] of Object.entries(expect)) {
        const t = roles[pk]
        if (t.length !== 4 || t[2] !== '' || t[3] !== role) {
          return `p tag of ${pk === alice.pk ? 'alice' : 'bob'} is ${JSON.stringify(t)}, expected ["p", <hex>, "", "${role}"]`
        }
      }
      return null
    },
  })
  pool.destroy()
  pools.delete(pool)

  // 7. Bob, a member, reads the channel's history (a filter naming the channel in #h).
  step = 'bob: REQ channel history'
  {
    const { sub, stored } = await subscribeUntilEose(bobRelay, [{ kinds: [9], '#h': [groupId] }])
    sub.close()
    if (!stored.some((e) => e.id === bobMessage.id)) {
      throw new Error(`history lacks bob's message ${bobMessage.id} (got ${stored.length} events: ${stored.map((e) => e.id).join(', ')})`)
    }
    if (stored.some((e) => e.id === carolMessage.id)) throw new Error(`history contains carol's refused message ${carolMessage.id}`)
    if (stored.length !== 1) throw new Error(`history has ${stored.length} events, expected only bob's message`)
    log(`bob's REQ {kinds:[9], #h:[${groupId}]} returned his message, then EOSE`)
  }

  //    A private group: Alice creates it (9007 with ["private"]) and posts in it; Carol's REQ
  //    for its chat is refused with CLOSED "restricted:" and nothing leaks before it.
  const createPrivate = generateCreateGroupEventTemplate(privateId, 'nip29 round trip, private')
  createPrivate.tags.push(['private'])
  await publishAccepted(aliceRelay, sign(alice, createPrivate), 'alice')
  const secret = sign(alice, {
    kind: 9,
    created_at: Math.floor(Date.now() / 1000),
    tags: [['h', privateId]],
    content: 'members only',
  })
  await publishAccepted(aliceRelay, secret, 'alice')
  step = 'carol: REQ private channel history (expect CLOSED "restricted:")'
  {
    let result
    try {
      result = await subscribeUntilEose(carolRelay, [{ kinds: [9], '#h': [privateId] }])
    } catch (err) {
      if (err.closedReason === undefined) throw err
      if (!err.closedReason.startsWith('restricted:')) {
        throw new Error(`CLOSED as expected, but with "${err.closedReason}", not "restricted:…"`)
      }
      if (err.stored.length) throw new Error(`${err.stored.length} event(s) arrived before CLOSED: ${err.stored.map((e) => e.id).join(', ')}`)
      log(`carol's REQ for private ${privateId} refused: CLOSED "${err.closedReason}"`)
    }
    if (result) {
      result.sub.close()
      throw new Error(`expected CLOSED "restricted:…", got EOSE after ${result.stored.length} event(s)`)
    }
  }

  for (const r of relays) r.close()
  relays.clear()
  step = 'done'
  log('PASSED')
  process.exit(0)
}

main().catch((err) => fail(err?.message || String(err)))
