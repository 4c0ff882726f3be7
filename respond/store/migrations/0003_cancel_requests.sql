-- A cancel asked for on any replica is kept, not only signalled: the replica running the
-- response sees it when it next stores events, even if it missed the NOTIFY.

ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
