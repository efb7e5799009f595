-- 0015_listener_access_plan: the same rule as 0008, in PL/pgSQL, for its plan.
--
-- A SQL function whose body holds sub-selects is never inlined, and each
-- query that calls it plans that body again: about 0.9 ms of planning in
-- every mention claim, mention enqueue and push match, on the paths of a
-- listener's wake and of a mention's OK (docs/benchmarks.md, "Operator
-- listener wake"). PL/pgSQL keeps the plan of its expression for the
-- session. The rule itself is 0008's, word for word.
CREATE OR REPLACE FUNCTION waggle_listener_may_read(p_community bigint, p_event bytea,
                                                    p_listener bytea, p_now bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN EXISTS (SELECT 1 FROM events e
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
                                       AND m.removed_at IS NULL)));
END
$$;
