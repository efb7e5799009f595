-- 0013_cluster: the commit-ordered cursor of cluster fanout (docs/scaling.md).
--
-- Every node of a cluster delivers the events other nodes committed by
-- reading them from here, by snapshot differences over the transaction id
-- that wrote each row: what committed after one snapshot of the node and by
-- the next. Unlike a BIGSERIAL cursor (ids commit out of order, and a reader
-- past a higher id skips a lower one that commits later), this skips
-- nothing and needs no time margin. The bus only rings the doorbell.
--
-- The default stamps every insert, whichever path writes it (the writer
-- sessions, the group session, the roster fence, imports), so no write path
-- can forget it. Updates (deletions) keep the stamp: the cursor follows
-- inserts only.
ALTER TABLE events ADD COLUMN commit_xid xid8 NOT NULL DEFAULT pg_current_xact_id();

-- The tail reads a window of transaction ids (pg_snapshot_xmin of the older
-- snapshot up to pg_snapshot_xmax of the newer): a range scan of this index.
CREATE INDEX events_commit_xid ON events (commit_xid);

-- Who lost access, in the same order: the tail reads the changes of
-- community_changes (membership removals, bans, a policy change) in the
-- same windows and hands the revocations they imply to its hub between the
-- events, by transaction id, so a ban on one node ends the banned key's
-- subscriptions on every node before any event that committed after it.
ALTER TABLE community_changes ADD COLUMN commit_xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX community_changes_commit_xid ON community_changes (commit_xid);
