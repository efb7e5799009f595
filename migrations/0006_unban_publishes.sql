-- An unban of a key that is still a member must publish it again (8000 and
-- a 13534 that names it): 0004's trigger recorded bans only, so the list left
-- such a member out until the next change (found by a red team).
CREATE OR REPLACE FUNCTION waggle_community_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  c bigint := coalesce(NEW.community_id, OLD.community_id);
  was boolean;
  now_active boolean;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('waggle_community_membership:' || c, 0));
  IF TG_TABLE_NAME = 'community_members' THEN
    was := TG_OP <> 'INSERT' AND OLD.removed_at IS NULL;
    now_active := TG_OP <> 'DELETE' AND NEW.removed_at IS NULL;
    IF was <> now_active THEN
      INSERT INTO community_changes (community_id, pubkey, change)
        VALUES (c, coalesce(NEW.pubkey, OLD.pubkey), CASE WHEN now_active THEN 'added' ELSE 'removed' END);
    END IF;
  ELSIF TG_TABLE_NAME = 'community_banned_pubkeys' THEN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO community_changes (community_id, pubkey, change) VALUES (c, NEW.pubkey, 'banned');
    ELSIF TG_OP = 'DELETE' AND EXISTS (
        SELECT 1 FROM community_members m
         WHERE m.community_id = c AND m.pubkey = OLD.pubkey AND m.removed_at IS NULL) THEN
      -- An unbanned key that is still a member is back on the list.
      INSERT INTO community_changes (community_id, pubkey, change) VALUES (c, OLD.pubkey, 'added');
    END IF;
  END IF;
  PERFORM pg_notify('waggle_community', c::text);
  RETURN coalesce(NEW, OLD);
END
$$;

