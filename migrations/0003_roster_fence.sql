-- 0003_roster_fence: the database itself refuses a stale or malformed NIP-29
-- member list (kind 39002). Whoever inserts one (the roster actor, an old
-- node during a rolling deploy, a script in psql) passes through this
-- trigger, which takes the channel's membership lock SHARED, so the
-- snapshot is compared with a membership that cannot change until the
-- inserting transaction ends. Lock order: the writer already holds the
-- coordinate's replacement lock (write path S0), then this takes membership.
--
-- Written to be re-applied verbatim (CREATE OR REPLACE, DROP ... IF EXISTS):
-- `waggle serve` refuses to start if the trigger is missing, disabled or
-- inert, and the fix it names is to run this file again.

-- NULL when `p_raw` (a 39002's JSON) lists exactly the active members of the
-- channel with their roles, each as ["p", <64 lowercase hex>, <string>, <role>];
-- otherwise the reason it does not.
CREATE OR REPLACE FUNCTION waggle_roster_mismatch(p_community bigint, p_channel text, p_raw text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  doc jsonb := p_raw::jsonb;
  t jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM channels c
                  WHERE c.community_id = p_community AND c.id = p_channel AND c.deleted_at IS NULL) THEN
    RETURN 'no such channel';
  END IF;
  IF jsonb_typeof(doc -> 'tags') IS DISTINCT FROM 'array' THEN
    RETURN 'tags is not an array';
  END IF;
  -- What clients read is the JSON: its kind and its first d tag must be the
  -- row's (a row filed under one channel must not carry another's roster).
  IF (doc ->> 'kind') IS DISTINCT FROM '39002' THEN
    RETURN 'the JSON is not a kind 39002 event';
  END IF;
  IF (SELECT x.t ->> 1 FROM jsonb_array_elements(doc -> 'tags') WITH ORDINALITY AS x(t, n)
       WHERE jsonb_typeof(x.t) = 'array' AND (x.t ->> 0) = 'd' ORDER BY x.n LIMIT 1)
     IS DISTINCT FROM p_channel THEN
    RETURN 'the JSON names another channel in its d tag';
  END IF;
  FOR t IN SELECT value FROM jsonb_array_elements(doc -> 'tags') LOOP
    IF jsonb_typeof(t) IS DISTINCT FROM 'array' THEN
      RETURN 'a tag is not an array';
    END IF;
    CONTINUE WHEN (t ->> 0) IS DISTINCT FROM 'p';
    IF jsonb_array_length(t) <> 4 THEN
      RETURN 'a p tag does not have exactly 4 fields';
    END IF;
    IF jsonb_typeof(t -> 1) IS DISTINCT FROM 'string' OR (t ->> 1) !~ '^[0-9a-f]{64}$' THEN
      RETURN 'a p tag does not name a 32-byte hex pubkey';
    END IF;
    IF jsonb_typeof(t -> 2) IS DISTINCT FROM 'string' THEN
      RETURN 'a p tag relay field is not a string';
    END IF;
    IF jsonb_typeof(t -> 3) IS DISTINCT FROM 'string'
       OR (t ->> 3) NOT IN ('owner', 'admin', 'member', 'guest', 'bot') THEN
      RETURN 'a p tag has an unknown role';
    END IF;
  END LOOP;
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(doc -> 'tags') AS x(t)
              WHERE (x.t ->> 0) = 'p' GROUP BY x.t ->> 1 HAVING count(*) > 1) THEN
    RETURN 'a pubkey is listed twice';
  END IF;
  IF EXISTS (
      (SELECT decode(x.t ->> 1, 'hex'), x.t ->> 3
         FROM jsonb_array_elements(doc -> 'tags') AS x(t) WHERE (x.t ->> 0) = 'p'
       EXCEPT
       SELECT m.pubkey, m.role FROM channel_members m
        WHERE m.community_id = p_community AND m.channel_id = p_channel AND m.removed_at IS NULL)
      UNION ALL
      (SELECT m.pubkey, m.role FROM channel_members m
        WHERE m.community_id = p_community AND m.channel_id = p_channel AND m.removed_at IS NULL
       EXCEPT
       SELECT decode(x.t ->> 1, 'hex'), x.t ->> 3
         FROM jsonb_array_elements(doc -> 'tags') AS x(t) WHERE (x.t ->> 0) = 'p')) THEN
    RETURN 'members differ from channel_members';
  END IF;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION waggle_roster_fence() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  why text;
BEGIN
  -- The comparison must read the membership committed when the lock was
  -- granted; an older snapshot (REPEATABLE READ, SERIALIZABLE) could pass a
  -- roster that a change committed while this transaction waited made stale.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'roster snapshots are written at READ COMMITTED only (this transaction is %)',
      current_setting('transaction_isolation') USING ERRCODE = 'check_violation';
  END IF;
  PERFORM pg_advisory_xact_lock_shared(
    hashtextextended('waggle_membership:' || NEW.community_id || ':' || coalesce(NEW.d_tag, ''), 0));
  why := waggle_roster_mismatch(NEW.community_id, coalesce(NEW.d_tag, ''), NEW.raw);
  IF why IS NULL AND (NEW.raw::jsonb ->> 'pubkey') IS DISTINCT FROM encode(NEW.pubkey, 'hex') THEN
    why := 'the JSON is signed by another pubkey than the row says';
  END IF;
  IF why IS NOT NULL THEN
    RAISE EXCEPTION 'roster snapshot refused for channel %: %', coalesce(NEW.d_tag, ''), why
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;

-- The same check again at COMMIT, for the rows still live then: a
-- transaction that changes channel_members after inserting its roster (it
-- still holds the lock, so nobody else could) is caught here.
CREATE OR REPLACE FUNCTION waggle_roster_fence_at_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  why text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM events e
                  WHERE e.community_id = NEW.community_id AND e.id = NEW.id
                    AND e.deleted_at IS NULL) THEN
    RETURN NULL;  -- replaced or deleted before COMMIT
  END IF;
  why := waggle_roster_mismatch(NEW.community_id, coalesce(NEW.d_tag, ''), NEW.raw);
  IF why IS NOT NULL THEN
    RAISE EXCEPTION 'roster snapshot refused at commit for channel %: %', coalesce(NEW.d_tag, ''), why
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$$;

-- Every change of membership takes the channel's membership lock EXCLUSIVE,
-- whoever makes it: the relay's commands already hold it (re-entrant, free);
-- a script changing channel_members directly now waits for any roster
-- capture or fence check in flight instead of slipping past it.
CREATE OR REPLACE FUNCTION waggle_membership_change_lock() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_advisory_xact_lock(
      hashtextextended('waggle_membership:' || OLD.community_id || ':' || OLD.channel_id, 0));
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM pg_advisory_xact_lock(
      hashtextextended('waggle_membership:' || NEW.community_id || ':' || NEW.channel_id, 0));
  END IF;
  RETURN coalesce(NEW, OLD);
END
$$;

DROP TRIGGER IF EXISTS waggle_membership_change_lock ON channel_members;
CREATE TRIGGER waggle_membership_change_lock
  BEFORE INSERT OR UPDATE OR DELETE ON channel_members
  FOR EACH ROW EXECUTE FUNCTION waggle_membership_change_lock();

-- INSERT, and any UPDATE that could make a stale roster live again (an
-- "undelete", a rewrite of its JSON, a move to another channel or kind).
-- Soft deletions (deleted_at set) are not checked.
DROP TRIGGER IF EXISTS waggle_roster_fence ON events;
CREATE TRIGGER waggle_roster_fence
  BEFORE INSERT OR UPDATE OF raw, deleted_at, d_tag, kind, community_id ON events
  FOR EACH ROW WHEN (NEW.kind = 39002 AND NEW.deleted_at IS NULL)
  EXECUTE FUNCTION waggle_roster_fence();

DROP TRIGGER IF EXISTS waggle_roster_fence_at_commit ON events;
CREATE CONSTRAINT TRIGGER waggle_roster_fence_at_commit
  AFTER INSERT OR UPDATE OF raw, deleted_at, d_tag, kind, community_id ON events
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.kind = 39002 AND NEW.deleted_at IS NULL)
  EXECUTE FUNCTION waggle_roster_fence_at_commit();
