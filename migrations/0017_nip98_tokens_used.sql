-- 0017_nip98_tokens_used: a NIP-98 token that changed something is good once
-- in the whole cluster.
--
-- Each node remembers the tokens it saw (actors/support/seen_tokens), but a
-- token captured on its way to one node could be sent to another within its
-- minute. A NIP-86 call records its token in the call's own transaction: the
-- primary key makes a second use, on any node, find the first (waiting for
-- it if it has not committed yet) and be refused; a call that rolls back
-- leaves its token unused. Rows are needed only until the token could no
-- longer pass (its created_at + the auth window); each insert deletes the
-- expired ones. Not a tenant table: a signature names no community.
CREATE TABLE nip98_tokens_used (
  token      bytea       PRIMARY KEY,  -- the token's signature (64 bytes)
  expires_at timestamptz NOT NULL
);
CREATE INDEX nip98_tokens_used_expiry ON nip98_tokens_used (expires_at);
