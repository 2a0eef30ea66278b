-- +goose Up
-- When a loss of history happened, not when it was seen. The heartbeat
-- sees a new timeline or oid up to a heartbeat after the restored or
-- promoted database began serving, and a lost key sent again in between
-- is a key made "before the loss" if the loss is dated when it was seen:
-- it is never looked up before its first send (00022).
--
-- history_confirmed_at is when the heartbeat last found the recorded
-- timeline and oid unchanged (written at most about every 30 s). After a
-- restore or a promotion it is the old history's own value, so no later
-- than the loss: a loss is dated from it (history_lost_at, less a minute
-- for the two servers' clocks), and history_loss_seen_at keeps when it
-- was seen, from which the lookup horizon runs. It is not filled in here:
-- a backup taken before this migration, restored, would get the time of
-- the restore; a loss found with none recorded is dated when it is seen.
ALTER TABLE deployment
    ADD COLUMN history_confirmed_at timestamptz,
    ADD COLUMN history_loss_seen_at timestamptz;

-- +goose Down
ALTER TABLE deployment
    DROP COLUMN history_loss_seen_at,
    DROP COLUMN history_confirmed_at;
