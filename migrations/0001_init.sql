-- 0001_init: communities, events, the single-letter tag index and the
-- migration ledger. Every tenant-owned table and index leads with
-- community_id (DESIGN §3, docs/tag-index.md).

-- The ledger is also created by the migration runner before it reads it (a
-- bootstrap); IF NOT EXISTS keeps both definitions in agreement.
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    int PRIMARY KEY,
  name       text NOT NULL,
  checksum   text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE communities (
  id          bigserial PRIMARY KEY,
  host        text NOT NULL,
  name        text NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL DEFAULT now(),
  archived_at timestamptz
);
CREATE UNIQUE INDEX communities_host_key ON communities (lower(host));

-- One row per (community, event). The same signed event may be stored in two
-- communities: two rows. `raw` is the event's compact JSON as text and is
-- returned verbatim (jsonb cannot hold \u0000, which NIP-01 allows).
-- `d_tag` is NULL unless the kind is addressable (30000-39999), where it is
-- the d tag's value ('' when absent), so coalesce(d_tag, '') names the
-- replaceable/addressable coordinate without ambiguity inside one kind.
CREATE TABLE events (
  community_id bigint      NOT NULL REFERENCES communities (id),
  id           bytea       NOT NULL,
  pubkey       bytea       NOT NULL,
  created_at   bigint      NOT NULL,
  kind         int         NOT NULL,
  d_tag        text,
  raw          text        NOT NULL,
  received_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at   timestamptz,
  PRIMARY KEY (community_id, id),
  CONSTRAINT events_id_len CHECK (octet_length(id) = 32),
  CONSTRAINT events_pubkey_len CHECK (octet_length(pubkey) = 32),
  CONSTRAINT events_d_tag_iff_addressable
    CHECK ((d_tag IS NOT NULL) = (kind BETWEEN 30000 AND 39999))
);

-- Global timeline of a community (filters with no author/kind/tag driver).
CREATE INDEX events_live_created ON events (community_id, created_at DESC, id)
  WHERE deleted_at IS NULL;
-- Per kind, newest first ({kinds:[...]}).
CREATE INDEX events_live_kind ON events (community_id, kind, created_at DESC, id)
  WHERE deleted_at IS NULL;
-- Per author, newest first ({authors:[...]}, kinds checked on the row).
CREATE INDEX events_live_pubkey ON events (community_id, pubkey, created_at DESC, id)
  WHERE deleted_at IS NULL;
-- The replaceable/addressable head: at most ONE live row per coordinate
-- (community, kind, pubkey, d). Writers serialise on an advisory lock per
-- coordinate (db/event_store.cpp); this index is the invariant they keep and
-- serves head look-ups and `a`-tag deletions. The kind predicate is repeated
-- verbatim in the queries that must use this index.
CREATE UNIQUE INDEX events_live_coordinate
  ON events (community_id, kind, pubkey, (coalesce(d_tag, '')))
  WHERE deleted_at IS NULL
    AND (kind IN (0, 3) OR kind BETWEEN 10000 AND 19999 OR kind BETWEEN 30000 AND 39999);

-- Single-letter tag index (docs/tag-index.md): one row per single-letter tag
-- (a-z, A-Z) of a stored event, holding the tag's FIRST value, as NIP-01
-- filters match. Values longer than 256 bytes are not indexed (filters cannot
-- ask for them). Rows are written in the same statement as their event and
-- only for events that statement inserted. Duplicate (name, value) pairs of
-- one event are folded before insert. Lookups are index-only: every column is
-- in the index, kind and pubkey as INCLUDE columns so kinds and authors
-- filters are checked on the index entry, without a heap visit and without
-- breaking the created_at order. Deletion requests (kind 5) are found here
-- too, by their `e`/`a` values, with their author.
CREATE TABLE event_tags (
  community_id bigint NOT NULL,
  event_id     bytea  NOT NULL,
  name         text   NOT NULL,
  value        text   NOT NULL,
  kind         int    NOT NULL,
  created_at   bigint NOT NULL,
  pubkey       bytea  NOT NULL,
  CONSTRAINT event_tags_name_len CHECK (length(name) = 1),
  CONSTRAINT event_tags_value_len CHECK (octet_length(value) <= 256)
);
CREATE UNIQUE INDEX event_tags_lookup
  ON event_tags (community_id, name, value, created_at DESC, event_id) INCLUDE (kind, pubkey);
