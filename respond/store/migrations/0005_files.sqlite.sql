-- Files, vector stores and their chunks (docs/files.md). Spelled per database: bytes are a
-- BLOB here and BYTEA in PostgreSQL, and full-text search is FTS5 here, tsvector there.
-- Keep 0005_files.postgres.sql the same table for table.

-- An uploaded file with its bytes: every process using the store serves every file.
CREATE TABLE files (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    purpose TEXT NOT NULL,
    body TEXT NOT NULL,
    content BLOB NOT NULL,
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
    id INTEGER PRIMARY KEY,
    vector_store_id TEXT NOT NULL,
    file_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB
);

CREATE INDEX chunks_by_file ON chunks (vector_store_id, file_id, position);

-- The lexical index: one row per chunk, rowid = chunks.id (kept by the store's code).
CREATE VIRTUAL TABLE chunks_fts USING fts5(text, tokenize = 'porter unicode61');
