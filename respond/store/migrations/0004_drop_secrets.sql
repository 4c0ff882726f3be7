-- Compaction items are now sealed with the server's key (--secret-key / the data
-- directory, as sealed reasoning is), so the store keeps no secrets any more.

DROP TABLE secrets;
