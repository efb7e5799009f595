-- 0008_listener_access: what an operator listener may be sent, in one place
-- (docs/delivery.md, "Outbox"). The mention outbox writes a row only when it
-- holds, and a claim deletes the rows for which it no longer holds, so the
-- rule is the same at both ends.
--
-- A listener is trusted with nothing its own key could not read at that
-- moment: the event is live (not deleted, not expired: NIP-40, `p_now` in unix
-- seconds); the listener is not banned from the community and, unless the
-- community is open, is an active member; an event posted in a channel needs
-- the channel not deleted and either open or with the listener as an active
-- member (registering a private channel's members as targets proves nothing
-- about the listener's own access). Archived channels stay readable, as for
-- every reader.
CREATE FUNCTION waggle_listener_may_read(p_community bigint, p_event bytea, p_listener bytea,
                                         p_now bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM events e
                  WHERE e.community_id = p_community AND e.id = p_event
                    AND e.deleted_at IS NULL
                    AND (e.expires_at IS NULL OR e.expires_at > p_now)
                    AND (e.channel IS NULL
                         OR EXISTS (SELECT 1 FROM channels ch
                                     WHERE ch.community_id = e.community_id AND ch.id = e.channel
                                       AND ch.deleted_at IS NULL
                                       AND (ch.visibility = 'open'
                                            OR EXISTS (SELECT 1 FROM channel_members cm
                                                        WHERE cm.community_id = ch.community_id
                                                          AND cm.channel_id = ch.id
                                                          AND cm.pubkey = p_listener
                                                          AND cm.removed_at IS NULL)))))
     AND NOT EXISTS (SELECT 1 FROM community_banned_pubkeys b
                      WHERE b.community_id = p_community AND b.pubkey = p_listener)
     AND EXISTS (SELECT 1 FROM communities co
                  WHERE co.id = p_community
                    AND (co.policy = 'open'
                         OR EXISTS (SELECT 1 FROM community_members m
                                     WHERE m.community_id = p_community
                                       AND m.pubkey = p_listener
                                       AND m.removed_at IS NULL)))
$$;
