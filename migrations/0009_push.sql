-- 0009_push: phone wakes (docs/push.md). Leases come from signed kind 30350
-- events; the push gate enqueues match jobs in the event's transaction; the
-- matcher turns jobs into wakes; push delivery sends wakes to the gateway.
-- Lock domains and their order: docs/lock-protocol.md.

-- One row per (community, author, installation): the newest accepted lease
-- event at that address. A lease is LIVE (waggle_push_lease_live) while it is
-- active, its endpoint enabled, it has not expired and its source event is
-- still live: deleting the lease event (NIP-09, NIP-40 reaping) ends it
-- without touching this row, so no event write ever locks a lease row (the
-- lock order of docs/lock-protocol.md depends on it). `active` is cleared by
-- the sweep for expired or deleted leases; `endpoint_enabled` by a 410 for
-- exactly this generation. Empty `channels` or `kinds` mean "every one".
CREATE TABLE push_leases (
  community_id      bigint      NOT NULL REFERENCES communities (id),
  author            bytea       NOT NULL,
  installation_id   text        NOT NULL,
  source_event_id   bytea       NOT NULL,
  source_created_at bigint      NOT NULL,
  generation        bigint      NOT NULL,
  active            boolean     NOT NULL DEFAULT true,
  endpoint_enabled  boolean     NOT NULL DEFAULT true,
  endpoint_grant    text        NOT NULL,
  endpoint_hash     bytea       NOT NULL,
  app               text        NOT NULL,
  channels          text[]      NOT NULL DEFAULT '{}',
  kinds             int[]       NOT NULL DEFAULT '{}',
  mutes             text[]      NOT NULL DEFAULT '{}',
  expires_at        bigint      NOT NULL,
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, author, installation_id),
  CONSTRAINT push_leases_author_len CHECK (octet_length(author) = 32),
  CONSTRAINT push_leases_hash_len CHECK (octet_length(endpoint_hash) = 32),
  CONSTRAINT push_leases_generation CHECK (generation > 0)
);
CREATE UNIQUE INDEX push_leases_source ON push_leases (community_id, source_event_id);
-- One live lease per endpoint in a community (the same phone may hold a lease
-- in each community it belongs to).
CREATE UNIQUE INDEX push_leases_endpoint ON push_leases (community_id, endpoint_hash) WHERE active;

CREATE FUNCTION waggle_push_lease_live(l push_leases, p_now bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT l.active AND l.endpoint_enabled AND l.expires_at > p_now
     AND EXISTS (SELECT 1 FROM events e
                  WHERE e.community_id = l.community_id AND e.id = l.source_event_id
                    AND e.deleted_at IS NULL)
$$;

-- One job per (community, event) of a push kind committed while the community
-- had a live lease. A claim sets state 'matching', a fresh claim_id and
-- next_attempt_at = its lease's end, so an abandoned claim is simply due
-- again (one predicate, one index); attempts counts claims.
CREATE TABLE push_match_queue (
  community_id    bigint      NOT NULL,
  event_id        bytea       NOT NULL,
  state           text        NOT NULL DEFAULT 'pending',
  attempts        int         NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  claim_id        uuid,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, event_id),
  CONSTRAINT push_match_queue_state CHECK (state IN ('pending', 'matching')),
  CONSTRAINT push_match_queue_claimed CHECK ((state = 'matching') = (claim_id IS NOT NULL))
);
-- The claim: the oldest due job decides the community (the one index that
-- does not lead with community_id, like the operator outbox's: the node
-- claims across communities), then that community's due jobs.
CREATE INDEX push_match_queue_due ON push_match_queue (next_attempt_at) WHERE attempts < 8;
CREATE INDEX push_match_queue_community_due
  ON push_match_queue (community_id, next_attempt_at) WHERE attempts < 8;
-- The 30 s sweep of exhausted jobs (never on the claim path).
CREATE INDEX push_match_queue_exhausted ON push_match_queue (community_id) WHERE attempts >= 8;

-- One wake per (community, endpoint, event): the dedup key. Endpoint grant
-- and hash are copied from the lease when the wake is written, so no caller
-- can redirect a wake. `request_id` is what the gateway sees, stable across
-- retries. Delivered and failed rows stay (the key keeps a backfill or a
-- re-matched job from waking the same phone twice) until the sweep prunes
-- them past their expiry.
CREATE TABLE push_wake_outbox (
  id               bigserial   NOT NULL,
  request_id       uuid        NOT NULL DEFAULT gen_random_uuid(),
  community_id     bigint      NOT NULL REFERENCES communities (id),
  author           bytea       NOT NULL,
  installation_id  text        NOT NULL,
  lease_generation bigint      NOT NULL,
  endpoint_hash    bytea       NOT NULL,
  endpoint_grant   text        NOT NULL,
  event_id         bytea       NOT NULL,
  expires_at       bigint      NOT NULL,
  state            text        NOT NULL DEFAULT 'pending',
  attempts         int         NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  claim_id         uuid,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, id),
  UNIQUE (community_id, endpoint_hash, event_id),
  CONSTRAINT push_wake_outbox_state CHECK (state IN ('pending', 'sending', 'delivered', 'failed')),
  CONSTRAINT push_wake_outbox_claimed CHECK ((state = 'sending') = (claim_id IS NOT NULL))
);
-- Retry claims across communities (exempt from the tenant-index rule like
-- the other queues' due indexes).
CREATE INDEX push_wake_outbox_due ON push_wake_outbox (next_attempt_at)
  WHERE state IN ('pending', 'sending');
-- The sweep's scan of old rows, across communities (exempt as well).
CREATE INDEX push_wake_outbox_age ON push_wake_outbox (created_at);

-- The push kinds: chat (9), and the thread/workflow kinds 40002, 45001,
-- 45003. The same set wakes operator listeners (db/operator_outbox.hpp).
CREATE FUNCTION waggle_is_push_kind(p_kind int) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT p_kind IN (9, 40002, 45001, 45003) $$;

-- The gate, in the inserting batch's transaction, after its events are in
-- (docs/push.md, "The gate"). PL/pgSQL on purpose: in READ COMMITTED each
-- statement of a volatile function takes a new snapshot, so the INSERT below
-- runs after the shared locks are granted and sees a lease whose activation
-- committed while this transaction waited for them. (One SQL statement that
-- locked and read would read from a snapshot taken before the wait: the lost
-- wake the lock exists to prevent.) NOTIFYs the matcher only when it added
-- jobs; the notification is delivered at COMMIT.
CREATE FUNCTION waggle_push_gate(p_community bigint[], p_event bytea[]) RETURNS int
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  k bigint;
  n int;
  queued boolean;
BEGIN
  FOR k IN SELECT DISTINCT hashtextextended('waggle_push_gate:' || c, 0)
             FROM unnest(p_community) AS c ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock_shared(k);
  END LOOP;
  -- The doorbell rings only into an empty queue. Every NOTIFY costs the
  -- listening backend a transaction of its own (it reads the queue in one),
  -- a commit per batch; while jobs of these communities are queued, a NOTIFY
  -- for them woke the matcher already, and a matcher that ran a batch with
  -- jobs runs again after its interval without being told (docs/push.md).
  queued := EXISTS (SELECT 1 FROM push_match_queue q
                     WHERE q.community_id = ANY (p_community) AND q.attempts < 8
                       AND (q.state = 'matching' OR q.next_attempt_at <= now()));
  INSERT INTO push_match_queue (community_id, event_id)
  SELECT u.c, u.e FROM unnest(p_community, p_event) AS u(c, e)
   WHERE EXISTS (SELECT 1 FROM push_leases l
                  WHERE l.community_id = u.c
                    AND waggle_push_lease_live(l, extract(epoch FROM clock_timestamp())::bigint))
   ORDER BY u.c, u.e
  ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 AND NOT queued THEN
    PERFORM pg_notify('waggle_push', '');
  END IF;
  RETURN n;
END
$$;

-- Accepting a lease, in the lease event's own transaction, after the write
-- path stored the event (which took the address's replacement lock: the
-- first lock of this protocol). Then the author lock (the quota), then
-- push_gate EXCLUSIVE, which waits for every batch and every matcher batch
-- that holds it SHARED to commit; only then the lease row (so a matcher's
-- flush, which locks lease rows under its SHARED gate lock, never waits for
-- an acceptance that waits for it). The backfill reads with a fresh snapshot
-- (after the EXCLUSIVE lock's wait) and runs only for an activation: a
-- renewal of a live lease needs none, every event since it went live has its
-- job. Returns the outcome; anything but 'activated' or 'renewed' is a
-- refusal, and the caller rolls the whole transaction back (the event too).
CREATE FUNCTION waggle_accept_lease(p_community bigint, p_author bytea, p_installation text,
                                    p_event bytea, p_created_at bigint, p_generation bigint,
                                    p_grant text, p_hash bytea, p_app text, p_channels text[],
                                    p_kinds int[], p_mutes text[], p_expires_at bigint,
                                    p_quota int, p_backfill_seconds int, p_skipped bytea[],
                                    p_created_at_window int)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  now_s bigint := extract(epoch FROM clock_timestamp())::bigint;
  prev push_leases;
  renewal boolean := false;
  n int;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(
    'waggle_push_author:' || p_community || ':' || encode(p_author, 'hex'), 0));
  PERFORM pg_advisory_xact_lock(hashtextextended('waggle_push_gate:' || p_community, 0));
  SELECT * INTO prev FROM push_leases
   WHERE community_id = p_community AND author = p_author AND installation_id = p_installation
     FOR UPDATE;
  IF FOUND THEN
    IF prev.generation >= p_generation THEN
      RETURN 'stale_generation';
    END IF;
    -- The write path has just soft-deleted prev's source event (replaced by
    -- this one): whether prev was live is judged without that.
    renewal := prev.active AND prev.endpoint_enabled AND prev.expires_at > now_s;
  END IF;
  IF p_expires_at <= now_s THEN
    RETURN 'expired';
  END IF;
  UPDATE push_leases SET active = false, updated_at = now()
   WHERE community_id = p_community AND author = p_author AND active AND expires_at <= now_s;
  IF (SELECT count(*) FROM push_leases l
       WHERE l.community_id = p_community AND l.author = p_author
         AND l.installation_id <> p_installation AND waggle_push_lease_live(l, now_s)) >= p_quota THEN
    RETURN 'quota';
  END IF;
  IF EXISTS (SELECT 1 FROM push_leases
              WHERE community_id = p_community AND endpoint_hash = p_hash AND active
                AND (author, installation_id) <> (p_author, p_installation)) THEN
    RETURN 'endpoint_taken';
  END IF;
  INSERT INTO push_leases AS l (community_id, author, installation_id, source_event_id,
                                source_created_at, generation, active, endpoint_enabled,
                                endpoint_grant, endpoint_hash, app, channels, kinds, mutes,
                                expires_at)
  VALUES (p_community, p_author, p_installation, p_event, p_created_at, p_generation, true, true,
          p_grant, p_hash, p_app, p_channels, p_kinds, p_mutes, p_expires_at)
  ON CONFLICT (community_id, author, installation_id) DO UPDATE
     SET source_event_id = EXCLUDED.source_event_id,
         source_created_at = EXCLUDED.source_created_at, generation = EXCLUDED.generation,
         active = true, endpoint_enabled = true, endpoint_grant = EXCLUDED.endpoint_grant,
         endpoint_hash = EXCLUDED.endpoint_hash, app = EXCLUDED.app,
         channels = EXCLUDED.channels, kinds = EXCLUDED.kinds, mutes = EXCLUDED.mutes,
         expires_at = EXCLUDED.expires_at, updated_at = now()
   WHERE l.generation < EXCLUDED.generation;
  IF renewal THEN
    RETURN 'renewed';
  END IF;
  -- The backfill. Recent events of the push kinds, by their arrival (the
  -- created_at bound, the relay's created_at window wider, only lets the
  -- kind index serve it); and the events this node's ingest stored without
  -- the gate statement while it believed the community had no lease
  -- (docs/push.md, "Why the gate cache loses no wake"). A job that exists
  -- is left as it is: no matcher holds one now (a matcher holds the gate
  -- SHARED from before it claims until it commits), so its next batch, after
  -- this commit, matches it with this lease too.
  INSERT INTO push_match_queue (community_id, event_id)
  SELECT e.community_id, e.id FROM events e
   WHERE e.community_id = p_community
     AND e.kind IN (9, 40002, 45001, 45003) AND e.deleted_at IS NULL
     AND e.created_at >= now_s - p_backfill_seconds - p_created_at_window
     AND e.received_at >= clock_timestamp() - make_interval(secs => p_backfill_seconds)
  UNION
  SELECT e.community_id, e.id FROM events e
   WHERE e.community_id = p_community AND e.id = ANY (p_skipped) AND e.deleted_at IS NULL
     AND waggle_is_push_kind(e.kind)
  ORDER BY 1, 2
  ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    PERFORM pg_notify('waggle_push', '');
  END IF;
  RETURN 'activated';
END
$$;
