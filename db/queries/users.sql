-- name: UserInsert :one
INSERT INTO users (email, api_key_hash)
VALUES (@email, @api_key_hash)
RETURNING id, email, created_at;

-- name: UserGetByAPIKeyHash :one
SELECT id, email
FROM users
WHERE api_key_hash = @api_key_hash;
