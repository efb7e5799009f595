-- 0016_listener_turns_by_community: a listener's claims take its communities
-- in turns (red-team R14-1).
--
-- The claim took one listener's due rows oldest first whatever their
-- community, so an operator's one listener key serving agents in many
-- communities had a quiet community's mentions wait behind a flood in
-- another (and past 15 minutes reaped). Now each claim first lists the
-- listener's communities with due rows, those waiting longest first, and
-- takes the oldest row of each before the second of any.
--
-- The due index leads with the listener (the node claims across communities:
-- the tenant rule's exemption, tests/db/migrate_test.cpp) and then the
-- community, so both the walk over a listener's communities and the oldest
-- due row of one are index probes.
DROP INDEX operator_listener_outbox_due;
CREATE INDEX operator_listener_outbox_due
  ON operator_listener_outbox (listener_pubkey, community_id, next_attempt_at, id);

-- The communities where `p_listener` has rows a claim may take now, those
-- whose oldest such row has waited longest first, at most `p_limit`. A skip
-- scan: one probe per community the listener has rows in, one more for its
-- oldest claimable row; never a scan of a flood's rows. PL/pgSQL, so its
-- statements are planned once per session (as 0015), and after a few calls
-- with a GENERIC plan: every condition must then still be an index
-- condition, so the walk starts from the least bigint rather than from a
-- NULL tested with OR (which a generic plan turns into a filter over all of
-- the listener's rows: the red team's 200,000-row flood was read on every
-- probe).
CREATE FUNCTION waggle_listener_due_communities(p_listener bytea, p_max_attempts int,
                                                p_retention_seconds bigint, p_limit int)
RETURNS TABLE (community_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_at bigint := -9223372036854775808;
  v_next bigint;
  v_due timestamptz;
  v_ids bigint[] := '{}';
  v_dues timestamptz[] := '{}';
BEGIN
  LOOP
    SELECT o.community_id INTO v_next
      FROM operator_listener_outbox o
     WHERE o.listener_pubkey = p_listener AND o.community_id > v_at
     ORDER BY o.community_id
     LIMIT 1;
    EXIT WHEN NOT FOUND;
    SELECT o.next_attempt_at INTO v_due
      FROM operator_listener_outbox o
     WHERE o.listener_pubkey = p_listener AND o.community_id = v_next
       AND o.next_attempt_at <= now() AND o.attempts < p_max_attempts
       AND o.created_at > now() - p_retention_seconds * interval '1 second'
     ORDER BY o.next_attempt_at, o.id
     LIMIT 1;
    IF FOUND THEN
      v_ids := v_ids || v_next;
      v_dues := v_dues || v_due;
    END IF;
    v_at := v_next;
  END LOOP;
  RETURN QUERY
    SELECT u.id FROM unnest(v_ids, v_dues) AS u(id, due) ORDER BY u.due, u.id LIMIT p_limit;
END
$$;
