-- 0004_community_access: who may use a community (docs/communities.md).
--
-- A community has a policy: `closed` (only members do anything beyond AUTH),
-- `open` (any authenticated key, the behaviour before this migration, kept
-- for the communities that already exist) or `invite` (closed, and NIP-43
-- invite codes let new keys in). Members have a role; removal is soft, as in
-- channel_members. Management (NIP-86, `waggle community`) adds bans of keys
-- and events, kind rules, blocked IPs and this community's NIP-11 text, and
-- every call is audited.
--
-- Every change of who may use a community (membership, a ban, the policy)
-- runs under `waggle_community_membership:<community>` EXCLUSIVE, taken here
-- by triggers so a script in psql cannot slip past, and leaves a row in
-- community_changes: the outbox the relay drains to publish NIP-43's 8000 /
-- 8001 / 13534 and to end the live subscriptions of whoever lost access.
-- The publisher takes the same key SHARED, so every change it has not seen
-- is either committed (visible to its next statement) or still waiting.

ALTER TABLE communities
  ADD COLUMN policy text NOT NULL DEFAULT 'open'
    CONSTRAINT communities_policy CHECK (policy IN ('open', 'closed', 'invite')),
  ADD COLUMN description text NOT NULL DEFAULT '',
  ADD COLUMN icon text NOT NULL DEFAULT '';
-- Existing communities keep today's behaviour (open); new ones are closed.
ALTER TABLE communities ALTER COLUMN policy SET DEFAULT 'closed';

CREATE TABLE community_members (
  community_id bigint      NOT NULL REFERENCES communities (id),
  pubkey       bytea       NOT NULL,
  role         text        NOT NULL,
  added_by     bytea,       -- NULL: the operator (command line)
  added_at     timestamptz NOT NULL DEFAULT now(),
  removed_at   timestamptz,
  removed_by   bytea,
  PRIMARY KEY (community_id, pubkey),
  CONSTRAINT community_members_role CHECK (role IN ('owner', 'admin', 'member')),
  CONSTRAINT community_members_pubkey_len CHECK (octet_length(pubkey) = 32)
);
CREATE INDEX community_members_active ON community_members (community_id, pubkey)
  INCLUDE (role) WHERE removed_at IS NULL;

CREATE TABLE community_banned_pubkeys (
  community_id bigint      NOT NULL REFERENCES communities (id),
  pubkey       bytea       NOT NULL,
  reason       text        NOT NULL DEFAULT '',
  banned_by    bytea,
  banned_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, pubkey),
  CONSTRAINT community_banned_pubkeys_len CHECK (octet_length(pubkey) = 32)
);

CREATE TABLE community_banned_events (
  community_id bigint      NOT NULL REFERENCES communities (id),
  event_id     bytea       NOT NULL,
  reason       text        NOT NULL DEFAULT '',
  banned_by    bytea,
  banned_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, event_id),
  CONSTRAINT community_banned_events_len CHECK (octet_length(event_id) = 32)
);

-- Kind rules: with any `allowed` row, only those kinds are accepted; a
-- `disallowed` row refuses its kind. The relay's own events are exempt.
CREATE TABLE community_kinds (
  community_id bigint  NOT NULL REFERENCES communities (id),
  kind         int     NOT NULL,
  allowed      boolean NOT NULL,
  PRIMARY KEY (community_id, kind),
  CONSTRAINT community_kinds_range CHECK (kind BETWEEN 0 AND 65535)
);

CREATE TABLE community_blocked_ips (
  community_id bigint      NOT NULL REFERENCES communities (id),
  ip           inet        NOT NULL,
  reason       text        NOT NULL DEFAULT '',
  blocked_by   bytea,
  blocked_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (community_id, ip)
);

-- NIP-43 invite codes: single use, expiring. Only a hash is kept, so a
-- database dump does not hand out working codes.
CREATE TABLE community_invites (
  community_id bigint      NOT NULL REFERENCES communities (id),
  code_hash    bytea       NOT NULL,
  created_by   bytea       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  claimed_by   bytea,
  claimed_at   timestamptz,
  PRIMARY KEY (community_id, code_hash)
);

-- Who did what, when: every NIP-86 call (granted or refused after its
-- signature checked), every `waggle community` change, every NIP-43 claim.
CREATE TABLE community_audit (
  community_id bigint      NOT NULL REFERENCES communities (id),
  id           bigserial,
  at           timestamptz NOT NULL DEFAULT now(),
  caller       bytea,       -- NULL: the operator (command line)
  via          text        NOT NULL CONSTRAINT community_audit_via CHECK (via IN ('nip86', 'cli', 'nip43')),
  method       text        NOT NULL,
  params       text        NOT NULL DEFAULT '[]',
  ok           boolean     NOT NULL,
  detail       text        NOT NULL DEFAULT '',
  PRIMARY KEY (community_id, id)
);

-- The outbox of access changes (see the header). `published` is set by the
-- publication that signed the NIP-43 events for it, in the same
-- transaction; changes that publish nothing (a ban of a non-member, a policy
-- change) are marked the same way once their revocations went out.
CREATE TABLE community_changes (
  community_id bigint      NOT NULL REFERENCES communities (id),
  seq          bigserial,
  pubkey       bytea,       -- NULL for policy changes
  change       text        NOT NULL
    CONSTRAINT community_changes_change CHECK (change IN ('added', 'removed', 'banned', 'policy')),
  at           timestamptz NOT NULL DEFAULT now(),
  published    boolean     NOT NULL DEFAULT false,
  PRIMARY KEY (community_id, seq)
);
CREATE INDEX community_changes_pending ON community_changes (community_id, seq)
  WHERE NOT published;

-- The lock and the outbox row for every change, whoever makes it. Re-entrant
-- for the relay's own transactions (they took the key already).
CREATE FUNCTION waggle_community_change() RETURNS trigger
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
    END IF;
  END IF;
  PERFORM pg_notify('waggle_community', c::text);
  RETURN coalesce(NEW, OLD);
END
$$;

CREATE TRIGGER waggle_community_member_change
  BEFORE INSERT OR UPDATE OR DELETE ON community_members
  FOR EACH ROW EXECUTE FUNCTION waggle_community_change();
CREATE TRIGGER waggle_community_ban_change
  BEFORE INSERT OR DELETE ON community_banned_pubkeys
  FOR EACH ROW EXECUTE FUNCTION waggle_community_change();
-- The communities row names its community `id`, so it has a function of its own.
CREATE FUNCTION waggle_community_policy_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.policy IS DISTINCT FROM OLD.policy THEN
    PERFORM pg_advisory_xact_lock(hashtextextended('waggle_community_membership:' || NEW.id, 0));
    INSERT INTO community_changes (community_id, change) VALUES (NEW.id, 'policy');
  END IF;
  -- Name, description, icon, policy: the directory re-reads the row.
  PERFORM pg_notify('waggle_community', NEW.id::text);
  RETURN NEW;
END
$$;
CREATE TRIGGER waggle_community_policy_change
  BEFORE UPDATE OF policy, name, description, icon ON communities
  FOR EACH ROW EXECUTE FUNCTION waggle_community_policy_change();
CREATE FUNCTION waggle_community_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('waggle_community', coalesce(NEW.community_id, OLD.community_id)::text);
  RETURN coalesce(NEW, OLD);
END
$$;
CREATE TRIGGER waggle_community_ip_change
  AFTER INSERT OR UPDATE OR DELETE ON community_blocked_ips
  FOR EACH ROW EXECUTE FUNCTION waggle_community_notify();
