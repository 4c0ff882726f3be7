-- Code interpreter containers and their files (docs/tools.md#code-interpreter). A container's
-- files are on the disk of the replica that made it (`replica`); the store keeps what every
-- replica answers about it: the container, its files' metadata, and when it expires
-- (`expires_at`: last activity plus its expires_after minutes).

CREATE TABLE containers (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    replica TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE INDEX containers_by_tenant ON containers (tenant, created_at, id);

CREATE INDEX containers_by_expiry ON containers (expires_at);

CREATE TABLE container_files (
    id TEXT PRIMARY KEY,
    container_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    path TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX container_files_by_path ON container_files (container_id, path);

CREATE INDEX container_files_by_container ON container_files (container_id, created_at, id);
