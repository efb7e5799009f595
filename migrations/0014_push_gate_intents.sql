-- 0014_push_gate_intents: the push gate across a cluster (docs/push.md,
-- "Several nodes").
--
-- Before a node writes a push lease it records the intent here, and only
-- then reads the registry (bus_nodes) to ask every other live node to gate
-- the community. A node that starts registers first and reads this table
-- after: if the lease's registry read missed it, its own registration
-- committed after that read, so after the intent, and its load sees the
-- intent. Either way no node is left skipping the gate of a community that
-- is about to have a lease. One row per community, refreshed by each lease;
-- a load reads the rows of the last ten minutes (a lease is written within
-- a minute of its intent or refused, see ingest_state).
CREATE TABLE push_gate_intents (
  community_id bigint      PRIMARY KEY REFERENCES communities (id),
  noted_at     timestamptz NOT NULL DEFAULT now()
);
