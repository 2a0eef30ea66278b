-- ReceiptInsert records the receipt of a payment once: a second delivery of
-- the same job inserts nothing and returns no row.
-- name: ReceiptInsert :one
INSERT INTO receipts (payment_id, user_id, amount, currency)
SELECT p.id, p.user_id, p.amount, p.currency
FROM payments AS p
WHERE p.id = @payment_id
ON CONFLICT (payment_id) DO NOTHING
RETURNING *;
