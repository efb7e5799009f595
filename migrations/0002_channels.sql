-- 0002_channels: NIP-29 groups ("channels"), their members, the channel of
-- each stored event, and the TTL refresh of ephemeral channels.
-- Lock protocol: DESIGN §5 and docs/channels.md.

-- A channel is a NIP-29 group; `id` is the group id clients put in `h` tags.
-- `community_id` and `id` never change (trigger below). ttl_seconds NULL means
-- permanent; otherwise every channel event except the creation (kind 9007)
-- moves ttl_deadline to commit time + ttl_seconds, and the TTL reaper
-- archives the channel once the deadline passes.
CREATE TABLE channels (
  community_id bigint      NOT NULL REFERENCES communities (id),
  id           text        NOT NULL,
  name         text        NOT NULL DEFAULT '',
  about        text        NOT NULL DEFAULT '',
  picture      text        NOT NULL DEFAULT '',
  type         text        NOT NULL DEFAULT 'stream',
  visibility   text        NOT NULL DEFAULT 'open',
  ttl_seconds  integer,
  ttl_deadline timestamptz,
  created_by   bytea       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  archived_at  timestamptz,
  deleted_at   timestamptz,
  PRIMARY KEY (community_id, id),
  CONSTRAINT channels_id_shape CHECK (id ~ '^[a-z0-9_-]{1,64}$'),
  CONSTRAINT channels_type CHECK (type IN ('stream', 'forum', 'dm', 'workflow', 'system')),
  CONSTRAINT channels_visibility CHECK (visibility IN ('open', 'private')),
  CONSTRAINT channels_ttl_positive CHECK (ttl_seconds IS NULL OR ttl_seconds > 0),
  CONSTRAINT channels_created_by_len CHECK (octet_length(created_by) = 32)
);

-- The reaper's scan: live ephemeral channels by deadline. Partial, so it
-- holds only live ephemeral channels and a sweep across every community reads
-- it whole; it still leads with community_id like every tenant index.
CREATE INDEX channels_ttl_due ON channels (community_id, ttl_deadline)
  WHERE ttl_seconds IS NOT NULL AND archived_at IS NULL AND deleted_at IS NULL;

CREATE FUNCTION waggle_channels_keep_identity() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.community_id IS DISTINCT FROM OLD.community_id OR NEW.id IS DISTINCT FROM OLD.id THEN
    RAISE EXCEPTION 'a channel never changes its community or id (%:%)', OLD.community_id, OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER waggle_channels_keep_identity BEFORE UPDATE OF community_id, id ON channels
  FOR EACH ROW EXECUTE FUNCTION waggle_channels_keep_identity();

-- Membership. Removal is soft (removed_at/removed_by); re-adding clears it.
-- Every change runs under the channel's membership advisory lock taken
-- EXCLUSIVE; role checks and roster captures take it SHARED.
CREATE TABLE channel_members (
  community_id bigint      NOT NULL,
  channel_id   text        NOT NULL,
  pubkey       bytea       NOT NULL,
  role         text        NOT NULL,
  added_by     bytea       NOT NULL,
  added_at     timestamptz NOT NULL DEFAULT now(),
  removed_at   timestamptz,
  removed_by   bytea,
  PRIMARY KEY (community_id, channel_id, pubkey),
  FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id),
  CONSTRAINT channel_members_role CHECK (role IN ('owner', 'admin', 'member', 'guest', 'bot')),
  CONSTRAINT channel_members_pubkey_len CHECK (octet_length(pubkey) = 32),
  CONSTRAINT channel_members_removed CHECK ((removed_at IS NULL) = (removed_by IS NULL))
);
-- "Which channels is this pubkey in" (access checks, push matching later).
CREATE INDEX channel_members_by_pubkey ON channel_members (community_id, pubkey, channel_id)
  WHERE removed_at IS NULL;

-- The channel an event belongs to: the value of its single `h` tag (NULL =
-- community-wide). Set by the write path; a filter without `#h` never
-- matches a row with a channel. Adding a nullable column is instant.
ALTER TABLE events ADD COLUMN channel text;

-- Relay-signed group state (39000-39003) by coordinate, deleted rows
-- included: a republished snapshot takes created_at = max(now, newest + 1)
-- so it can never reproduce the id of a deleted one.
CREATE INDEX events_group_state ON events (community_id, d_tag, kind, created_at DESC)
  WHERE kind BETWEEN 39000 AND 39003;

-- The TTL refresh of one batch, called by the write path as its last
-- statement before COMMIT (DESIGN §4: set-wise side effects). For each
-- distinct channel it takes `waggle_channel_ttl:<community>:<channel>` SHARED
-- (sorted by key, so batches never wait on each other in a cycle), reads
-- ttl_seconds with a plain SELECT (never FOR UPDATE: commits to a permanent
-- channel take no tuple lock and write nothing), and moves the deadline of
-- the ephemeral ones. A TTL change takes the same key EXCLUSIVE before its
-- UPDATE, so an event either commits before the change or sees the new TTL.
-- A failure is a WARNING and never rejects the events (the EXCEPTION block
-- is one subtransaction per batch, not per event).
CREATE FUNCTION waggle_refresh_channel_ttl(p_community bigint[], p_channel text[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  k record;
  ephemeral_community bigint[] := '{}';
  ephemeral_channel text[] := '{}';
  ephemeral_ttl integer[] := '{}';
  refreshed integer := 0;
BEGIN
  FOR k IN
    SELECT DISTINCT hashtextextended('waggle_channel_ttl:' || u.community_id || ':' || u.channel, 0) AS h
      FROM unnest(p_community, p_channel) AS u(community_id, channel)
     WHERE u.channel IS NOT NULL
     ORDER BY 1
  LOOP
    PERFORM pg_advisory_xact_lock_shared(k.h);
  END LOOP;
  SELECT coalesce(array_agg(c.community_id), '{}'), coalesce(array_agg(c.id), '{}'),
         coalesce(array_agg(c.ttl_seconds), '{}')
    INTO ephemeral_community, ephemeral_channel, ephemeral_ttl
    FROM channels c
   WHERE (c.community_id, c.id) IN (SELECT DISTINCT u.community_id, u.channel
                                      FROM unnest(p_community, p_channel) AS u(community_id, channel))
     AND c.ttl_seconds IS NOT NULL AND c.archived_at IS NULL AND c.deleted_at IS NULL;
  IF cardinality(ephemeral_channel) > 0 THEN
    -- Row locks of ephemeral channels in key order, so two batches that
    -- refresh the same channels never deadlock on them (permanent channels
    -- are never locked at all).
    PERFORM 1 FROM channels c
      WHERE (c.community_id, c.id) IN (SELECT * FROM unnest(ephemeral_community, ephemeral_channel))
      ORDER BY c.community_id, c.id
      FOR NO KEY UPDATE;
    UPDATE channels c
       SET ttl_deadline = clock_timestamp() + make_interval(secs => e.ttl)
      FROM unnest(ephemeral_community, ephemeral_channel, ephemeral_ttl) AS e(community_id, id, ttl)
     WHERE c.community_id = e.community_id AND c.id = e.id;
    GET DIAGNOSTICS refreshed = ROW_COUNT;
  END IF;
  RETURN refreshed;
EXCEPTION WHEN OTHERS THEN
  RAISE WARNING 'waggle: channel TTL refresh failed (events are kept): % (SQLSTATE %)',
    SQLERRM, SQLSTATE;
  RETURN -1;
END
$$;
