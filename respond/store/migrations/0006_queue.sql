-- The durable background queue: a queued response keeps its request (the create body as
-- JSON), so that any replica can start it. A queued row with runner NULL waits for a
-- replica to claim it; the runner column then names the replica that runs it.

ALTER TABLE responses ADD COLUMN request TEXT;

CREATE INDEX responses_queue ON responses (status, runner, created_at);
