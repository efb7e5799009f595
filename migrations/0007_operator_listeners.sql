-- 0007_operator_listeners: mentions of registered agents wake their
-- operator's listener (docs/delivery.md).
--
-- A listener (a key named in --operator-listeners) registers target keys per
-- community over POST /operator/listener/pubkeys; registering again renews
-- created_at, and a registration older than 30 days is reaped.
CREATE TABLE operator_listener_pubkeys (
  community_id    bigint      NOT NULL REFERENCES communities (id),
  target_pubkey   bytea       NOT NULL,
  listener_pubkey bytea       NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, target_pubkey, listener_pubkey),
  CONSTRAINT operator_listener_pubkeys_target_len CHECK (octet_length(target_pubkey) = 32),
  CONSTRAINT operator_listener_pubkeys_listener_len CHECK (octet_length(listener_pubkey) = 32)
);
-- GET lists one listener's registrations in one community.
CREATE INDEX operator_listener_pubkeys_by_listener
  ON operator_listener_pubkeys (community_id, listener_pubkey);
-- The daily reaper, one community at a time (every index of a tenant table
-- leads with community_id, tests/db/migrate_test.cpp).
CREATE INDEX operator_listener_pubkeys_age ON operator_listener_pubkeys (community_id, created_at);

-- One row per (listener, target, community, event), written in the event's
-- transaction, so it commits or rolls back with the event, and a duplicate
-- event (ON CONFLICT) adds nothing. `delivery_id` is what the listener sees
-- (X-Waggle-Delivery-Id), stable across retries. A row is `pending` until a
-- supervisor claims it (`sending`, with its claim_id and a lease, and
-- next_attempt_at = lease_until); every completion names that claim_id, so a
-- claim that expired and was taken by another supervisor cannot be completed
-- by the first.
CREATE TABLE operator_listener_outbox (
  id               bigserial   NOT NULL,
  delivery_id      uuid        NOT NULL DEFAULT gen_random_uuid(),
  community_id     bigint      NOT NULL REFERENCES communities (id),
  listener_pubkey  bytea       NOT NULL,
  target_pubkey    bytea       NOT NULL,
  event_id         bytea       NOT NULL,
  event_kind       int         NOT NULL,
  event_created_at bigint      NOT NULL,
  state            text        NOT NULL DEFAULT 'pending',
  attempts         int         NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_until      timestamptz,
  claim_id         uuid,
  created_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT operator_listener_outbox_state CHECK (state IN ('pending', 'sending')),
  CONSTRAINT operator_listener_outbox_claimed CHECK ((state = 'sending') = (claim_id IS NOT NULL)),
  PRIMARY KEY (community_id, id),
  UNIQUE (community_id, listener_pubkey, target_pubkey, event_id)
);
-- Claims: one probe per listener, rows that are due, oldest due first,
-- pending or sending alike. A claim sets next_attempt_at to its lease_until,
-- so a sending row whose lease ran out is due by the same predicate as a
-- pending row, and one ordered scan of this index serves both (partial
-- indexes per state would need an OR and a sort of every due row).
-- The one index that does not lead with community_id (the tenant rule's
-- exemption, tests/db/migrate_test.cpp): the queue is claimed by the node
-- across communities, never for one tenant, and a community-leading key
-- made every claim probe every community.
CREATE INDEX operator_listener_outbox_due
  ON operator_listener_outbox (listener_pubkey, next_attempt_at, id) INCLUDE (community_id);
-- The 15-minute reaper.
CREATE INDEX operator_listener_outbox_age ON operator_listener_outbox (community_id, created_at);
