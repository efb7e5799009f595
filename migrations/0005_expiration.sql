-- 0005_expiration: NIP-40. The unix second at which a stored event expires
-- (its first `expiration` tag; NULL = never), written by the write path with
-- the event. Reads serve a row only while `expires_at IS NULL OR expires_at >
-- now` (now is a parameter from the reading actor's clock, docs/expiration.md);
-- the expiration reaper then deletes it, and its event_tags rows, for good.
--
-- Adding a nullable column without a default rewrites nothing: existing rows
-- read as NULL (never expire), and the ALTER holds its ACCESS EXCLUSIVE lock
-- only for the catalog change.
ALTER TABLE events ADD COLUMN expires_at bigint;

-- The reaper's scan: per community, due rows oldest first
-- (`community_id = $1 AND expires_at <= $2 ORDER BY expires_at`, a range scan
-- that reads only due rows). It leads with community_id like every tenant
-- index, so the reaper walks communities one by one instead of the whole
-- table. Partial: it holds only events that carry an expiration, so ordinary
-- traffic does not pay for it.
CREATE INDEX events_expiring ON events (community_id, expires_at) WHERE expires_at IS NOT NULL;
