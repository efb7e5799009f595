-- 0010_replicas: the freshness proof of replica reads (docs/replicas.md).
--
-- replica_heartbeat: ONE row. Every node's heartbeat prober bumps `token` on
-- the writer (so the tokens of all nodes are totally ordered) after sampling
-- the fence; a replica that shows token T has replayed that commit and every
-- commit before it. `epoch` changes when a token ever goes backwards (a
-- restored or failed-over primary): proofs of the old epoch are void.
CREATE TABLE replica_heartbeat (
  id    int    PRIMARY KEY CHECK (id = 1),
  token bigint NOT NULL,
  epoch text   NOT NULL
);
INSERT INTO replica_heartbeat (id, token, epoch) VALUES (1, 0, gen_random_uuid()::text);

-- The commit floor F: an event row whose created_at is at least
-- clock_timestamp() - F when it is inserted is "on time"; the covered
-- predicate relies on it (docs/replicas.md, "The proof"). F is above the
-- relay's created_at window (900 s) with room for clock skew between nodes and
-- the database. One definition, read by the trigger and by the prober.
CREATE FUNCTION waggle_commit_floor_secs() RETURNS int
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 960';

-- Rows inserted with an older created_at (imports, clock skew, tests) are
-- never refused: their community keeps a mark at or after the time one was
-- inserted, and covered reads of that community stay on the writer until the
-- fence passes it (docs/replicas.md, "Late rows"). The watermark is the
-- greatest mark of the community. Marks are only inserted, never updated,
-- and older ones are deleted with SKIP LOCKED, so two transactions that
-- insert late rows into one community never wait for each other (one row
-- updated in place would hold its lock until commit and serialise them).
CREATE TABLE history_backfill (
  community_id bigint      NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
  last_at      timestamptz NOT NULL
);
CREATE INDEX history_backfill_mark ON history_backfill (community_id, last_at);

-- A mark is one second ahead of the insert, and a late row whose community
-- already holds a visible mark at or after its own insert time adds none: a
-- bulk import writes about one mark a second, not one per row. A mark it
-- relies on is committed (or its own transaction's), so it is visible
-- whenever the row is. Deleting the older marks in the same transaction as
-- the new one keeps the greatest mark visible at every instant. The clock is
-- read once, after the row's insert (an AFTER ROW trigger runs at the end of
-- its statement), so it bounds the index scan. Only a READ COMMITTED
-- transaction deletes: under REPEATABLE READ a mark another transaction
-- deleted since the snapshot is a serialization failure, and an old mark
-- left behind is harmless (the next late insert of the community removes it).
CREATE FUNCTION waggle_note_late_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  now_ timestamptz := clock_timestamp();
  mark timestamptz := now_ + interval '1 second';
BEGIN
  IF EXISTS (SELECT 1 FROM history_backfill
              WHERE community_id = NEW.community_id AND last_at >= now_) THEN
    RETURN NULL;
  END IF;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    DELETE FROM history_backfill
     WHERE ctid IN (SELECT ctid FROM history_backfill
                     WHERE community_id = NEW.community_id AND last_at < mark
                       FOR UPDATE SKIP LOCKED);
  END IF;
  INSERT INTO history_backfill (community_id, last_at) VALUES (NEW.community_id, mark);
  RETURN NULL;
END $$;

-- The WHEN clause is evaluated without calling the function, so an on-time
-- row costs one clock reading. clock_timestamp(), not transaction_timestamp():
-- the proof needs the time of the insert itself (docs/replicas.md).
CREATE TRIGGER events_note_late AFTER INSERT ON events
  FOR EACH ROW
  WHEN (NEW.created_at < extract(epoch FROM clock_timestamp()) - waggle_commit_floor_secs())
  EXECUTE FUNCTION waggle_note_late_event();
