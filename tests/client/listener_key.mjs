// The operator listener's key in the listener-retry trace (listener_standin.mjs serves as that
// listener; trace_scenarios.mjs registers targets with it). A fixed test key: the relay's
// --operator-listeners entry names its public half before any client runs.
import { getPublicKey } from 'nostr-tools/pure'

export const listenerSecret = Uint8Array.from({ length: 32 }, (_, i) => (i === 31 ? 0x2a : 0))
export const listenerPubkey = getPublicKey(listenerSecret)
