-- 0011_search: NIP-50 full-text search over event content (docs/search.md).
--
-- `search` is the content's tsvector under the 'simple' configuration
-- (lower-cased words, no stemming, no stop words: team chat mixes languages,
-- code identifiers and names, which a language's stemmer would mangle). The
-- write path fills it in the statement that inserts the event, from text the
-- relay prepares (NUL and invalid UTF-8 replaced, bounded length), so nothing
-- here can fail on an event: no trigger, no expression over `raw` (which may
-- hold \u0000, that no text or jsonb value can). NULL when there is nothing
-- to search: empty content, and kinds whose content is never served or is
-- ciphertext (docs/search.md, "What is indexed").
--
-- A nullable column without a default rewrites nothing. Events stored before
-- this migration keep NULL and are not found by search (docs/search.md,
-- "Events stored before search").
ALTER TABLE events ADD COLUMN search tsvector;

-- btree_gin gives GIN an operator class for bigint, so the index leads with
-- community_id like every tenant index: a search reads the posting lists of
-- its own community's words, never another tenant's. It is a trusted
-- extension (PostgreSQL 13+): the database owner may create it without being
-- a superuser. Debian's postgresql-15 ships it.
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- Partial like the other live indexes: deleted rows and rows with nothing to
-- search cost the index nothing.
CREATE INDEX events_live_search ON events USING gin (community_id, search)
  WHERE deleted_at IS NULL AND search IS NOT NULL;
