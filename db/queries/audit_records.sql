-- name: AuditRecordInsert :exec
INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
VALUES (@user_id, @action, @resource_type, @resource_id, @data);
