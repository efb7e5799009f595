-- 0012_bus: the PostgreSQL bus driver's tables (docs/bus.md, "PostgreSQL").
--
-- All LOGGED: an UNLOGGED table is truncated by a crash, is empty on a
-- promoted standby, and (PostgreSQL 15) its sequence restarts at 1. A publish
-- commits with synchronous_commit = off instead: no wait for the WAL flush,
-- and a crash loses at most the last few hundred milliseconds of messages,
-- which the driver's at-most-once promise allows.

-- The nodes of the cluster: the bus's liveness registry and the CAF driver's
-- address book. A node heartbeats every 10 s; one silent for 30 s is dead,
-- and its subscriptions stop counting as responders.
CREATE TABLE bus_nodes (
  node_id          text PRIMARY KEY CHECK (length(node_id) BETWEEN 1 AND 64),
  address          text NOT NULL DEFAULT '',
  port             integer NOT NULL DEFAULT 0,
  protocol_version integer NOT NULL,
  started_at       timestamptz NOT NULL DEFAULT now(),
  heartbeat_at     timestamptz NOT NULL DEFAULT now()
);

-- What each node subscribes to (one row per node, subject and group while
-- it has a local subscriber): a request asks it whether anyone responds. Subject and group are stored whole and compared exactly; the
-- hash is an index key only.
CREATE TABLE bus_subscriptions (
  node_id      text NOT NULL REFERENCES bus_nodes ON DELETE CASCADE,
  subject      text NOT NULL,
  grp          text NOT NULL DEFAULT '',
  subject_hash bigint NOT NULL,
  PRIMARY KEY (node_id, subject, grp)
);
CREATE INDEX bus_subscriptions_subject ON bus_subscriptions (subject_hash);

-- The messages. `xid` is the publishing transaction's id: a reader takes
-- what committed between two snapshots of its own (pg_visible_in_snapshot),
-- which needs no clock and skips nothing, where a cursor on `id` would skip
-- a lower id that commits after a higher one. `id` orders the rows of one
-- transaction and keys the queue-group claims.
CREATE TABLE bus_messages (
  id           bigserial PRIMARY KEY,
  xid          xid8 NOT NULL DEFAULT pg_current_xact_id(),
  shard        smallint NOT NULL CHECK (shard BETWEEN 0 AND 31),
  subject_hash bigint NOT NULL,
  subject      text NOT NULL,
  reply_to     text NOT NULL DEFAULT '',
  payload      bytea NOT NULL CHECK (octet_length(payload) <= 1048576),
  published_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- A shard's fetch: the rows after the reader's snapshot, in commit-group order.
CREATE INDEX bus_messages_fetch ON bus_messages (shard, xid, id);
-- Garbage collection deletes the oldest rows by this index, a bounded batch
-- at a time, never by scanning the table.
CREATE INDEX bus_messages_published ON bus_messages (published_at);

-- Queue groups: the first node to claim (message, group) delivers it to one
-- of its members; every other node with members of the group skips it.
CREATE TABLE bus_claims (
  message_id bigint NOT NULL REFERENCES bus_messages ON DELETE CASCADE,
  grp        text NOT NULL,
  node_id    text NOT NULL,
  PRIMARY KEY (message_id, grp)
);
