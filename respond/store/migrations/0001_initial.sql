-- respond store, first schema. Shared by SQLite and PostgreSQL: plain types only.
-- JSON is kept as TEXT (the exact wire form); times are unix seconds.
-- Migrations are append-only: never edit a released file, add 0002_... instead.

CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX responses_expiry ON responses (expires_at);

CREATE INDEX responses_status ON responses (status);

CREATE TABLE response_events (
    response_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);

-- Items of a response (owner 'input' or 'output') or of a conversation ('conversation').
CREATE TABLE items (
    owner_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    position INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (owner_id, owner, position)
);

CREATE INDEX items_by_id ON items (tenant, item_id);

CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX conversations_expiry ON conversations (expires_at);

-- Server-wide secrets shared by replicas (e.g. the key of compaction items).
CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
