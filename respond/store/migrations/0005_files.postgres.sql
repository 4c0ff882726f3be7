-- Files, vector stores and their chunks (docs/files.md). Spelled per database: bytes are a
-- BYTEA here and BLOB in SQLite, and full-text search is tsvector here, FTS5 there.
-- Keep 0005_files.sqlite.sql the same table for table.

-- An uploaded file with its bytes: every process using the store serves every file.
CREATE TABLE files (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    purpose TEXT NOT NULL,
    body TEXT NOT NULL,
    content BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
);

CREATE INDEX files_by_tenant ON files (tenant, created_at, id);

CREATE TABLE vector_stores (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX vector_stores_by_tenant ON vector_stores (tenant, created_at, id);

-- A file in a vector store. Indexing is kept here, not in memory: an 'in_progress' file
-- is claimed by one process (claimed_by, claimed_at); a claim whose process died is taken
-- over, and `attempts` bounds the retries before the file is failed.
CREATE TABLE vector_store_files (
    vector_store_id TEXT NOT NULL,
    file_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    status TEXT NOT NULL,
    batch_id TEXT,
    body TEXT NOT NULL,
    usage_bytes BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_by TEXT,
    claimed_at BIGINT,
    PRIMARY KEY (vector_store_id, file_id)
);

CREATE INDEX vector_store_files_by_status ON vector_store_files (status);

CREATE INDEX vector_store_files_by_file ON vector_store_files (file_id);

CREATE TABLE file_batches (
    id TEXT PRIMARY KEY,
    vector_store_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- The chunks of an indexed file; `embedding` is float32 little-endian, NULL without a model.
CREATE TABLE chunks (
    id BIGSERIAL PRIMARY KEY,
    vector_store_id TEXT NOT NULL,
    file_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    embedding BYTEA,
    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);

CREATE INDEX chunks_by_file ON chunks (vector_store_id, file_id, position);

-- The lexical index (ts_rank_cd ranks what it finds).
CREATE INDEX chunks_tsv ON chunks USING GIN (tsv);
