-- Background runs: which process runs a response, and which processes are alive.
-- A queued / in_progress response whose runner stopped heartbeating is failed by recovery.

ALTER TABLE responses ADD COLUMN runner TEXT;

CREATE TABLE runners (
    id TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
